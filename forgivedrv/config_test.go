package forgivedrv

import (
	"bytes"
	"errors"
	"github.com/forgive-emu/forgive/budget"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/reliability"
	"github.com/forgive-emu/forgive/tss"
)

const minimal = `
host: 3
listen: 127.0.0.3:4793
switch: 127.0.0.103:4793
socket: /tmp/x.sock
line_rate: 100Mbps
`

func TestMinimalConfigTakesDefaults(t *testing.T) {
	c, err := ParseConfig([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.NIC()
	if err != nil {
		t.Fatal(err)
	}
	if n.DCQCN.RateReducePeriod != 4*time.Microsecond {
		t.Errorf("default rate_reduce_period %v, want 4µs", n.DCQCN.RateReducePeriod)
	}
	if n.Host != 3 || n.LineRate != 100e6 || n.MTU != 4096 || !n.Forgive || n.Sender.DetectSpuriousRTO || n.Budget.PHigh != 0.1 || n.Budget.Gather != budget.GatherForgive ||
		n.Sender.Mode != reliability.SelectiveRepeat || n.DCQCN.LineRate != 100e6 {
		t.Fatalf("defaults not applied: %+v", n)
	}
}

func TestConfigOverrides(t *testing.T) {
	c, err := ParseConfig([]byte(minimal + `
cc: none
reliability: {mode: go-back-n, rto_low: 1ms, rto_high: 4ms, window: 64KiB, spurious_rto: true}
forgive: {enabled: false, p_low: 0.01, p_high: 0.2, p: 0.25, no_vesting: true, gather: repair}
dcqcn: {alpha_timer: 1ms, rate_reduce_period: 2ms}
pfc: {watchdog: 30ms, watchdog_recovery: 5ms, watchdog_window: 600ms}
dscp: {gradient: 26}
`))
	if err != nil {
		t.Fatal(err)
	}
	n, _ := c.NIC()
	if n.CC.String() != "none" || n.Sender.Mode != reliability.GoBackN || n.Receiver.Mode != reliability.GoBackN ||
		n.Sender.RTOLow != time.Millisecond || n.Sender.Window != 64<<10 || !n.Sender.DetectSpuriousRTO || n.Forgive ||
		n.Budget.PLow != 0.01 || n.Budget.PHigh != 0.2 || n.Budget.P != 0.25 || !n.Budget.NoVesting || n.Budget.Gather != budget.GatherRepair || n.DCQCN.AlphaTimer != time.Millisecond ||
		n.DCQCN.RateReducePeriod != 2*time.Millisecond || n.DSCP[0] != 26 ||
		n.WatchdogLimit != 30*time.Millisecond || n.WatchdogRecovery != 5*time.Millisecond || n.WatchdogWindow != 600*time.Millisecond {
		t.Fatalf("overrides not applied: %+v", n)
	}
}

// dcqcn.variant mellanox reaches the engine with no byte counter, and
// clamp_target_rate with it; absent, the paper's form runs.
func TestConfigDCQCNVariant(t *testing.T) {
	c, err := ParseConfig([]byte(minimal + "dcqcn: {variant: mellanox, clamp_target_rate: true, alpha_timer: 1us, rate_timer: 900us}\n"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.NIC()
	if err != nil {
		t.Fatal(err)
	}
	if n.DCQCN.Variant.String() != "mellanox" || n.DCQCN.ByteCounter != 0 || !n.DCQCN.ClampTargetRate ||
		n.DCQCN.AlphaTimer != time.Microsecond || n.DCQCN.RateTimer != 900*time.Microsecond {
		t.Fatalf("mellanox not applied: %+v", n.DCQCN)
	}
	c, _ = ParseConfig([]byte(minimal))
	n, _ = c.NIC()
	if n.DCQCN.Variant.String() != "paper" || n.DCQCN.ByteCounter != 10_000_000 || n.DCQCN.ClampTargetRate {
		t.Fatalf("default DCQCN changed: %+v", n.DCQCN)
	}
}

// A probability the file writes is taken as written, 0 included; an
// absent one is the seed's (package budget's default).
func TestForgiveProbabilitiesAbsentOrZero(t *testing.T) {
	c, err := ParseConfig([]byte(minimal + "forgive: {p_low: 0, p: 0}\n"))
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.NIC()
	if err != nil {
		t.Fatal(err)
	}
	if n.Budget.PLow != 0 || n.Budget.P != 0 || n.Budget.PHigh != budget.DefaultPHigh {
		t.Errorf("p_low %v, p_high %v, p %v; want 0, the default %v, 0", n.Budget.PLow, n.Budget.PHigh, n.Budget.P, budget.DefaultPHigh)
	}
}

// ReadConfig decodes a file without validating it: forgived replaces
// fields with its flags first. A file it cannot read, or a key it does
// not know, is a bad config, naming the file.
func TestReadConfigDecodesWithoutValidating(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/host.yaml"
	if err := os.WriteFile(path, []byte(minimal+"log_level: loud\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := ReadConfig(path)
	if err != nil || c.LogLevel != "loud" || c.Host != 3 {
		t.Fatalf("ReadConfig = %+v, %v; want the file decoded, log_level and all", c, err)
	}
	if err := c.Validate(); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "log_level") {
		t.Errorf("Validate = %v; want ErrConfig naming log_level", err)
	}
	c.LogLevel = "debug" // as forgived's --log-level does
	if err := c.Validate(); err != nil {
		t.Errorf("Validate after the override: %v", err)
	}
	if _, err := ReadConfig(dir + "/none.yaml"); !errors.Is(err, ErrConfig) {
		t.Errorf("a missing file: %v; want ErrConfig", err)
	}
	if err := os.WriteFile(path, []byte(minimal+"colour: blue\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadConfig(path); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), path+": ") || !strings.Contains(err.Error(), "colour") {
		t.Errorf("an unknown key: %v; want ErrConfig naming the file and the key", err)
	}
}

// cc: nscc with an nscc section: the network's RTT, target and γ reach
// the NIC, and the engine's NSCC runs at the host's rate and MTU.
func TestConfigNSCC(t *testing.T) {
	c, err := ParseConfig([]byte(minimal + `
cc: nscc
mtu: 2048
nscc: {base_rtt: 10us, target_delay: 6us, gamma: 0.5, max_window_bdp: 2, no_quick_adapt: true}
`))
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.NIC()
	if err != nil {
		t.Fatal(err)
	}
	if n.CC.String() != "nscc" || n.NSCC.BaseRTT != 10*time.Microsecond || n.NSCC.TargetDelay != 6*time.Microsecond ||
		n.NSCC.Gamma != 0.5 || n.NSCC.MaxWindowBDP != 2 || !n.NSCC.NoQuickAdapt {
		t.Fatalf("nscc section not applied: %+v", n.NSCC)
	}
	e, err := nic.New(n)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateFlow(0, nic.FlowSpec{Peer: 9, ID: 1}); err != nil {
		t.Fatal(err)
	}
	// 100 Mb/s × 10 µs = 125 bytes of BDP: the ceiling is one 2,048-byte MTU.
	r, _ := e.Flow(nic.FlowKey{Peer: 9, ID: 1})
	if r.Window != 2048 || r.Rate != 100e6 {
		t.Errorf("flow window %d, rate %v; want 2048 (one MTU) at 100 Mb/s", r.Window, r.Rate)
	}
	// Without the section the reference network's RTT applies.
	c, _ = ParseConfig([]byte(minimal + "cc: nscc\n"))
	if n, _ := c.NIC(); n.NSCC.BaseRTT != 12*time.Microsecond {
		t.Errorf("default base_rtt %v, want 12µs", n.NSCC.BaseRTT)
	}
}

// peer_windows is a list of ranges of peer host ids, each with its
// window (a peer in none takes window), repeated every
// peer_window_period ids when that is set. The file the lab writes
// (Marshal) has a range a line and reads back the same.
func TestPeerWindowRanges(t *testing.T) {
	c, err := ParseConfig([]byte(minimal + `
reliability:
  window: 64KiB
  peer_windows: [{first: 1, last: 2, window: 1MB}, {first: 4, last: 9, window: 4097}]
`))
	if err != nil {
		t.Fatal(err)
	}
	n, err := c.NIC()
	if err != nil {
		t.Fatal(err)
	}
	want := nic.PeerWindows{{First: 1, Last: 2, Window: 1_000_000}, {First: 4, Last: 9, Window: 4097}}
	if !reflect.DeepEqual(n.PeerWindows, want) {
		t.Fatalf("peer windows %+v, want %+v", n.PeerWindows, want)
	}
	for peer, w := range map[uint16]int{0: 0, 1: 1_000_000, 2: 1_000_000, 3: 0, 4: 4097, 9: 4097, 10: 0} {
		if got, _ := n.PeerWindows.Window(peer); got != w {
			t.Errorf("window to host %d: %d, want %d", peer, got, w)
		}
	}
	c.Reliability.PeerWindowPeriod = 10
	b, err := c.Marshal("")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("  peer_windows:\n    - {first: 1, last: 2, window: 1MB}\n    - {first: 4, last: 9, window: 4097B}\n  peer_window_period: 10\n")) {
		t.Errorf("peer_windows written as\n%s", b)
	}
	back, err := ParseConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	bn, _ := back.NIC()
	if !reflect.DeepEqual(bn.PeerWindows, want) || bn.PeerWindowPeriod != 10 {
		t.Errorf("read back as %+v, period %d", bn.PeerWindows, bn.PeerWindowPeriod)
	}
	// every 10 ids: host 11 as host 1, 13 as 3, 20 as 10
	for peer, w := range map[uint16]int{11: 1_000_000, 12: 1_000_000, 13: 0, 19: 4097, 20: 0, 65532: 1_000_000} {
		if got, _ := bn.PeerWindow(peer); got != w {
			t.Errorf("period 10: window to host %d: %d, want %d", peer, got, w)
		}
	}
}

// "A bad config file names the field and the problem."
func TestBadConfigNamesTheField(t *testing.T) {
	cases := map[string]string{
		"host: 0\n":                            "host",
		"line_rate: 10Gbs\n":                   "line_rate",
		"listen: nowhere\n":                    "listen",
		"cc: cubic\n":                          "cc",
		"reliability: {mode: stop-and-wait}\n": "reliability.mode",
		"forgive: {p_high: 1.5}\n":             "PHigh",
		"forgive: {gather: drop}\n":            `forgive.gather: "drop": want forgive, repair or owner`,
		"reliability: {peer_windows: [{first: 2, last: 4, window: 0}]}\n":                                                            "reliability.peer_windows[0].window: 0B: want a size of 1 byte to 2GiB",
		"reliability: {peer_windows: [{first: 2, last: 4, window: 1MB}, {first: 5, last: 5, window: 3GiB}]}\n":                       "reliability.peer_windows[1].window: 3GiB: want a size of 1 byte to 2GiB",
		"reliability: {peer_windows: [{first: 0, last: 4, window: 1MB}]}\n":                                                          "reliability.peer_windows[0].first: 0: want a host id, 1 or more",
		"reliability: {peer_windows: [{last: 4, window: 1MB}]}\n":                                                                    "reliability.peer_windows[0].first: 0: want a host id, 1 or more",
		"reliability: {peer_windows: [{first: 5, last: 4, window: 1MB}]}\n":                                                          "reliability.peer_windows[0].last: 4: want first (5) or more",
		"reliability: {peer_windows: [{first: 5, window: 1MB}]}\n":                                                                   "reliability.peer_windows[0].last: 0: want first (5) or more",
		"reliability: {peer_windows: [{first: 2, last: 4, window: 1MB}, {first: 4, last: 6, window: 1MB}]}\n":                        "reliability.peer_windows[1].first: 4: want above peer_windows[0].last (4): ranges in increasing order, not overlapping",
		"reliability: {peer_windows: [{first: 7, last: 9, window: 1MB}, {first: 2, last: 4, window: 1MB}]}\n":                        "reliability.peer_windows[1].first: 2: want above peer_windows[0].last (9)",
		"reliability: {peer_windows: [{first: 2, last: 70000, window: 1MB}]}\n":                                                      "reliability.peer_windows[0].last",
		"reliability: {peer_windows: [{first: 2, to: 4, window: 1MB}]}\n":                                                            "reliability.peer_windows[0].to: unknown field",
		"reliability: {peer_window_period: 8, peer_windows: [{first: 1, last: 4, window: 1MB}, {first: 5, last: 9, window: 1MB}]}\n": "reliability.peer_windows[1].last: 9: want peer_window_period (8) or less",
		"reliability: {peer_window_period: 8}\n":                                                                                     "reliability.peer_window_period: 8: want absent without peer_windows",
		"reliability: {peer_windows: {2: 496200B}}\n":                                                                                "reliability.peer_windows",
		"reliability: {window_scale: bdp}\n":                                                                                         "reliability.window_scale: bdp: want none or rate",
		"forgive: {exemption: linerate}\n":                                                                                           `forgive.exemption: "linerate": want hold, line-rate or no-cut`,
		"forgive: {exemption: no-cut}\n":                                                                                             `forgive.exemption: "no-cut": want a rule for cc dcqcn`,
		"colour: blue\n":                                                                                                             "colour",
		"reliability: {rto_low: 5ms, rto_high: 1ms}":                                                                                 "RTOHigh",
		// What start-up refuses, ParseConfig (and so forgived --check) refuses.
		"log_level: loud\n":                                     `log_level: "loud": want debug, info, warn or error`,
		"metrics: 'bad addr'\n":                                 `metrics: "bad addr": want host:port`,
		"listen: \"[::1]:4793\"\n":                              "listen: [::1]:4793: want an IPv4 address",
		"switch: 127.0.0.103:0\n":                               "switch: 127.0.0.103:0: want an IPv4 address",
		"seed: 1.5\n":                                           `seed: "1.5": want an integer`,
		"mtu: 4096.5\n":                                         `mtu: "4096.5": want an integer`,
		"dscp: {gradient: 26, data: 1}":                         "dscp.data: unknown field",
		"pfc: {watchdog: -1ms}\n":                               "pfc",
		"pfc: {watchdog_window: 100ms}\n":                       "pfc.watchdog_window: 100ms: want longer than the watchdog's 100ms",
		"dcqcn: {rate_reduce_period: -1ms}\n":                   "dcqcn.rate_reduce_period",
		"dcqcn: {variant: hpcc}\n":                              "dcqcn.variant",
		"dcqcn: {variant: mellanox, byte_counter: 10MB}\n":      "dcqcn.byte_counter",
		"dcqcn: {clamp_target_rate: true}\n":                    "dcqcn.clamp_target_rate",
		"nscc: {base_rtt: -1us}\n":                              "nscc",
		"nscc: {gamma: 2}\n":                                    "NSCCConfig.Gamma",
		"nscc: {window: 1}\n":                                   "nscc.window: unknown field",
		"socket: /" + strings.Repeat("s", MaxSocketPath) + "\n": "socket:",
		"socket_buffer: 2GiB\n":                                 "socket_buffer: 2GiB: want a size of at most 1GiB",
	}
	for extra, field := range cases {
		base := minimal
		key := strings.SplitN(extra, ":", 2)[0]
		base = regexp.MustCompile(`(?m)^`+key+`:.*$`).ReplaceAllString(base, "")
		_, err := ParseConfig([]byte(base + extra))
		if err == nil || !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), field) {
			t.Errorf("%q: error %v, want ErrConfig naming %q", extra, err, field)
		}
	}
}

// The example in docs/forgived.md is a valid file.
func TestDocumentedExampleParses(t *testing.T) {
	doc, err := os.ReadFile("../docs/forgived.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```yaml\n(.*?)```").FindSubmatch(doc)
	if m == nil {
		t.Fatal("no yaml block in docs/forgived.md")
	}
	// Its key file, a real one here: the daemon reads it.
	const keyPath = "/etc/forgive/domain1.key"
	if !bytes.Contains(m[1], []byte("key_file: "+keyPath)) {
		t.Fatalf("the example names no key_file %s", keyPath)
	}
	key := writeKey(t, tss.FormatKeyFile(testKey), 0o600)
	c, err := ParseConfig(bytes.ReplaceAll(m[1], []byte(keyPath), []byte(key)))
	if err != nil {
		t.Fatal(err)
	}
	if ring, err := c.Keyring(); err != nil || ring == nil {
		t.Fatalf("the example's security section: %v, %v", ring, err)
	}
}
