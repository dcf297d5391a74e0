package topo

import (
	"bytes"
	"errors"
	"io/fs"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/forgivedrv"
	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/profiles"
)

func TestShippedProfilesLoad(t *testing.T) {
	ps := shippedProfiles(t)
	for _, want := range []string{DefaultProfile, "loopback-fast", "seed-400g-paper", "seed-400g-ns3"} {
		if ps[want] == nil {
			t.Errorf("profile %q is not shipped", want)
		}
	}
	for name, p := range ps {
		if p.Name != name {
			t.Errorf("%s.yaml is named %q", name, p.Name)
		}
		// Every shipped profile scales the same fabric: the seed's. A
		// profile that names a DCQCN variant (seed-400g-ns3) differs in
		// DCQCN, the CNP interval and the window alone.
		ref := p.Reference
		if ref.DCQCN.Variant != "" {
			seed := ps["seed-400g-paper"].Reference
			ref.DCQCN, ref.CNPInterval, ref.Reliability.WindowBDP = seed.DCQCN, seed.CNPInterval, seed.Reliability.WindowBDP
			ref.Reliability.WindowMode, ref.Reliability.WindowScale = seed.Reliability.WindowMode, seed.Reliability.WindowScale
		}
		if !reflect.DeepEqual(ref, ps["seed-400g-paper"].Reference) {
			t.Errorf("%s: reference differs from seed-400g's", name)
		}
	}
}

// The embedded copy is the directory's content.
func TestEmbeddedProfilesMatchTheFiles(t *testing.T) {
	for _, name := range Names(profiles.Files) {
		embedded, err := fs.ReadFile(profiles.Files, name+".yaml")
		if err != nil {
			t.Fatal(err)
		}
		if disk := readText(t, filepath.Join(profileDir, name+".yaml")); !bytes.Equal(embedded, []byte(disk)) {
			t.Errorf("%s: embedded copy differs", name)
		}
	}
	if got, want := len(Names(profiles.Files)), len(shippedProfiles(t)); got != want {
		t.Errorf("%d profiles embedded, %d on disk", got, want)
	}
}

// The default profile's values, worked by hand from the rules of
// docs/profiles.md. Reference: 400 Gb/s, 10 us, so BDP = 400e9 x 10e-6 / 8
// = 500,000 B. Emulation: 100 Mb/s, 2 ms, so BDP = 100e6 x 2e-3 / 8 =
// 25,000 B. Time scales by 2 ms / 10 us = 200, bytes by 25,000 / 500,000
// = 1/20, rates by 100 Mb/s / 400 Gb/s = 1/4000.
func TestLoopbackDerivedByHand(t *testing.T) {
	p := mustProfile(t, "loopback").Params()
	checks := []struct {
		name      string
		got, want int64
	}{
		{"bdp", int64(p.BDP), 25_000},
		// Buffer in BDPs: 4 MiB = 4,194,304 B is 8.388608 BDPs; x 25,000 B.
		{"switch.data_queue", int64(p.Switch.DataQueue), 209_715},
		// ECN at the same fractions of the buffer: 800 KB / 4 MiB of it.
		{"switch.ecn.kmin", int64(p.Switch.ECN.KMin), 40_000},
		{"switch.ecn.kmax", int64(p.Switch.ECN.KMax), 160_000},
		// Timers relative to the RTT: x 200.
		{"dcqcn.alpha_timer", int64(p.DCQCN.AlphaTimer), int64(11 * time.Millisecond)},
		{"dcqcn.rate_timer", int64(p.DCQCN.RateTimer), int64(11 * time.Millisecond)},
		{"cnp_interval", int64(p.CNPInterval), int64(10 * time.Millisecond)},
		{"reliability.rto_low", int64(p.Reliability.RTOLow), int64(20 * time.Millisecond)},
		{"reliability.rto_high", int64(p.Reliability.RTOHigh), int64(64 * time.Millisecond)},
		{"reliability.ack_delay", int64(p.Reliability.AckDelay), int64(time.Millisecond)},
		// Byte counter relative to the BDP: 10 MB / 20.
		{"dcqcn.byte_counter", int64(p.DCQCN.ByteCounter), 500_000},
		// Rate steps relative to the link: 1/1000 and 1/100 of 100 Mb/s.
		{"dcqcn.rai", int64(p.DCQCN.RAI), 100_000},
		{"dcqcn.rhai", int64(p.DCQCN.RHAI), 1_000_000},
		{"dcqcn.min_rate", int64(p.DCQCN.MinRate), 100_000},
		// Eight BDPs of 25 KB are 200 KB, 48.8 packets: 49 whole packets.
		{"reliability.window", int64(p.Reliability.Window), 49 * 4096},
		// 16 KiB of a 977-packet reference window (8 x 500 KB) is 0.8
		// packets of a 49-packet one: at least one packet.
		{"reliability.ack_every", int64(p.Reliability.AckEvery), 4096},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %d, want %d", c.name, c.got, c.want)
		}
	}
	if p.DCQCN.F != 5 || p.DCQCN.G.Float() != 1.0/256 {
		t.Errorf("F = %d, g = %v: pure numbers must not scale", p.DCQCN.F, p.DCQCN.G)
	}
}

