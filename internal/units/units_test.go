package units

import (
	"encoding"
	"errors"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestParseRate(t *testing.T) {
	cases := []struct {
		in   string
		want int64
	}{
		{"400Gbps", 400e9},
		{"1.5Gb/s", 1.5e9},
		{"200Mbps", 200e6},
		{"10 Kbps", 10e3},
		{"10kb/s", 10e3},
		{"2Tbps", 2e12},
		{"0", 0},
		{"1000", 1000},
		{"1000bps", 1000},
		{"0.000000001Gbps", 1},
	}
	for _, c := range cases {
		got, err := ParseRate(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func TestParseSize(t *testing.T) {
	cases := []struct {
		in   string
		want int64
	}{
		{"4MiB", 4 << 20},
		{"800KB", 800e3},
		{"800kB", 800e3},
		{"4096", 4096},
		{"4096B", 4096},
		{"1.5KiB", 1536},
		{"0.1GB", 100e6},
		{"2GiB", 2 << 30},
		{"1TB", 1e12},
	}
	for _, c := range cases {
		got, err := ParseSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func TestParseDurationAcceptsMicrosecondsAsUs(t *testing.T) {
	cases := map[string]time.Duration{
		"2us": 2 * time.Microsecond, "2µs": 2 * time.Microsecond, "1.5ms": 1500 * time.Microsecond,
		"0": 0, "1h2m": time.Hour + 2*time.Minute, "100ns": 100,
	}
	for in, want := range cases {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
}

func TestBadQuantitiesNameTheProblem(t *testing.T) {
	cases := []struct {
		parse func(string) (int64, error)
		in    string
		want  error
		text  string
	}{
		{ParseRate, "10Gbs", ErrUnit, `"10Gbs": unknown unit`},
		{ParseRate, "1GBps", ErrUnit, `"1GBps": unknown unit`},
		{ParseRate, "fast", ErrSyntax, `"fast": invalid number`},
		{ParseRate, "-1Gbps", ErrSyntax, `"-1Gbps": invalid number`},
		{ParseRate, "1.2.3Gbps", ErrSyntax, `"1.2.3Gbps": invalid number`},
		{ParseRate, "0.5bps", ErrNotWhole, `"0.5bps": not a whole number of bits per second`},
		{ParseRate, "10000000Tbps", ErrRange, `"10000000Tbps": out of range`},
		{ParseSize, "4MB/s", ErrUnit, `"4MB/s": unknown unit`},
		{ParseSize, "0.5B", ErrNotWhole, `"0.5B": not a whole number of bytes`},
		{ParseSize, "", ErrSyntax, `"": invalid number`},
		{ParseSize, "1e3", ErrUnit, `"1e3": unknown unit`},
		{ParseSize, "99999999999TiB", ErrRange, `"99999999999TiB": out of range`},
		{func(s string) (int64, error) { d, err := ParseDuration(s); return int64(d), err }, "5", ErrSyntax, `"5": invalid number: missing unit in duration`},
		{func(s string) (int64, error) { d, err := ParseDuration(s); return int64(d), err }, "-1s", ErrNegative, `"-1s": negative`},
	}
	for _, c := range cases {
		_, err := c.parse(c.in)
		if !errors.Is(err, c.want) {
			t.Errorf("%q: error %v, want %v", c.in, err, c.want)
			continue
		}
		if !strings.HasPrefix(err.Error(), c.text) {
			t.Errorf("%q: message %q, want prefix %q", c.in, err.Error(), c.text)
		}
	}
}

func TestStringPicksTheLargestExactUnit(t *testing.T) {
	rates := map[Rate]string{400e9: "400Gbps", 1.5e9: "1500Mbps", 7: "7bps", 0: "0bps", 25e3: "25Kbps"}
	for r, want := range rates {
		if got := r.String(); got != want {
			t.Errorf("Rate(%d).String() = %q, want %q", int64(r), got, want)
		}
	}
	sizes := map[Size]string{4 << 20: "4MiB", 800e3: "800KB", 4096: "4KiB", 4097: "4097B", 0: "0B", 1536: "1536B"}
	for s, want := range sizes {
		if got := s.String(); got != want {
			t.Errorf("Size(%d).String() = %q, want %q", int64(s), got, want)
		}
	}
	if got := Duration(2 * time.Microsecond).String(); got != "2µs" {
		t.Errorf("Duration.String() = %q", got)
	}
}

// String and Parse are inverse: whatever a configuration prints can be read
// back to the same value.
func TestStringRoundTrips(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		v := rapid.Int64Range(0, 1<<62).Draw(t, "v")
		if got, err := ParseRate(Rate(v).String()); err != nil || got != v {
			t.Fatalf("rate %d -> %q -> %d, %v", v, Rate(v).String(), got, err)
		}
		if got, err := ParseSize(Size(v).String()); err != nil || got != v {
			t.Fatalf("size %d -> %q -> %d, %v", v, Size(v).String(), got, err)
		}
		if got, err := ParseDuration(Duration(v).String()); err != nil || int64(got) != v {
			t.Fatalf("duration %d -> %q -> %d, %v", v, Duration(v).String(), got, err)
		}
	})
}

// The types decode from and print to text (encoding.TextUnmarshaler and
// TextMarshaler), which is what the YAML decoder and encoder call.
func TestTextRoundTrips(t *testing.T) {
	var r Rate
	var z Size
	var d Duration
	for _, c := range []struct {
		v interface {
			encoding.TextUnmarshaler
			encoding.TextMarshaler
		}
		in, out string
	}{
		{&r, "1.5Gb/s", "1500Mbps"},
		{&z, "4096", "4KiB"},
		{&d, "2us", "2µs"},
	} {
		if err := c.v.UnmarshalText([]byte(c.in)); err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if b, err := c.v.MarshalText(); err != nil || string(b) != c.out {
			t.Errorf("%q printed back as %q, %v; want %q", c.in, b, err, c.out)
		}
	}
	if r != 1.5e9 || z != 4096 || d.Std() != 2*time.Microsecond {
		t.Fatalf("decoded %d %d %v", r, z, d)
	}
}

func TestTextRefusesWhatParseRefuses(t *testing.T) {
	r := Rate(7)
	if err := r.UnmarshalText([]byte("10Gbs")); !errors.Is(err, ErrUnit) || r != 7 {
		t.Errorf("rate: %v, value %d", err, r)
	}
	z := Size(7)
	if err := z.UnmarshalText([]byte("0.5B")); !errors.Is(err, ErrNotWhole) || z != 7 {
		t.Errorf("size: %v, value %d", err, z)
	}
	d := Duration(7)
	if err := d.UnmarshalText([]byte("-1s")); !errors.Is(err, ErrNegative) || d != 7 {
		t.Errorf("duration: %v, value %d", err, d)
	}
}
