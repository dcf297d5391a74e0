package reliability

import (
	"errors"
	"testing"
)

// A mode is read once by name, with the short names the daemons' files
// have always taken, and written back by its own name.
func TestParseModeRoundTrips(t *testing.T) {
	for in, want := range map[string]Mode{"selective-repeat": SelectiveRepeat, "sr": SelectiveRepeat, "go-back-n": GoBackN, "gbn": GoBackN} {
		m, err := ParseMode(in)
		if err != nil || m != want {
			t.Errorf("ParseMode(%q) = %v, %v; want %v", in, m, err, want)
		}
		text, err := m.MarshalText()
		var back Mode
		if err != nil || back.UnmarshalText(text) != nil || back != want || string(text) != want.String() {
			t.Errorf("%v wrote %q (%v) and read back %v", m, text, err, back)
		}
	}
	if _, err := ParseMode("tcp"); !errors.Is(err, ErrUnknownMode) {
		t.Errorf("ParseMode(tcp): %v, want ErrUnknownMode", err)
	}
	if _, err := Mode(7).MarshalText(); !errors.Is(err, ErrUnknownMode) {
		t.Errorf("Mode(7) wrote a name: %v", err)
	}
}