// The unscaled profile derives the reference itself.
func TestSeedProfileIsTheReference(t *testing.T) {
	prof := mustProfile(t, "seed-400g-paper")
	p, ref := prof.Params(), prof.Reference
	if p.Switch.DataQueue != ref.DataQueue || p.Switch.ECN.KMin != ref.ECN.KMin || p.Switch.ECN.KMax != ref.ECN.KMax {
		t.Errorf("switch = %+v, want the reference's %v %+v", p.Switch, ref.DataQueue, ref.ECN)
	}
	if p.DCQCN.AlphaTimer != ref.DCQCN.AlphaTimer || p.CNPInterval != ref.CNPInterval || p.Reliability.RTOLow != ref.Reliability.RTOLow {
		t.Errorf("timers changed at scale 1: %+v", p)
	}
	if p.DCQCN.RAI != 400_000_000 { // the paper's 40 Mb/s at 40 Gb/s, times ten
		t.Errorf("R_AI = %v, want 400Mbps", p.DCQCN.RAI)
	}
	if p.Reliability.AckEvery != ref.Reliability.AckEvery {
		t.Errorf("ack_every = %v, want %v", p.Reliability.AckEvery, ref.Reliability.AckEvery)
	}
}

// For any emulation target the derivation keeps the reference's ratios,
// up to the rounding each rule documents.
func TestDerivationKeepsRatios(t *testing.T) {
	ref := mustProfile(t, "seed-400g-paper").Reference
	rapid.Check(t, func(rt *rapid.T) {
		emu := Emulation{
			LineRate: units.Rate(rapid.Int64Range(1e6, 100e9).Draw(rt, "rate")),
			BaseRTT:  units.Duration(rapid.Int64Range(int64(50*time.Microsecond), int64(50*time.Millisecond)).Draw(rt, "rtt")),
			MTU:      rapid.SampledFrom([]int{1024, 1500, 4096, 9000}).Draw(rt, "mtu"),
		}
		p, err := Derive(ref, emu, nil)
		if err != nil {
			// Only a buffer too small for MinQueuePackets may be refused.
			if !errors.Is(err, ErrProfile) || !strings.Contains(err.Error(), "switch.data_queue") {
				rt.Fatalf("unexpected refusal: %v", err)
			}
			return
		}
		timeScale := float64(emu.BaseRTT) / float64(ref.BaseRTT)
		bytes := timeScale * float64(emu.LineRate) / float64(ref.LineRate)
		near(rt, "data_queue", float64(p.Switch.DataQueue), float64(ref.DataQueue)*bytes, 1)
		near(rt, "kmin/buffer", float64(p.Switch.ECN.KMin)/float64(p.Switch.DataQueue),
			float64(ref.ECN.KMin)/float64(ref.DataQueue), 2/float64(p.Switch.DataQueue))
		near(rt, "alpha_timer", float64(p.DCQCN.AlphaTimer), float64(ref.DCQCN.AlphaTimer)*timeScale, 1)
		near(rt, "rto_high", float64(p.Reliability.RTOHigh), float64(ref.Reliability.RTOHigh)*timeScale, 1)
		near(rt, "byte_counter", float64(p.DCQCN.ByteCounter), float64(ref.DCQCN.ByteCounter)*bytes, 1)
		near(rt, "rai", float64(p.DCQCN.RAI), float64(emu.LineRate)/1000, 1)
		w, mtu := int64(p.Reliability.Window), int64(emu.MTU)
		want := int64(p.BDP) * ref.Reliability.WindowBDP.Num / ref.Reliability.WindowBDP.Den
		if w%mtu != 0 || w < MinWindowPackets*mtu || (w > MinWindowPackets*mtu && (w < want || w >= want+mtu)) {
			rt.Fatalf("window %d: want %v BDPs (%d) rounded up to %d-byte packets, at least %d", w, ref.Reliability.WindowBDP, want, mtu, MinWindowPackets)
		}
		if a := int64(p.Reliability.AckEvery); a%mtu != 0 || a < mtu || a > w {
			rt.Fatalf("ack_every %d: want whole packets, at least one, at most the window %d", a, w)
		}
	})
}

func near(rt *rapid.T, name string, got, want, tol float64) {
	if got < want-tol-1e-9*want || got > want+tol+1e-9*want {
		rt.Fatalf("%s = %v, want %v (within %v)", name, got, want, tol)
	}
}

