package switchcore_test

import (
	"errors"
	"testing"

	"github.com/forgive-emu/forgive/switchcore"
)

// Every trim mode parses back from the name it prints, and an unknown
// name is a config error.
func TestParseTrimModeRoundTrips(t *testing.T) {
	for _, m := range []switchcore.TrimMode{switchcore.TrimOff, switchcore.TrimArrival, switchcore.TrimNDP} {
		got, err := switchcore.ParseTrimMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseTrimMode(%q) = %v, %v; want %v", m.String(), got, err, m)
		}
	}
	for _, bad := range []string{"", "NDP", "drop", "TrimMode(3)"} {
		if _, err := switchcore.ParseTrimMode(bad); !errors.Is(err, switchcore.ErrInvalidConfig) {
			t.Errorf("ParseTrimMode(%q) = %v; want a config error", bad, err)
		}
	}
}
