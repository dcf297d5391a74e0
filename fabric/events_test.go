package fabric

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestEventsPickAsAScan refiles random ports under random times (few
// distinct ones, so ties are common) and requires the tree to name, after
// every change, the port a scan of every port picks: the earliest event,
// the lowest-numbered port among equals.
func TestEventsPickAsAScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 4, 5, 7, 8, 16, 17, 48} {
		ev := newEvents(n)
		want := make([]time.Duration, n)
		for i := range want {
			want[i] = never
		}
		for step := range 4000 {
			i := rng.IntN(n)
			at := time.Duration(rng.IntN(6))
			if rng.IntN(5) == 0 {
				at = never
			}
			want[i] = at
			ev.set(i, at)
			best, bt := 0, want[0]
			for j, w := range want {
				if w < bt {
					best, bt = j, w
				}
			}
			if got, gt := ev.first(); gt != bt || (bt != never && got != best) {
				t.Fatalf("%d ports, change %d: tree picks port %d at %v, a scan port %d at %v (events %v)",
					n, step, got, gt, best, bt, want)
			}
		}
	}
}
