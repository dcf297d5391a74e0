package sim_test

import (
	"testing"

	"github.com/forgive-emu/forgive/internal/race"
	"github.com/forgive-emu/forgive/nic"
)

// perMessageAllocs is what a message costs the NIC engine outside the
// packet path: PostSend's and PostRecv's appends to the flow's queues of
// work requests (popped from the front, so they do not keep their
// capacity) and the receive completion.
const perMessageAllocs = 3

// TestPacketHopAllocatesNothing is the simulator's allocation gate: once
// the load of BenchmarkPacketHop runs at its steady size, a packet hop
// (the scheduler, a switch or NIC visit, the packet's move over a link)
// allocates nothing, with payloads and payload-free; a round of 4,000
// hops allocates only perMessageAllocs for each message it completes.
func TestPacketHopAllocatesNothing(t *testing.T) {
	for _, payload := range []bool{true, false} {
		l := newLoadMode(t, 8, payload, 140<<10)
		l.runHops(t, 20000) // warm: pools and queues at their steady size
		s := l.b.Sim
		prev := s.OnCompletion
		var msgs int
		s.OnCompletion = func(host int, c nic.Completion) {
			if c.Kind == nic.WorkSend {
				msgs++
			}
			prev(host, c)
		}
		before := s.Stats()
		const hops, runs = 4000, 20
		allocs := testing.AllocsPerRun(runs, func() { l.runHops(t, hops) })
		after := s.Stats()
		if got := after.PacketHops - before.PacketHops; got < (runs+1)*hops {
			t.Fatalf("payload %v: %d hops in %d rounds of %d", payload, got, runs+1, hops)
		}
		if msgs == 0 {
			t.Fatalf("payload %v: no message completed in %d hops", payload, (runs+1)*hops)
		}
		// AllocsPerRun's count is the rounds' total divided by runs; the
		// messages are counted over runs+1 rounds, its warm-up included.
		limit := float64(perMessageAllocs*msgs) / runs
		t.Logf("payload %v: %v allocations per %d hops, %d messages in %d rounds", payload, allocs, hops, msgs, runs+1)
		if race.Enabled {
			continue // not asserted: see below
		}
		if allocs > limit {
			t.Errorf("payload %v: %v allocations per %d hops, want at most %d per message completed (%.1f)",
				payload, allocs, hops, perMessageAllocs, limit)
		}
	}
	if race.Enabled {
		t.Skip("the race detector allocates on its own: this gate holds without -race")
	}
}
