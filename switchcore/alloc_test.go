package switchcore

import (
	"testing"
	"time"

	"github.com/forgive-emu/forgive/internal/race"
)

// TestForwardingAllocatesNothing is the switch's allocation gate: the
// per-packet path (Receive, the forwarding or the queue, Advance, Drain,
// Reclaim) allocates nothing once the queues are at their steady size,
// forwarding straight through, marking on the RED ramp and trimming.
func TestForwardingAllocatesNothing(t *testing.T) {
	cases := []struct {
		name           string
		cfg            Config
		gapNum, gapDen int64
		prefill        int
	}{
		{"unmarked", twoPorts(), ser1K, ser1KDen, 0},
		{"marking", ecnConfig(), ser1K, ser1KDen, 41},
		{"trimming", trimConfig(TrimNDP), ser1K, 2 * ser1KDen, 100},
	}
	for _, c := range cases {
		sw, step := forwardLoop(t, c.cfg, c.prefill)
		var i int64
		run := func() {
			i++
			step(time.Duration(i * c.gapNum / c.gapDen))
		}
		for range 1000 { // warm: queues and pools at their steady size
			run()
		}
		allocs := testing.AllocsPerRun(1000, run)
		st := sw.Stats()
		if got := st.Ports[portA].Received.Packets; got < 2000 {
			t.Fatalf("%s: the switch received %d packets, want at least 2000", c.name, got)
		}
		if got := st.Ports[portB].Sent.Packets; got == 0 {
			t.Fatalf("%s: the switch sent nothing", c.name)
		}
		if race.Enabled {
			t.Logf("%s: %v allocations per packet, not asserted under -race", c.name, allocs)
			continue
		}
		if allocs != 0 {
			t.Errorf("%s: %v allocations per packet, want 0", c.name, allocs)
		}
	}
	if race.Enabled {
		t.Skip("the race detector allocates on its own: this gate holds without -race")
	}
}