// An override pins one value, and what the rules derive from it follows.
func TestOverridesPinValuesAndDependentsFollow(t *testing.T) {
	text := readText(t, filepath.Join(profileDir, "loopback.yaml"))
	text = replace(t, text, "overrides: {}", `overrides:
  switch.data_queue: 400KB
  reliability.window: 256KiB
  dcqcn.alpha_timer: 3ms
  dcqcn.f: 3`)
	p, err := ParseProfile([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	got := p.Params()
	// kmin stays 800 KB / 4 MiB of the (new) buffer.
	if got.Switch.DataQueue != 400_000 || got.Switch.ECN.KMin != units.Size(mulRound(800_000, ratio(400_000, 4<<20))) {
		t.Errorf("data_queue %v kmin %v: ECN must follow the pinned buffer", got.Switch.DataQueue, got.Switch.ECN.KMin)
	}
	// ack_every stays 16 KiB of the reference's 8-BDP window (977
	// packets) as a fraction of the pinned 64-packet window: one packet.
	if got.Reliability.Window != 256<<10 || got.Reliability.AckEvery != 4096 {
		t.Errorf("window %v ack_every %v: ack_every must follow the pinned window", got.Reliability.Window, got.Reliability.AckEvery)
	}
	if got.DCQCN.AlphaTimer != units.Duration(3*time.Millisecond) || got.DCQCN.F != 3 {
		t.Errorf("alpha_timer %v f %d not pinned", got.DCQCN.AlphaTimer, got.DCQCN.F)
	}
	if d := p.Derived(); d["overrides"] != "dcqcn.alpha_timer,dcqcn.f,reliability.window,switch.data_queue" {
		t.Errorf("overrides printed as %q", d["overrides"])
	}
}

// Derived prints each value as an override would be written: pinning every
// printed value changes nothing.
func TestDerivedValuesPinBackExactly(t *testing.T) {
	for name, prof := range shippedProfiles(t) {
		printed := prof.Derived()
		var ov Overrides
		for _, n := range OverridableNames() {
			ov = append(ov, Override{Name: n, Value: printed[n]})
		}
		again, err := Derive(prof.Reference, prof.Emulation, ov)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, n := range OverridableNames() {
			if got := again.Derived()[n]; got != printed[n] {
				t.Errorf("%s: %s prints %q, pinned back %q", name, n, printed[n], got)
			}
		}
	}
}

// "a bad profile names the field and the problem; unknown keys are errors"
func TestBadProfilesNameTheField(t *testing.T) {
	good := readText(t, filepath.Join(profileDir, "loopback.yaml"))
	cases := []struct{ old, new, want string }{
		{"link_rate: 100Mbps", "link_rate: 10Gbs", `emulation.link_rate: "10Gbs": unknown unit`},
		{"base_rtt: 2ms", "base_rtt: 2 fortnights", `emulation.base_rtt: "2 fortnights": invalid number`},
		{"  hop_latency: 50us", "  hop_latency: 50us\n  cores: 2", "emulation.cores: unknown field"},
		{"kmin: 800KB", "kmin: 800KB\n    kmid: 1MB", "reference.ecn.kmid: unknown field"},
		{"kmax: 3200KB", "kmax: 700KB", "reference.ecn.kmax: 700KB is below kmin 800KB"},
		{"pmax: 0.2", "pmax: 1.5", "reference.ecn.pmax: 1.5: want at most 1"},
		{"g: 1/256", "g: one", `reference.dcqcn.g: "one": want a non-negative number`},
		{"    f: 5\n", "", "reference.dcqcn.f: missing"},
		{"trim: ndp", "trim: sometimes", `reference.trim: "sometimes": unknown trim mode`},
		{"rto_high: 320us", "rto_high: 90us", "reference.reliability.rto_high: 90µs is below rto_low 100µs"},
		{"rto_high: 320us", "rto_high: 320us\n    window_mode: per-pair", `reference.reliability.window_mode: "per-pair": want global or pair-bdp`},
		{"rto_high: 320us", "rto_high: 320us\n    window_scale: alpha", `reference.reliability.window_scale: "alpha": want none or rate`},
		{"  mtu: 4096\n  link_delay", "  mtu: 70000\n  link_delay", "emulation.mtu: 70000: want 64 to 65495"},
		{"link_delay: auto", "link_delay: soon", `emulation.link_delay: "soon": invalid number`},
		{"overrides: {}", "overrides: {reliability.windw: 64KiB}", "overrides.reliability.windw: not a derived value"},
		{"overrides: {}", "overrides: {reliability.window: 64KB/s}", `overrides.reliability.window: "64KB/s": unknown unit`},
		{"overrides: {}", "overrides: {reliability.ack_every: 256KiB}", "reliability.ack_every: 256KiB exceeds the window 196KiB"},
		{"overrides: {}", "overrides: {switch.ecn.kmax: 1MiB}", "switch.ecn.kmax: 1MiB is above the data queue"},
		// Scaled too far, the buffer no longer holds a few packets.
		{"base_rtt: 2ms", "base_rtt: 100us", "switch.data_queue: 10486B holds fewer than 4 packets"},
		{"name: loopback", "name: \"\"", "name: missing"},
		{"g: 1/256", "g: 1/256\n    variant: hpcc", `reference.dcqcn.variant: "hpcc": want paper or mellanox`},
		{"g: 1/256", "g: 1/256\n    variant: mellanox", "reference.dcqcn.byte_counter: 10MB: must be absent with variant mellanox"},
		{"g: 1/256", "g: 1/256\n    clamp_target_rate: true", "reference.dcqcn.clamp_target_rate: only the mellanox variant has it"},
		{"  hop_latency: 50us", "  hop_latency: 50us\n  socket_buffer: 4GiB", "emulation.socket_buffer: 4GiB: want 0 (the switch's default) to 2147483647 bytes"},
		{"overrides: {}", "overrides: {}\nworkload: {flows: queue-pair}", `workload.flows: "queue-pair": want persistent or message`},
		{"overrides: {}", "overrides: {}\nworkload: {collective: mesh}", `workload.collective: "mesh": collective: algorithm "mesh"`},
		{"overrides: {}", "overrides: {}\nworkload: {collective: direct, dims: [8, 0]}", "workload.dims: [8 0]: every dimension needs 1 to 1048576 ranks"},
		{"overrides: {}", "overrides: {}\nworkload: {dims: [8, 8]}", "workload.dims: [8 8] without workload.collective"},
		{"overrides: {}", "overrides: {}\nworkload: {collective: direct, ranks: 64}", "workload.ranks: unknown field"},
	}
	for _, c := range cases {
		_, err := ParseProfile([]byte(replace(t, good, c.old, c.new)))
		if err == nil {
			t.Errorf("%q -> %q: accepted", c.old, c.new)
			continue
		}
		if !errors.Is(err, ErrProfile) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q -> %q:\n got %v\nwant %q", c.old, c.new, err, c.want)
		}
	}
}

func TestUnitErrorsUnwrap(t *testing.T) {
	good := readText(t, filepath.Join(profileDir, "loopback.yaml"))
	_, err := ParseProfile([]byte(replace(t, good, "link_rate: 100Mbps", "link_rate: 10Gbs")))
	if !errors.Is(err, units.ErrUnit) {
		t.Errorf("%v does not unwrap to units.ErrUnit", err)
	}
}

func TestLoadProfileNamesTheFile(t *testing.T) {
	_, err := LoadProfile(filepath.Join(t.TempDir(), "missing.yaml"))
	if !errors.Is(err, ErrProfile) || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("got %v", err)
	}
	_, err = OpenProfile(profiles.Files, "loopbak")
	if !errors.Is(err, ErrProfile) || !strings.Contains(err.Error(), "known: loopback") {
		t.Errorf("got %v, want the known names", err)
	}
}

