package trimswitchdrv

import (
	"errors"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/forgive-emu/forgive/internal/yamlconf"
	"github.com/forgive-emu/forgive/switchcore"
)

// TrimMode is a port's trim mode in YAML: off, arrival or ndp.
type TrimMode switchcore.TrimMode

// The trim modes, by their YAML names.
const (
	TrimOff     = TrimMode(switchcore.TrimOff)     // "off": drop-tail
	TrimArrival = TrimMode(switchcore.TrimArrival) // "arrival": trim the arriving packet
	TrimNDP     = TrimMode(switchcore.TrimNDP)     // "ndp": htsim's composite queue
)

// ErrTrimMode is a trim mode that is none of off, arrival and ndp.
var ErrTrimMode = errors.New("unknown trim mode (want off, arrival or ndp)")

// ParseTrimMode reads off, arrival or ndp.
func ParseTrimMode(s string) (TrimMode, error) {
	for _, mode := range []TrimMode{TrimOff, TrimArrival, TrimNDP} {
		if s == mode.String() {
			return mode, nil
		}
	}
	return 0, ErrTrimMode
}

// String returns the mode's YAML name.
func (m TrimMode) String() string { return switchcore.TrimMode(m).String() }

// UnmarshalYAML implements yaml.Unmarshaler.
func (m *TrimMode) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		if mode, err := ParseTrimMode(n.Value); err == nil {
			*m = mode
			return nil
		}
	}
	return yamlconf.Quoted(n, ErrTrimMode)
}

// MarshalYAML implements yaml.Marshaler.
func (m TrimMode) MarshalYAML() (any, error) { return m.String(), nil }

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
	return yamlconf.Quoted(n, errRemark)
}

// MarshalYAML implements yaml.Marshaler.
func (r Remark) MarshalYAML() (any, error) {
	if !r.Set {
		return "keep", nil
	}
	return int(r.DSCP), nil
}
