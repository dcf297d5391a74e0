package units

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strings"
	"time"
)

// Sentinel errors, wrapped in an *Error that names the input. Their text
// has no package prefix because it reads after a field path:
// `ports[2].rate: "10Gbs": unknown unit`.
var (
	ErrSyntax   = errors.New("invalid number")
	ErrUnit     = errors.New("unknown unit")
	ErrRange    = errors.New("out of range")
	ErrNotWhole = errors.New("not a whole number")
	ErrNegative = errors.New("negative")
)

// Error reports a quantity that does not parse.
type Error struct {
	Input string
	Err   error // wraps one of the sentinels
}

func (e *Error) Error() string { return fmt.Sprintf("%q: %v", e.Input, e.Err) }

func (e *Error) Unwrap() error { return e.Err }

// A unit table maps a suffix to its multiplier.
type unitTable struct {
	kind  string // "bits per second", "bytes": what the base unit is
	mult  map[string]int64
	hint  string // the suffixes, for the unknown-unit message
	names []named
}

// named is a suffix String may print, largest multiplier first.
type named struct {
	suffix string
	mult   int64
}

var rateUnits = unitTable{
	kind: "bits per second",
	mult: map[string]int64{
		"": 1, "bps": 1, "b/s": 1,
		"kbps": 1e3, "Kbps": 1e3, "kb/s": 1e3, "Kb/s": 1e3,
		"Mbps": 1e6, "Mb/s": 1e6,
		"Gbps": 1e9, "Gb/s": 1e9,
		"Tbps": 1e12, "Tb/s": 1e12,
	},
	hint:  "rates take bps, Kbps, Mbps, Gbps, Tbps or b/s, Kb/s, Mb/s, Gb/s, Tb/s",
	names: []named{{"Tbps", 1e12}, {"Gbps", 1e9}, {"Mbps", 1e6}, {"Kbps", 1e3}},
}

var sizeUnits = unitTable{
	kind: "bytes",
	mult: map[string]int64{
		"": 1, "B": 1,
		"KB": 1e3, "kB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
		"KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30, "TiB": 1 << 40,
	},
	hint: "sizes take B, KB, MB, GB, TB (1000) or KiB, MiB, GiB, TiB (1024)",
	names: []named{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10},
		{"TB", 1e12}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}},
}

// ParseRate parses a link rate and returns it in bits per second.
func ParseRate(s string) (int64, error) { return rateUnits.parse(s) }

// ParseSize parses a size and returns it in bytes.
func ParseSize(s string) (int64, error) { return sizeUnits.parse(s) }

// ParseDuration parses a non-negative duration in time.ParseDuration's
// notation ("us" and "µs" are both microseconds).
func ParseDuration(s string) (time.Duration, error) {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		// time's message repeats the input; keep only what went wrong.
		msg := strings.TrimPrefix(err.Error(), "time: ")
		msg, _, _ = strings.Cut(msg, ` "`)
		return 0, &Error{Input: s, Err: fmt.Errorf("%w: %s", ErrSyntax, msg)}
	}
	if d < 0 {
		return 0, &Error{Input: s, Err: ErrNegative}
	}
	return d, nil
}

// parse splits s into a decimal number and a suffix and returns their
// product, computed exactly.
func (t *unitTable) parse(s string) (int64, error) {
	in := strings.TrimSpace(s)
	split := strings.IndexFunc(in, func(r rune) bool { return (r < '0' || r > '9') && r != '.' })
	if split < 0 {
		split = len(in)
	}
	num, suffix := in[:split], strings.TrimSpace(in[split:])
	if !validDecimal(num) {
		return 0, &Error{Input: s, Err: ErrSyntax}
	}
	mult, ok := t.mult[suffix]
	if !ok {
		return 0, &Error{Input: s, Err: fmt.Errorf("%w (%s)", ErrUnit, t.hint)}
	}
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		return 0, &Error{Input: s, Err: ErrSyntax}
	}
	r.Mul(r, new(big.Rat).SetInt64(mult))
	if !r.IsInt() {
		return 0, &Error{Input: s, Err: fmt.Errorf("%w of %s", ErrNotWhole, t.kind)}
	}
	v := r.Num()
	if !v.IsInt64() {
		return 0, &Error{Input: s, Err: fmt.Errorf("%w: above %d %s", ErrRange, int64(math.MaxInt64), t.kind)}
	}
	return v.Int64(), nil
}

// validDecimal reports whether s is digits with at most one point and at
// least one digit: what big.Rat would accept minus signs, exponents and
// fractions, which a configuration file has no use for.
func validDecimal(s string) bool {
	digits, points := 0, 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '.':
			points++
		default:
			return false
		}
	}
	return digits > 0 && points <= 1
}

// format prints v with the largest suffix that divides it exactly, or with
// the base suffix.
func (t *unitTable) format(v int64, base string) string {
	if v != 0 {
		for _, n := range t.names {
			if v%n.mult == 0 {
				return fmt.Sprintf("%d%s", v/n.mult, n.suffix)
			}
		}
	}
	return fmt.Sprintf("%d%s", v, base)
}
