package topo

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors: every error of the package matches one of them
// (errors.Is).
var (
	// ErrProfile: a profile that does not parse or whose derived values
	// are unusable.
	ErrProfile = errors.New("topo: bad profile")
	// ErrTopology: a topology that does not parse or is inconsistent.
	ErrTopology = errors.New("topo: bad topology")
	// ErrPlace: a topology, profile and options that cannot be placed
	// together (a rank count that does not fit, a bad address prefix, a
	// fault on a port that does not exist).
	ErrPlace = errors.New("topo: cannot place")
)

// Error lists every problem found in one input. Each problem starts with
// the path of its field: `emulation.link_rate: "10Gbs": unknown unit`.
// It matches its Kind and unwraps to the problems, so errors.Is(err,
// units.ErrUnit) works too.
type Error struct {
	Kind     error  // ErrProfile, ErrTopology or ErrPlace
	File     string // the file read, when there is one
	Problems []error
}

func (e *Error) Error() string {
	head := e.Kind.Error()
	if e.File != "" {
		head += ": " + e.File
	}
	if len(e.Problems) == 1 {
		return head + ": " + e.Problems[0].Error()
	}
	var b strings.Builder
	b.WriteString(head + ":")
	for _, p := range e.Problems {
		b.WriteString("\n  " + p.Error())
	}
	return b.String()
}

// Is reports whether target is the error's kind.
func (e *Error) Is(target error) bool { return target == e.Kind }

// Unwrap returns the problems.
func (e *Error) Unwrap() []error { return e.Problems }

// problems collects validation errors, each naming its field.
type problems []error

func (p *problems) add(path, format string, args ...any) {
	*p = append(*p, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
}

// wrap adds err, which already says what is wrong, under path.
func (p *problems) wrap(path string, err error) {
	*p = append(*p, fmt.Errorf("%s: %w", path, err))
}

// err returns nil or an *Error of the given kind.
func (p problems) err(kind error) error {
	if len(p) == 0 {
		return nil
	}
	return &Error{Kind: kind, Problems: p}
}

// withFile names the file an *Error came from.
func withFile(err error, file string) error {
	var e *Error
	if errors.As(err, &e) {
		e.File = file
	}
	return err
}
