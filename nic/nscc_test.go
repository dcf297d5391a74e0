package nic_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/switchcore"
)

// The star's base RTT at 1 Gb/s is about 42 µs (the lowest sample the
// flows below see); 40 µs keeps every sample above it, so the ceiling
// stays put: BDP 5,000 bytes. 1.5 BDP would be under two packets, so the
// tests widen the ceiling to bdps BDPs.
const starRTT = 40 * time.Microsecond

func nsccNIC(bdps float64) func(*nic.Config) {
	return func(c *nic.Config) {
		c.CC = congestion.KindNSCC
		c.NSCC = congestion.DefaultNSCC(testRate, starRTT, 4096)
		c.NSCC.MaxWindowBDP = bdps
	}
}

// senders is the three incast senders' flow reports.
func senders(s *star) []nic.FlowReport {
	var out []nic.FlowReport
	for h := uint16(2); h <= 4; h++ {
		r, _ := s.nics[h].Flow(nic.FlowKey{Peer: 1, ID: uint32(98 + h)})
		out = append(out, r)
	}
	return out
}

// Under NSCC the NIC holds a flow's unacknowledged bytes to its window,
// which never exceeds its ceiling (4 BDPs, 20,000 bytes, here), where
// DCQCN's flows go further; the transfer still arrives byte-exact.
func TestNSCCBoundsBytesInFlight(t *testing.T) {
	const starCeiling = 20000
	run := func(tweak func(*nic.Config)) (maxUnacked int, blocked uint64, s *star) {
		s = newStar(t, 4, switchcore.TrimNDP, tweak)
		dst, src := s.incast([]uint16{2, 3, 4}, 1<<20, nic.ClassTensor, 0)
		s.sim.OnInstant = func(time.Duration) {
			for _, r := range senders(s) {
				maxUnacked = max(maxUnacked, r.Unacked)
			}
		}
		s.run(5*time.Second, s.recvDone(1, 3))
		for i := range dst {
			if !bytes.Equal(dst[i], src[i]) {
				t.Fatalf("message from host %d differs from what was sent", i+2)
			}
		}
		for _, r := range senders(s) {
			blocked += r.Sender.CwndBlocked
		}
		return maxUnacked, blocked, s
	}
	dcqcn, dcBlocked, _ := run(nil)
	nscc, blocked, s := run(nsccNIC(4))
	t.Logf("most bytes unacknowledged by one flow: DCQCN %d, NSCC %d (ceiling %d); NSCC waited for its window %d times", dcqcn, nscc, starCeiling, blocked)
	if nscc > starCeiling || nscc == 0 {
		t.Errorf("NSCC: %d bytes unacknowledged, want at most the ceiling %d", nscc, starCeiling)
	}
	if dcqcn <= starCeiling || dcBlocked != 0 {
		t.Errorf("DCQCN: %d bytes unacknowledged, %d window waits: the comparison shows nothing", dcqcn, dcBlocked)
	}
	if blocked == 0 {
		t.Error("no NSCC flow ever waited for its window")
	}
	for _, r := range senders(s) {
		if r.Window < 4096 || r.Window > starCeiling || r.Rate != testRate {
			t.Errorf("flow %v: window %d, rate %v; want a window in [4096, %d] at line rate", r.Key, r.Window, r.Rate, starCeiling)
		}
	}
}

// An exempt NSCC sender's window stays at its ceiling through the marks,
// delays and trims of an incast on an open non-critical step; the same
// incast without FORGIVE cuts it. The ceiling is 16 BDPs, 80,000 bytes:
// three such windows overflow the 64 KiB queue, so the switch trims.
func TestNSCCExemptWindowStaysAtTheCeiling(t *testing.T) {
	const starCeiling = 80000
	run := func(forgive bool) (minWindow, exemptBelow int, st congestion.Stats, ignored uint64, trimmed uint64) {
		s := newStar(t, 4, switchcore.TrimNDP, func(c *nic.Config) { nsccNIC(16)(c); c.Forgive = forgive })
		const size = 1 << 20
		nc := false
		if _, err := s.nics[1].BeginStep(s.sim.Now(), nic.StepReq{Step: 1, Critical: &nc, Expected: 3 * size}); err != nil {
			t.Fatal(err)
		}
		s.incast([]uint16{2, 3, 4}, size, nic.ClassGradient, 1)
		minWindow = starCeiling
		s.sim.OnInstant = func(time.Duration) {
			for _, r := range senders(s) {
				minWindow = min(minWindow, r.Window)
				if r.Mode == congestion.Exempt && r.Window != starCeiling {
					exemptBelow++
				}
			}
		}
		s.run(5*time.Second, s.recvDone(1, 3))
		s.nics[1].EndStep(s.sim.Now(), 1)
		if err := s.nics[1].CheckStep(1); err != nil {
			t.Fatal(err)
		}
		for _, r := range senders(s) {
			st.Cuts += r.Ctrl.Cuts
			ignored += r.CC.CNPsIgnored
		}
		trimmed, _ = switchMarks(s)
		return minWindow, exemptBelow, st, ignored, trimmed
	}
	minObey, _, obey, _, trims := run(false)
	if minObey >= starCeiling || obey.Cuts == 0 || trims == 0 {
		t.Fatalf("without FORGIVE: smallest window %d, %d cuts, %d trims; the incast should trim and cut", minObey, obey.Cuts, trims)
	}
	_, below, exempt, ignored, trims := run(true)
	if below != 0 || ignored == 0 || trims == 0 {
		t.Fatalf("with FORGIVE: %d instants an exempt window stood below the ceiling, %d CNPs ignored, %d trims; want 0, some, some", below, ignored, trims)
	}
	t.Logf("window cuts: %d obeying, %d with the exemption (each flow obeys until its first report)", obey.Cuts, exempt.Cuts)
}
