package switchcore

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestEventsPickAsAScan refiles random ports under random times (few
// distinct ones, so ties are common) and requires the tree to name, after
// every change, the port a scan of every port picks: the earliest event,
// the lowest-numbered port among equals. Half the changes go through
// refile, which must be right for any port, not only the earliest.
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
			if rng.IntN(2) == 0 {
				ev.set(i, at)
			} else {
				ev.refile(i, at)
			}
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

// BenchmarkEventsSet refiles ports of a 16-port switch under times spread
// over a few microseconds, as a busy switch's steps do.
func BenchmarkEventsSet(b *testing.B) {
	ev := newEvents(16)
	rng := rand.New(rand.NewPCG(3, 4))
	ports := make([]int, 4096)
	times := make([]time.Duration, 4096)
	for i := range ports {
		ports[i], times[i] = rng.IntN(16), time.Duration(rng.IntN(5000))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		ev.set(ports[i&4095], times[i&4095]+time.Duration(i))
		i++
	}
}
