package collective

import (
	"fmt"
	"testing"
)

// BenchmarkCompile compiles a 1 MiB all-reduce over 1,024 and 8,192
// ranks, the trees and halving-doubling in 4 pieces. A flat ring or
// direct has n(n-1) messages a phase, 1 million at 1,024 ranks and 67
// million at 8,192, so they run in one piece and, at 8,192, over
// dimensions [64, 128].
func BenchmarkCompile(b *testing.B) {
	for _, n := range []int{1024, 8192} {
		for _, a := range Algorithms() {
			spec := Spec{Ranks: n, Bytes: 1 << 20, Algorithms: []Algorithm{a}, Splits: 4}
			if a == Ring || a == Direct {
				spec.Splits = 1
				if n > 1024 {
					spec.Dims = []int{64, 128}
				}
			}
			b.Run(fmt.Sprintf("%d/%s/dims%v", n, a, spec.Dims), func(b *testing.B) {
				b.ReportAllocs()
				var sc *Schedule
				for b.Loop() {
					var err error
					if sc, err = Compile(spec); err != nil {
						b.Fatal(err)
					}
				}
				msgs := 0
				for _, p := range sc.Plans {
					msgs += len(p.Sends)
				}
				b.ReportMetric(float64(msgs), "msgs")
			})
		}
	}
}
