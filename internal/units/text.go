package units

import "time"

// Rate is a link rate in bits per second, written "400Gbps" in a file. It
// is the one type of a configured rate, from the YAML files to the
// engines: nic.Config.LineRate, congestion's LineRate, a switch port's
// Rate and the simulator's links.
type Rate int64

// Size is a number of bytes, written "4MiB", "800KB" or "4096" in a file.
type Size int64

// Duration is a non-negative time.Duration, written "2us" or "1.5ms" in a
// file.
type Duration time.Duration

// String prints r with the largest rate unit that divides it: "400Gbps".
func (r Rate) String() string { return rateUnits.format(int64(r), "bps") }

// String prints s with the largest size unit that divides it, binary units
// first: "4MiB", "800KB", "4097B".
func (s Size) String() string { return sizeUnits.format(int64(s), "B") }

// String prints d as time.Duration does, which ParseDuration reads back.
func (d Duration) String() string { return time.Duration(d).String() }

// Std returns d as a time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// The types are encoding.TextMarshaler and encoding.TextUnmarshaler, which
// the YAML decoder calls with a scalar's text: a decoded file prints back
// in the notation it was written in. Where in the file a bad value was is
// the config loader's to say (internal/yamlconf names its field).

// MarshalText implements encoding.TextMarshaler.
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (r *Rate) UnmarshalText(b []byte) error {
	v, err := ParseRate(string(b))
	if err != nil {
		return err
	}
	*r = Rate(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (s Size) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (s *Size) UnmarshalText(b []byte) error {
	v, err := ParseSize(string(b))
	if err != nil {
		return err
	}
	*s = Size(v)
	return nil
}

// MarshalText implements encoding.TextMarshaler.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := ParseDuration(string(b))
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}
