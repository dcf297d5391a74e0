package budget

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestDefaultConfigIsTheSeeds(t *testing.T) {
	// "P_low ... 0.005 here." "P_high ... 0.1 here." "P ... 1 by
	// default." "one packet is 4,096 bytes"
	c := DefaultConfig()
	if c.PLow != 0.005 || c.PHigh != 0.1 || c.P != 1 || c.PacketBytes != 4096 || c.NoVesting || c.NoExemption {
		t.Fatalf("DefaultConfig() = %+v", c)
	}
	if err := c.Validate(); err != nil {
		t.Fatalf("default config invalid: %v", err)
	}
}

func TestValidateNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		field  string
		modify func(*Config)
	}{
		{"PLow", func(c *Config) { c.PLow = -0.1 }},
		{"PLow", func(c *Config) { c.PLow = math.NaN() }},
		{"PHigh", func(c *Config) { c.PHigh = 1.5 }},
		{"PHigh", func(c *Config) { c.PHigh = math.Inf(1) }},
		{"P", func(c *Config) { c.P = math.Inf(-1) }},
		{"PacketBytes", func(c *Config) { c.PacketBytes = 0 }},
		{"PacketBytes", func(c *Config) { c.PacketBytes = MaxPacketBytes + 1 }},
	} {
		c := DefaultConfig()
		tc.modify(&c)
		err := c.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.field+" =") {
			t.Errorf("Validate(%+v) = %v, want ErrConfig naming %s", c, err, tc.field)
		}
	}
}

func TestValidateAcceptsTheEdges(t *testing.T) {
	// "with 0 <= P <= 1"
	for _, v := range []float64{0, 1, math.SmallestNonzeroFloat64, math.Nextafter(1, 0)} {
		c := Config{PLow: v, PHigh: v, P: v, PacketBytes: 1}
		if err := c.Validate(); err != nil {
			t.Errorf("Validate(%+v): %v", c, err)
		}
	}
}