// The reference fabric's DCQCN is the engine's: at the reference link rate
// every shipped profile's reference section gives exactly what
// congestion.DefaultDCQCN derives, so the profile's derivation and the
// daemon's defaults never tell two stories about the same fabric. A
// profile that names a variant carries another implementation's values
// on purpose (TestSeedNS3ProfileIsTheSimulatorsDCQCN).
func TestReferenceDCQCNIsTheEnginesDefault(t *testing.T) {
	for name, p := range shippedProfiles(t) {
		if p.Reference.DCQCN.Variant != "" {
			continue
		}
		ref := p.Reference
		want := congestion.DefaultDCQCN(ref.LineRate)
		r := ref.DCQCN
		got := congestion.DCQCNConfig{
			LineRate: ref.LineRate, G: r.G.Float(), F: *r.F,
			AlphaTimer: r.AlphaTimer.Std(), RateTimer: r.RateTimer.Std(), ByteCounter: int64(r.ByteCounter),
			RAI: float64(ofRate(ref.LineRate, r.RAI)), RHAI: float64(ofRate(ref.LineRate, r.RHAI)),
			MinRate: float64(ofRate(ref.LineRate, r.MinRate)), InitialAlpha: want.InitialAlpha,
			RateReducePeriod: r.RateReducePeriod.Std(),
		}
		if got != want {
			t.Errorf("%s: reference DCQCN %+v\nengine default       %+v", name, got, want)
		}
		if iv := congestion.DefaultNotifierConfig().Interval; ref.CNPInterval.Std() != iv {
			t.Errorf("%s: reference cnp_interval %v, the engine's %v", name, ref.CNPInterval, iv)
		}
	}
}

