package switchd

import (
	"errors"
	"fmt"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/forgive-emu/forgive/fabric"
)

// valueError is a bad scalar found while decoding, with its position so
// that locate can name the field.
type valueError struct {
	line, column int
	err          error
}

func (e *valueError) Error() string { return e.err.Error() }
func (e *valueError) Unwrap() error { return e.err }

// Position implements yamlconf.Positioned.
func (e *valueError) Position() (line, column int) { return e.line, e.column }

// TrimMode is a port's trim mode in YAML: off, arrival or ndp.
type TrimMode fabric.TrimMode

var errTrimMode = errors.New("unknown trim mode (want off, arrival or ndp)")

// UnmarshalYAML implements yaml.Unmarshaler.
func (m *TrimMode) UnmarshalYAML(n *yaml.Node) error {
	for _, mode := range []fabric.TrimMode{fabric.TrimOff, fabric.TrimArrival, fabric.TrimNDP} {
		if n.Kind == yaml.ScalarNode && n.Value == mode.String() {
			*m = TrimMode(mode)
			return nil
		}
	}
	return &valueError{n.Line, n.Column, fmt.Errorf("%q: %w", n.Value, errTrimMode)}
}

// MarshalYAML implements yaml.Marshaler.
func (m TrimMode) MarshalYAML() (any, error) { return fabric.TrimMode(m).String(), nil }

// Remark is what a port does to the DSCP of the headers it trims: keep it
// ("keep") or set it to a value (a number below 64).
type Remark struct {
	Set  bool
	DSCP uint8
}

var errRemark = errors.New(`want "keep" or a DSCP below 64`)

// UnmarshalYAML implements yaml.Unmarshaler.
func (r *Remark) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if n.Value == "keep" {
			*r = Remark{}
			return nil
		}
		if v, err := strconv.ParseUint(n.Value, 10, 8); err == nil && v < 64 {
			*r = Remark{Set: true, DSCP: uint8(v)}
			return nil
		}
	}
	return &valueError{n.Line, n.Column, fmt.Errorf("%q: %w", n.Value, errRemark)}
}

// MarshalYAML implements yaml.Marshaler.
func (r Remark) MarshalYAML() (any, error) {
	if !r.Set {
		return "keep", nil
	}
	return int(r.DSCP), nil
}
