package units

import (
	"errors"
	"time"

	"go.yaml.in/yaml/v3"
)

// Rate is a link rate in bits per second, written "400Gbps" in YAML.
type Rate int64

// Size is a number of bytes, written "4MiB", "800KB" or "4096" in YAML.
type Size int64

// Duration is a non-negative time.Duration, written "2us" or "1.5ms" in YAML.
type Duration time.Duration

// ErrNotScalar reports a YAML value that is a list or a mapping where a
// quantity was expected.
var ErrNotScalar = errors.New("want a single value, not a list or mapping")

// String prints r with the largest rate unit that divides it: "400Gbps".
func (r Rate) String() string { return rateUnits.format(int64(r), "bps") }

// String prints s with the largest size unit that divides it, binary units
// first: "4MiB", "800KB", "4097B".
func (s Size) String() string { return sizeUnits.format(int64(s), "B") }

// String prints d as time.Duration does, which ParseDuration reads back.
func (d Duration) String() string { return time.Duration(d).String() }

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// UnmarshalYAML implements yaml.Unmarshaler.
func (r *Rate) UnmarshalYAML(n *yaml.Node) error {
	v, err := decodeScalar(n, ParseRate)
	*r = Rate(v)
	return err
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	v, err := decodeScalar(n, ParseSize)
	*s = Size(v)
	return err
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	v, err := decodeScalar(n, func(s string) (int64, error) {
		d, err := ParseDuration(s)
		return int64(d), err
	})
	*d = Duration(v)
	return err
}

// MarshalYAML implements yaml.Marshaler, so a decoded file prints back in
// the notation it was written in.
func (r Rate) MarshalYAML() (any, error) { return r.String(), nil }

// MarshalYAML implements yaml.Marshaler.
func (s Size) MarshalYAML() (any, error) { return s.String(), nil }

// MarshalYAML implements yaml.Marshaler.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

// decodeScalar parses a scalar node and, on error, records where the value
// was so that the caller can name the field.
func decodeScalar(n *yaml.Node, parse func(string) (int64, error)) (int64, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, &Error{Input: n.Value, Line: n.Line, Column: n.Column, Err: ErrNotScalar}
	}
	v, err := parse(n.Value)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Line, e.Column = n.Line, n.Column
			return 0, e
		}
		return 0, err
	}
	return v, nil
}
