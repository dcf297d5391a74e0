package switchcore

import (
	"testing"
)

// ecnConfig returns the two-port switch with a RED ramp on port 1 from 20
// to 60 packets of 1 KB, Pmax 0.2 (HPCC's), and a buffer deep enough never
// to trim.
func ecnConfig() Config {
	cfg := twoPorts()
	cfg.Ports[1].DataCap = 200 * packet1K
	cfg.Ports[1].ECN = ECNConfig{Enabled: true, KMin: 20 * packet1K, KMax: 60 * packet1K, PMax: 0.2}
	return cfg
}

// steadyQueue holds port 1's data queue at depth packets of 1 KB: each time
// a packet leaves, another arrives, so every departure leaves depth-1
// packets behind. It sends n packets with the given TOS through that queue
// and returns how many came out with CE set.
func steadyQueue(t *testing.T, cfg Config, depth, n int, tos uint8) (marked int) {
	t.Helper()
	h := newHarness(t, cfg)
	// The first packet goes straight onto the idle link; depth more wait.
	for range depth + 1 {
		h.recv(portA, dataPacket(hostA, hostB, 1, 0, 0, payload1K), tos)
	}
	for len(h.out) < n+1 {
		d, ok := h.sw.NextDeadline()
		if !ok {
			t.Fatal("queue went idle")
		}
		h.advance(d) // a departure, or a packet reaching the far end
		switch q, _ := h.sw.Occupancy(portB); q {
		case depth * packet1K:
		case (depth - 1) * packet1K:
			h.recv(portA, dataPacket(hostA, hostB, 1, 0, 0, payload1K), tos)
		default:
			t.Fatalf("occupancy %d, want %d or one packet less", q, depth*packet1K)
		}
	}
	// The first packet found the link idle and left an empty queue behind.
	for _, o := range h.out[1 : n+1] {
		if o.Pkt.ECN() == ECNCE {
			marked++
		}
	}
	return marked
}

// PARAMETERS.md: "marking point: at dequeue, per egress queue, on
// data-queue occupancy" and "RED ramp: no mark below Kmin;
// p = Pmax·(q − Kmin)/(Kmax − Kmin) between; always above Kmax".
// The measured fraction must sit within four binomial standard deviations
// of the ramp at each occupancy.
func TestECNMarkingFollowsRedRamp(t *testing.T) {
	const n = 20000
	cases := []struct {
		name  string
		depth int // packets queued when one arrives; depth-1 left behind at dequeue
		want  float64
	}{
		{"below Kmin", 15, 0},
		{"at Kmin", 21, 0},
		{"quarter ramp", 31, 0.2 * 10 / 40},
		{"mid ramp", 41, 0.2 * 20 / 40},
		{"three quarters", 51, 0.2 * 30 / 40},
		{"at Kmax", 61, 0.2},
		{"above Kmax", 62, 1},
		{"far above Kmax", 120, 1},
	}
	cfg := ecnConfig()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			marked := steadyQueue(t, cfg, tc.depth, n, tosData)
			ok, sigma := within4Sigma(marked, n, tc.want)
			if !ok {
				t.Errorf("marked %d of %d at %d packets queued; want %.0f ± %.1f (p = %.3f)",
					marked, n, tc.depth-1, tc.want*n, 4*sigma, tc.want)
			}
		})
	}
}

// Marking is "only on ECN-capable packets (ECT0/ECT1 in TOS), setting CE":
// a Not-ECT packet is never marked, ECT(1) is marked like ECT(0), and a
// packet already CE stays CE without being counted again.
func TestECNMarksOnlyECNCapablePackets(t *testing.T) {
	cfg := ecnConfig()
	const n = 500
	if m := steadyQueue(t, cfg, 100, n, tosNotECT); m != 0 {
		t.Errorf("%d Not-ECT packets came out CE; the switch must not mark them", m)
	}
	if m := steadyQueue(t, cfg, 100, n, tosDataE1); m != n {
		t.Errorf("%d of %d ECT(1) packets marked above Kmax, want all", m, n)
	}
	h := newHarness(t, cfg)
	for range 100 {
		h.recv(portA, dataPacket(hostA, hostB, 1, 0, 0, payload1K), tosDataCE)
	}
	h.settle()
	for _, o := range h.out {
		if o.Pkt.ECN() != ECNCE || o.Pkt.DSCP() != 24 {
			t.Fatalf("CE packet came out with TOS %#x", o.Pkt.TOS)
		}
	}
	if m := h.sw.Stats().Ports[portB].Classes[dataPrio].Marked.Packets; m != 0 {
		t.Errorf("counted %d marks on packets that arrived CE", m)
	}
}

// With marking off nothing is marked, however deep the queue.
func TestECNDisabled(t *testing.T) {
	cfg := ecnConfig()
	cfg.Ports[1].ECN.Enabled = false
	if m := steadyQueue(t, cfg, 150, 1000, tosData); m != 0 {
		t.Errorf("%d packets marked with marking off", m)
	}
}

// KMin == KMax is DCQCN-d's single threshold: everything above it marked,
// nothing at or below.
func TestECNStepThreshold(t *testing.T) {
	cfg := ecnConfig()
	cfg.Ports[1].ECN = ECNConfig{Enabled: true, KMin: 30 * packet1K, KMax: 30 * packet1K, PMax: 1}
	if m := steadyQueue(t, cfg, 31, 1000, tosData); m != 0 {
		t.Errorf("%d marked at the threshold, want none", m)
	}
	if m := steadyQueue(t, cfg, 32, 1000, tosData); m != 1000 {
		t.Errorf("%d of 1000 marked above the threshold, want all", m)
	}
}

// The marks counter agrees with the packets that came out marked.
func TestECNMarksCounted(t *testing.T) {
	cfg := ecnConfig()
	h := newHarness(t, cfg)
	for range 150 {
		h.recv(portA, dataPacket(hostA, hostB, 1, 0, 0, payload1K), tosData)
	}
	h.settle()
	marked := 0
	for _, o := range h.out {
		if o.Pkt.ECN() == ECNCE {
			marked++
		}
	}
	st := h.sw.Stats().Ports[portB].Classes[dataPrio]
	if marked == 0 || st.Marked.Packets != uint64(marked) || st.Marked.Bytes != uint64(marked*packet1K) {
		t.Errorf("Marked = %+v, %d packets came out CE", st.Marked, marked)
	}
}
