package topo

import (
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/internal/yamlconf"
)

// badValue reports err at node n.
func badValue(n *yaml.Node, err error) *yamlconf.ValueError { return yamlconf.At(n, err) }

// quoted reports err at node n, quoting the value.
func quoted(n *yaml.Node, err error) *yamlconf.ValueError { return yamlconf.Quoted(n, err) }

func scalar(n *yaml.Node) bool { return n.Kind == yaml.ScalarNode }

func notScalar(n *yaml.Node) *yamlconf.ValueError { return badValue(n, yamlconf.ErrNotScalar) }

// Fraction is an exact non-negative rational number, written as a decimal
// ("0.2", "3") or a quotient ("1/256"). It keeps the text it was written
// in, so a derived value prints as the profile wrote it. The zero value is
// unset.
type Fraction struct {
	Num, Den int64
	text     string
}

// Frac returns num/den.
func Frac(num, den int64) Fraction { return Fraction{Num: num, Den: den} }

var errFraction = errors.New("want a non-negative number such as 0.2 or 1/256")

// ParseFraction reads "0.2", "3" or "1/256".
func ParseFraction(s string) (Fraction, error) {
	t := strings.TrimSpace(s)
	ok := t != "" && strings.Trim(t, "0123456789./") == "" && strings.Count(t, "/") <= 1
	r, parsed := new(big.Rat).SetString(t)
	if !ok || !parsed || r.Sign() < 0 || !r.Num().IsInt64() || !r.Denom().IsInt64() {
		return Fraction{}, fmt.Errorf("%q: %w", s, errFraction)
	}
	return Fraction{Num: r.Num().Int64(), Den: r.Denom().Int64(), text: t}, nil
}

// IsSet reports whether the fraction was given.
func (f Fraction) IsSet() bool { return f.Den != 0 }

// Rat returns the exact value (0 when unset).
func (f Fraction) Rat() *big.Rat {
	if f.Den == 0 {
		return new(big.Rat)
	}
	return big.NewRat(f.Num, f.Den)
}

// Float returns the value as a float64.
func (f Fraction) Float() float64 {
	v, _ := f.Rat().Float64()
	return v
}

// String prints the text the fraction was written in, else a decimal when
// that is exact, else num/den.
func (f Fraction) String() string {
	if f.text != "" {
		return f.text
	}
	if f.Den == 0 {
		return "0"
	}
	v := f.Float()
	if r, ok := new(big.Rat).SetString(strconv.FormatFloat(v, 'g', -1, 64)); ok && r.Cmp(f.Rat()) == 0 {
		return strconv.FormatFloat(v, 'g', -1, 64)
	}
	return fmt.Sprintf("%d/%d", f.Num, f.Den)
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (f *Fraction) UnmarshalYAML(n *yaml.Node) error {
	if !scalar(n) {
		return notScalar(n)
	}
	v, err := ParseFraction(n.Value)
	if err != nil {
		return badValue(n, err)
	}
	*f = v
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (f Fraction) MarshalYAML() (any, error) { return f.String(), nil }

// Ratio is an oversubscription ratio, written "2:1" or as a number ("2").
type Ratio struct{ Fraction }

var errRatio = errors.New(`want a ratio such as "2:1" or a number`)

// ParseRatio reads "2:1", "3:2" or "2".
func ParseRatio(s string) (Ratio, error) {
	t := strings.TrimSpace(s)
	num, den, colon := strings.Cut(t, ":")
	if !colon {
		f, err := ParseFraction(t)
		if err != nil || f.Num == 0 {
			return Ratio{}, fmt.Errorf("%q: %w", s, errRatio)
		}
		return Ratio{f}, nil
	}
	a, errA := ParseFraction(num)
	b, errB := ParseFraction(den)
	if errA != nil || errB != nil || a.Num == 0 || b.Num == 0 {
		return Ratio{}, fmt.Errorf("%q: %w", s, errRatio)
	}
	r := new(big.Rat).Quo(a.Rat(), b.Rat())
	if !r.Num().IsInt64() || !r.Denom().IsInt64() {
		return Ratio{}, fmt.Errorf("%q: %w", s, errRatio)
	}
	return Ratio{Fraction{Num: r.Num().Int64(), Den: r.Denom().Int64(), text: t}}, nil
}

// String prints "2:1" for a whole ratio that was not written otherwise.
func (r Ratio) String() string {
	if r.text == "" && r.Den == 1 {
		return fmt.Sprintf("%d:1", r.Num)
	}
	return r.Fraction.String()
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (r *Ratio) UnmarshalYAML(n *yaml.Node) error {
	if !scalar(n) {
		return notScalar(n)
	}
	v, err := ParseRatio(n.Value)
	if err != nil {
		return badValue(n, err)
	}
	*r = v
	return nil
}

// MarshalYAML implements yaml.Marshaler.
func (r Ratio) MarshalYAML() (any, error) { return r.String(), nil }

// LinkDelay is the propagation delay of every switch egress link: a
// duration, or "auto" to have Place choose the delay that makes the
// topology's longest path meet the profile's base RTT.
type LinkDelay struct {
	Auto  bool
	Delay units.Duration
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *LinkDelay) UnmarshalYAML(n *yaml.Node) error {
	if !scalar(n) {
		return notScalar(n)
	}
	if n.Value == "auto" {
		*d = LinkDelay{Auto: true}
		return nil
	}
	v, err := units.ParseDuration(n.Value)
	if err != nil {
		return badValue(n, err)
	}
	*d = LinkDelay{Delay: units.Duration(v)}
	return nil
}

// String prints "auto" or the duration.
func (d LinkDelay) String() string {
	if d.Auto {
		return "auto"
	}
	return d.Delay.String()
}

// MarshalYAML implements yaml.Marshaler.
func (d LinkDelay) MarshalYAML() (any, error) { return d.String(), nil }
