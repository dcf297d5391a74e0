package units

import "testing"

// Every accepted input prints back to a string that parses to the same
// value, and no input panics.

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"400Gbps", "1.5Gb/s", "200Mbps", "0", "10Gbs", ".5Kbps", "9223372036854775807"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseRate(s)
		if err != nil {
			return
		}
		if v < 0 {
			t.Fatalf("ParseRate(%q) = %d", s, v)
		}
		if back, err := ParseRate(Rate(v).String()); err != nil || back != v {
			t.Fatalf("%q -> %d -> %q -> %d, %v", s, v, Rate(v).String(), back, err)
		}
	})
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"4MiB", "800KB", "4096", "1.5KiB", "0.1GB", "8EiB"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSize(s)
		if err != nil {
			return
		}
		if v < 0 {
			t.Fatalf("ParseSize(%q) = %d", s, v)
		}
		if back, err := ParseSize(Size(v).String()); err != nil || back != v {
			t.Fatalf("%q -> %d -> %q -> %d, %v", s, v, Size(v).String(), back, err)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"2us", "1.5ms", "0", "-1s", "1h2m3s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v", s, d)
		}
		if back, err := ParseDuration(Duration(d).String()); err != nil || back != d {
			t.Fatalf("%q -> %v -> %v, %v", s, d, back, err)
		}
	})
}