// seed-400g-ns3 is seed-400g with the DCQCN of astra-network-ns3's
// scratch/config/config.txt run as rdma-hw.cc's Mellanox variant, and the
// daemons it places run exactly that: every value below is the config's
// (line numbers in profiles/seed-400g-ns3.yaml).
func TestSeedNS3ProfileIsTheSimulatorsDCQCN(t *testing.T) {
	prof := mustProfile(t, "seed-400g-ns3")
	p := prof.Params()
	want := congestion.DCQCNConfig{
		Variant: congestion.DCQCNMellanox, LineRate: 400e9,
		G: 0.00390625, AlphaTimer: time.Microsecond, RateReducePeriod: 4 * time.Microsecond,
		RateTimer: 900 * time.Microsecond, F: 1, RAI: 50e6, RHAI: 100e6, MinRate: 100e6,
		InitialAlpha: 1, ClampTargetRate: false, ByteCounter: 0,
	}
	plan := mustPlace(t, mustTopology(t, "leaf-spine-8x8-4to1"), prof, testOptions(t))
	for _, h := range plan.Hosts {
		n, err := h.Config.NIC()
		if err != nil {
			t.Fatalf("%s: %v", h.Name, err)
		}
		got := n.DCQCN
		got.LineRate = n.LineRate
		if got != want {
			t.Fatalf("%s: DCQCN %+v\nwant %+v", h.Name, got, want)
		}
		if n.Notifier.Interval != time.Microsecond || n.Sender.Window != 123*4096 {
			t.Fatalf("%s: cnp interval %v, window %d; want 1µs and 123 packets (one 500 KB BDP)", h.Name, n.Notifier.Interval, n.Sender.Window)
		}
	}
	if p.Switch.ECN.KMin != 800_000 || p.Switch.ECN.KMax != 3_200_000 || p.Switch.ECN.PMax.Float() != 0.2 {
		t.Errorf("ECN %+v, want the config's 800/3200 KB and 0.2 at 400 Gb/s", p.Switch.ECN)
	}
	d := prof.Derived()
	if d["dcqcn.variant"] != "mellanox" || d["dcqcn.clamp_target_rate"] != "false" || d["scale.time"] != "1" {
		t.Errorf("Derived: variant %q, clamp %q, scale.time %q", d["dcqcn.variant"], d["dcqcn.clamp_target_rate"], d["scale.time"])
	}
	// Profiles without a variant print nothing new, so their results stay
	// as they were; seed-400g has seed-400g-ns3's network.
	for name, other := range shippedProfiles(t) {
		if _, ok := other.Derived()["dcqcn.variant"]; ok != (name == "seed-400g-ns3" || name == "seed-400g") {
			t.Errorf("%s: Derived has dcqcn.variant: %v", name, ok)
		}
	}
}

