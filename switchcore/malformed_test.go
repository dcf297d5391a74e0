package switchcore

import (
	"errors"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/wire"
)

// DESIGN.md: "no panics on input from the network or a client". A packet
// that is not a valid wire packet is dropped, counted as malformed on the
// port it came in on, and its buffer comes back through Reclaim.
func TestMalformedPacketsCountedAndReturned(t *testing.T) {
	good := dataPacket(hostA, hostB, 1, 0, 0, 100)
	badVersion := append([]byte(nil), good...)
	badVersion[0] = 0x11 // version 1: the layout before the flow tags
	badLength := append([]byte(nil), good[:len(good)-1]...)
	badType := append([]byte(nil), good...)
	badType[0] = wire.Version<<4 | 0x0F
	longPause := append(wire.AppendPause(nil, 1, 5), 0)
	trimmedWithPayload := append([]byte(nil), good...)
	trimmedWithPayload[1] |= wire.DataTrimmed
	cases := map[string][]byte{
		"empty":                 make([]byte, 0, 8),
		"short":                 {0x11, 0, 0},
		"bad version":           badVersion,
		"payload shorter":       badLength,
		"unknown type":          badType,
		"pause too long":        longPause,
		"trimmed with payload":  trimmedWithPayload,
		"header only, no body":  good[:wire.CommonLen:wire.CommonLen],
		"ack one byte too long": append(ackPacket(hostA, hostB, 1), 0),
	}
	h := newHarness(t, twoPorts())
	n := 0
	for name, b := range cases {
		if r := h.recv(portA, b, tosData); r != DropMalformed {
			t.Errorf("%s: Receive = %v, want malformed", name, r)
		}
		n++
		if len(h.spare) != n || (cap(b) > 0 && &h.spare[n-1][:1][0] != &b[:1][0]) {
			t.Fatalf("%s: buffer not handed back through Reclaim", name)
		}
	}
	st := h.sw.Stats()
	if got := st.Ports[portA].RxDrops[DropMalformed].Packets; got != uint64(n) {
		t.Errorf("RxDrops[malformed] = %d, want %d", got, n)
	}
	if st.Ports[portA].Received.Packets != uint64(n) {
		t.Errorf("Received = %d, want %d", st.Ports[portA].Received.Packets, n)
	}
	h.settle()
	if len(h.out) != 0 {
		t.Errorf("malformed packets forwarded: %d", len(h.out))
	}
}

// A packet handed in on a port that does not exist is a driver bug; it is
// dropped, counted apart and returned, not a panic.
func TestBadIngressPort(t *testing.T) {
	h := newHarness(t, twoPorts())
	if r := h.recv(7, dataPacket(hostA, hostB, 1, 0, 0, 10), tosData); r != DropMalformed {
		t.Errorf("Receive on port 7 = %v", r)
	}
	if st := h.sw.Stats(); st.BadIngress.Packets != 1 || st.Totals().Dropped.Packets != 1 {
		t.Errorf("BadIngress = %+v", st.BadIngress)
	}
	if len(h.spare) != 1 {
		t.Errorf("buffer not reclaimed")
	}
}

// Validate names the field at fault, and New refuses an invalid config.
func TestConfigValidateNamesField(t *testing.T) {
	cases := []struct {
		field  string
		mutate func(*Config)
	}{
		{"Ports", func(c *Config) { c.Ports = nil }},
		{"Ports[1].Rate", func(c *Config) { c.Ports[1].Rate = 0 }},
		{"Ports[0].Delay", func(c *Config) { c.Ports[0].Delay = -1 }},
		{"Ports[0].Overhead", func(c *Config) { c.Ports[0].Overhead = -1 }},
		{"Ports[1].DataCap", func(c *Config) { c.Ports[1].DataCap = 0 }},
		{"Ports[1].HeaderCap", func(c *Config) { c.Ports[1].HeaderCap = -5 }},
		{"Ports[0].ECN", func(c *Config) { c.Ports[0].ECN = ECNConfig{Enabled: true, KMin: 10, KMax: 5, PMax: 1} }},
		{"Ports[0].ECN.PMax", func(c *Config) { c.Ports[0].ECN = ECNConfig{Enabled: true, KMin: 1, KMax: 5, PMax: 1.5} }},
		{"Ports[0].Trim", func(c *Config) { c.Ports[0].Trim = 9 }},
		{"Ports[0].TrimmedDSCP", func(c *Config) { c.Ports[0].TrimmedDSCP = 64 }},
		{"Ports[1].Fault.Loss", func(c *Config) { c.Ports[1].Fault.Loss = -0.1 }},
		{"Ports[1].Fault", func(c *Config) { c.Ports[1].Fault.DownStart, c.Ports[1].Fault.DownEnd = 5, 4 }},
		{"Ports[1].Fault.Jitter", func(c *Config) { c.Ports[1].Fault.Jitter = -1 }},
		{"Classes.Control", func(c *Config) { c.Classes.Control = []uint8{64} }},
		{"Classes.Priority[24]", func(c *Config) { c.Classes.Priority = map[uint8]uint8{24: 8} }},
		{"Routes[2]", func(c *Config) { c.Routes[hostB] = []PortID{5} }},
		{"Routes[2]", func(c *Config) { c.Routes[hostB] = nil }},
		{"DefaultRoute", func(c *Config) { c.DefaultRoute = []PortID{2} }},
		{"PFC[3]", func(c *Config) { c.PFC[3] = PFCConfig{Enabled: true, XOff: 10, XOn: 20} }},
		{"PFC[3].Headroom", func(c *Config) { c.PFC[3] = PFCConfig{Enabled: true, XOff: 10, Headroom: -1} }},
		{"PFC[3].PauseTime", func(c *Config) { c.PFC[3] = PFCConfig{Enabled: true, XOff: 10, PauseTime: 70_000_000} }},
		{"PFC[3].WatchdogRecovery", func(c *Config) { c.PFC[3] = PFCConfig{Enabled: true, XOff: 10, WatchdogRecovery: -1} }},
	}
	if err := twoPortsPtr().Validate(); err != nil {
		t.Fatalf("base config invalid: %v", err)
	}
	for _, tc := range cases {
		cfg := twoPorts()
		tc.mutate(&cfg)
		err := cfg.Validate()
		if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.field+":") {
			t.Errorf("%s: Validate = %v, want an error naming %s", tc.field, err, tc.field)
		}
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted an invalid config", tc.field)
		}
	}
}

func twoPortsPtr() *Config {
	c := twoPorts()
	return &c
}
