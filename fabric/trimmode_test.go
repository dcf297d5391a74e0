package fabric_test

import (
	"errors"
	"testing"

	"github.com/forgive-emu/forgive/fabric"
)

// Every trim mode parses back from the name it prints, and an unknown
// name is a config error.
func TestParseTrimModeRoundTrips(t *testing.T) {
	for _, m := range []fabric.TrimMode{fabric.TrimOff, fabric.TrimArrival, fabric.TrimNDP} {
		got, err := fabric.ParseTrimMode(m.String())
		if err != nil || got != m {
			t.Errorf("ParseTrimMode(%q) = %v, %v; want %v", m.String(), got, err, m)
		}
	}
	for _, bad := range []string{"", "NDP", "drop", "TrimMode(3)"} {
		if _, err := fabric.ParseTrimMode(bad); !errors.Is(err, fabric.ErrInvalidConfig) {
			t.Errorf("ParseTrimMode(%q) = %v; want a config error", bad, err)
		}
	}
}