// seed-400g-ns3's window is each host pair's BDP as astra-network-ns3's
// scratch/common.h computes it, scaled by the rate. On
// leaf-spine-8x8-4to1 every link is 400 Gb/s (uplinks: 8 x 400 / 4 / 2
// spines) and the switch egress links carry the placement's link delay
// D; a 4,096-byte packet takes 32,768 x 10^9 / (400 x 10^9) = 81.92 ->
// 81 ns per hop (truncated, as common.h's uint64). A pair under one leaf
// crosses the NIC link and one egress link: RTT 2D + 2 x 81, BDP
// RTT x 400 Gb/s / 8 = 50 bytes per ns. A pair across the spine: NIC, up,
// down, host link: RTT 2 x 3D + 4 x 81.
func TestSeedNS3WindowIsEachPairsBDP(t *testing.T) {
	prof := mustProfile(t, "seed-400g-ns3")
	plan := mustPlace(t, mustTopology(t, "leaf-spine-8x8-4to1"), prof, testOptions(t))
	d := int64(plan.LinkDelay)
	if d != 1600 {
		t.Fatalf("link delay %v; the hand computation below assumes 1.6µs", plan.LinkDelay)
	}
	leafPair := 50 * (2*d + 2*81)  // 168,100 bytes
	spinePair := 50 * (6*d + 4*81) // 496,200 bytes
	if leafPair != 168100 || spinePair != 496200 {
		t.Fatalf("hand computation: %d, %d", leafPair, spinePair)
	}
	// Interleaved placement: host 1 (rank 0) is on leaf1 with hosts 9,
	// 17, ... (host N on leaf ((N-1) mod 8) + 1).
	h := plan.Hosts[0]
	if plan.Hosts[8].Switch != h.Switch || plan.Hosts[1].Switch == h.Switch {
		t.Fatalf("hosts 1, 2, 9 on %s, %s, %s: not the interleaved placement the test assumes", h.Switch, plan.Hosts[1].Switch, plan.Hosts[8].Switch)
	}
	// Every host's window to each of its 63 peers, read from its file as
	// the simulator's placement reads it.
	for a, ha := range plan.Hosts {
		c, err := forgivedrv.ParseConfig(ha.ConfigYAML)
		if err != nil {
			t.Fatal(err)
		}
		n, err := c.NIC()
		if err != nil {
			t.Fatal(err)
		}
		if !n.RateScaledWindow {
			t.Fatalf("%s: window not rate-scaled", ha.Name)
		}
		for id := 0; id <= len(plan.Hosts); id++ {
			if id == a+1 {
				continue // no flow goes to the host itself
			}
			got, ok := n.PeerWindow(uint16(id))
			var want int64
			switch {
			case id == 0:
			case plan.Hosts[id-1].Switch == ha.Switch:
				want = leafPair
			default:
				want = spinePair
			}
			if int64(got) != want || ok != (want != 0) {
				t.Errorf("%s: window to host %d: %d (%v), want %d", ha.Name, id, got, ok, want)
			}
		}
		// The windows repeat every 8 ids: host 1's are 1 (itself, and
		// 9, 17, ... on leaf1) and 2-8 (across the spines).
		if a == 0 && (n.PeerWindowPeriod != 8 || len(n.PeerWindows) != 2) {
			t.Errorf("%s: %d ranges, period %d; want 2, 8: %+v", ha.Name, len(n.PeerWindows), n.PeerWindowPeriod, n.PeerWindows)
		}
	}
	dv := prof.Derived()
	if dv["reliability.window_mode"] != "pair-bdp" || dv["reliability.window_scale"] != "rate" {
		t.Errorf("Derived: window_mode %q, window_scale %q", dv["reliability.window_mode"], dv["reliability.window_scale"])
	}
	// seed-400g: one window for every flow, nothing per pair, and
	// nothing new printed.
	plain := mustPlace(t, mustTopology(t, "leaf-spine-8x8-4to1"), mustProfile(t, "seed-400g-paper"), testOptions(t))
	n, err := plain.Hosts[0].Config.NIC()
	if err != nil {
		t.Fatal(err)
	}
	if n.RateScaledWindow || n.PeerWindows != nil {
		t.Errorf("seed-400g: rate-scaled %v, %d peer window ranges", n.RateScaledWindow, len(n.PeerWindows))
	}
	if _, ok := mustProfile(t, "seed-400g-paper").Derived()["reliability.window_mode"]; ok {
		t.Error("seed-400g prints a window mode")
	}
}

// On a three-tier fat tree a pair's path is as long as the tiers it
// climbs: under one edge the NIC link and one egress link; across a pod's
// edges edge up, aggregation down and the host link (three egress links);
// across pods edge, aggregation, core, aggregation, host link (five). So
// the windows of seed-400g-ns3 rise in that order. Every link of
// fat-tree-k4 is 400 Gb/s (non-blocking), so as in
// TestSeedNS3WindowIsEachPairsBDP a 4,096-byte packet takes 81 ns a hop
// and a path of e egress links of delay D has a BDP of
// 50 x (2eD + (e+1) x 81) bytes. A rail-optimized fabric is a leaf-spine
// to its pairs: one egress link under a leaf, three across the spines.
func TestPairWindowFollowsTheFabricsTiers(t *testing.T) {
	prof := mustProfile(t, "seed-400g-ns3")
	bdp := func(egress int, d units.Duration) int64 {
		e := int64(egress)
		return 50 * (2*e*int64(d) + (e+1)*81)
	}
	allAt := func(plan *Plan, rate units.Rate) {
		t.Helper()
		for _, s := range plan.Switches {
			for _, p := range s.Ports {
				if p.Rate != rate {
					t.Fatalf("%s/%s at %v: the hand computation assumes every link at %v", s.Name, p.Name, p.Rate, rate)
				}
			}
		}
	}
	window := func(plan *Plan, a, b int) int64 {
		t.Helper()
		n, err := plan.Hosts[a].Config.NIC()
		if err != nil {
			t.Fatal(err)
		}
		w, ok := n.PeerWindow(uint16(b + 1))
		if !ok {
			t.Fatalf("%s has no window to host%d", plan.Hosts[a].Name, b+1)
		}
		return int64(w)
	}

	plan := mustPlace(t, mustTopology(t, "fat-tree-k4"), prof, testOptions(t))
	allAt(plan, units.Rate(400e9))
	d := plan.LinkDelay
	if d != 940 {
		t.Fatalf("link delay %v; the hand computation below assumes 940ns", d)
	}
	edge, pod, cross := bdp(1, d), bdp(3, d), bdp(5, d)
	if edge != 102_100 || pod != 298_200 || cross != 494_300 {
		t.Fatalf("hand computation: %d, %d, %d", edge, pod, cross)
	}
	// edgeN is edge (N-1) mod 2 of pod (N-1) / 2 (fatTree's order).
	podOf := func(i int) string {
		n, err := strconv.Atoi(strings.TrimPrefix(plan.Hosts[i].Switch, "edge"))
		if err != nil {
			t.Fatalf("%s on %s, not an edge", plan.Hosts[i].Name, plan.Hosts[i].Switch)
		}
		return strconv.Itoa((n - 1) / 2)
	}
	seen := map[int64]int{}
	for a := range plan.Hosts {
		for b := range plan.Hosts {
			if a == b {
				continue
			}
			want := cross
			switch {
			case plan.Hosts[a].Switch == plan.Hosts[b].Switch:
				want = edge
			case podOf(a) == podOf(b):
				want = pod
			}
			if got := window(plan, a, b); got != want {
				t.Errorf("%s (%s) to %s (%s): window %d, want %d", plan.Hosts[a].Name, plan.Hosts[a].Switch,
					plan.Hosts[b].Name, plan.Hosts[b].Switch, got, want)
			}
			seen[want]++
		}
	}
	// 16 hosts, 2 to an edge, 4 to a pod: each has 1 peer under its edge,
	// 2 elsewhere in its pod, 12 in other pods.
	if seen[edge] != 16 || seen[pod] != 32 || seen[cross] != 192 {
		t.Errorf("pairs by path: %v", seen)
	}

	plan = mustPlace(t, mustTopology(t, "rail-4x4"), prof, testOptions(t))
	allAt(plan, units.Rate(400e9))
	d = plan.LinkDelay
	for a := range plan.Hosts {
		for b := range plan.Hosts {
			if a == b {
				continue
			}
			want := bdp(3, d)
			if plan.Hosts[a].Switch == plan.Hosts[b].Switch {
				want = bdp(1, d)
			}
			if got := window(plan, a, b); got != want {
				t.Errorf("rail-4x4: %s (%s) to %s (%s): window %d, want %d", plan.Hosts[a].Name, plan.Hosts[a].Switch,
					plan.Hosts[b].Name, plan.Hosts[b].Switch, got, want)
			}
		}
	}
}

// A host's windows take few ranges: where the placement deals
// consecutive ids round the switches the windows repeat (every 8 ids on
// leaf-spine-8x8-4to1, every k x k/2 on a k-ary fat tree, every rail on a
// rail-optimized fabric of one leaf per rail) and a period's ranges are
// written, else each run of consecutive ids of one window is a range;
// either way every peer's window is its pair's (pairBDP of the pair's
// path, unfolded), on whole and partly filled fabrics.
func TestPairWindowsTakeFewRanges(t *testing.T) {
	prof := mustProfile(t, "seed-400g-ns3")
	p := prof.Params()
	fat := func(k, hosts int, pl Placement) *Topology {
		return &Topology{Name: "ft", Kind: KindFatTree, K: k, Hosts: hosts, Placement: pl}
	}
	r1, _ := ParseRatio("1:1")
	rail := func(nodes, rails, npl, spines int) *Topology {
		return &Topology{Name: "rail", Kind: KindRail, Nodes: nodes, Rails: rails, NodesPerLeaf: npl, Spines: spines, Oversubscription: &r1}
	}
	for _, c := range []struct {
		tp     *Topology
		period uint16 // of every host
		most   int    // ranges of any host
	}{
		// host 2: 1, 2 (leaf2, with 10, 18, ...), 3-8
		{mustTopology(t, "leaf-spine-8x8-4to1"), 8, 3},
		// host 2 (pod 1, edge 0): 1, 2 (its edge), 3-9, 10 (its pod), 11-17,
		// 18, 19-25, 26, 27-32
		{fat(8, 0, Interleaved), 32, 9},
		// host 22 (pod 1, edge 1): 1-16 (pod 0), 17-20 (its pod), 21, 23-24 (its edge),
		// 25-32, 33-128
		{fat(8, 0, Packed), 0, 6},
		// 30 hosts repeat every 18 ids, not a whole number of times
		{fat(6, 30, Interleaved), 0, 10},
		{rail(32, 8, 0, 8), 8, 3},
		{rail(8, 4, 2, 2), 0, 4},
		// host 2: 1, 3-8
		{mustTopology(t, "star-8"), 0, 2},
	} {
		f, err := build(c.tp, p.LineRate)
		if err != nil {
			t.Fatal(err)
		}
		const delay = 940
		windows := f.pairWindows(p, delay)
		most := 0
		for _, h := range f.hosts {
			ranges, period := windows.of(h)
			n := nic.DefaultConfig(uint16(h.id), p.LineRate)
			n.PeerWindowPeriod = period
			for _, r := range ranges {
				n.PeerWindows = append(n.PeerWindows, nic.PeerWindowRange{First: r.First, Last: r.Last, Window: int(r.Window)})
			}
			if err := n.Validate(); err != nil {
				t.Fatalf("%s host%d: %v", c.tp.Name, h.id, err)
			}
			if period != c.period {
				t.Errorf("%s host%d: period %d, want %d", c.tp.Name, h.id, period, c.period)
			}
			most = max(most, len(ranges))
			for _, o := range f.hosts {
				if o == h {
					continue
				}
				want := pairBDP(f.path(h, o, delay), p.MTU) // window_bdp 1
				if got, ok := n.PeerWindow(uint16(o.id)); !ok || int64(got) != want {
					t.Fatalf("%s host%d to host%d: window %d (%v), want %d", c.tp.Name, h.id, o.id, got, ok, want)
				}
			}
		}
		if most != c.most {
			t.Errorf("%s: at most %d ranges a host, want %d", c.tp.Name, most, c.most)
		}
	}
}

// seed-400g is the reading the seed's words and its simulator's config
// support (docs/profiles.md, "The seed profiles' reading"): the network of
// seed-400g-ns3, field for field, and a job whose all-reduce runs direct
// on 8 x 8 ranks with a flow per message. seed-400g-paper, the first
// reading kept as a counterfactual, and every other profile leave the
// job to the lab's defaults.
func TestSeedProfileIsTheSupportedReading(t *testing.T) {
	seed, ns3 := mustProfile(t, "seed-400g"), mustProfile(t, "seed-400g-ns3")
	if !reflect.DeepEqual(seed.Reference, ns3.Reference) || !reflect.DeepEqual(seed.Emulation, ns3.Emulation) ||
		!reflect.DeepEqual(seed.Derived(), ns3.Derived()) {
		t.Errorf("seed-400g's network differs from seed-400g-ns3's:\n%+v\n%+v", seed.Derived(), ns3.Derived())
	}
	want := ProfileWorkload{Collective: "direct", Dims: []int{8, 8}, Flows: FlowsMessage}
	if !reflect.DeepEqual(seed.Workload, want) || seed.Workload.Ranks() != 64 {
		t.Errorf("seed-400g's workload %+v (%d ranks), want %+v (64)", seed.Workload, seed.Workload.Ranks(), want)
	}
	for _, name := range Names(profiles.Files) {
		if p := mustProfile(t, name); name != "seed-400g" && !reflect.DeepEqual(p.Workload, ProfileWorkload{}) {
			t.Errorf("%s: workload %+v, want none", name, p.Workload)
		}
	}
	if paper := mustProfile(t, "seed-400g-paper"); reflect.DeepEqual(paper.Reference.DCQCN, seed.Reference.DCQCN) {
		t.Error("seed-400g-paper runs the simulator's DCQCN, want the paper's")
	}
}

// TestGlobalWindowProfileIsNs3ButTheWindow holds the profile the
// readings' cell double-binary-tree-ns3 is confirmed under
// (docs/results/seed-readings/seed-400g-ns3-global.yaml) to seed-400g-ns3
// field for field, but for the window: one BDP of the profile for every
// flow, never scaled, as seed-400g-ns3 was when the cell was screened.
func TestGlobalWindowProfileIsNs3ButTheWindow(t *testing.T) {
	global, err := LoadProfile(filepath.Join("..", "..", "docs", "results", "seed-readings", "seed-400g-ns3-global.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ns3 := mustProfile(t, "seed-400g-ns3")
	if global.Name != "seed-400g-ns3-global" {
		t.Errorf("name %q", global.Name)
	}
	r := global.Reference.Reliability
	if r.WindowMode != "" || r.WindowScale != "" || r.WindowBDP != ns3.Reference.Reliability.WindowBDP {
		t.Errorf("window %+v, want window_bdp %v of the profile's BDP, unscaled", r, ns3.Reference.Reliability.WindowBDP)
	}
	// The rest is seed-400g-ns3's.
	r.WindowMode, r.WindowScale = ns3.Reference.Reliability.WindowMode, ns3.Reference.Reliability.WindowScale
	ref := global.Reference
	ref.Reliability = r
	if !reflect.DeepEqual(ref, ns3.Reference) || !reflect.DeepEqual(global.Emulation, ns3.Emulation) ||
		!reflect.DeepEqual(global.Workload, ns3.Workload) || !reflect.DeepEqual(global.Overrides, ns3.Overrides) {
		t.Errorf("seed-400g-ns3-global differs from seed-400g-ns3 beyond its window:\n%+v\n%+v", ref, ns3.Reference)
	}
}
