package budget

import (
	"math/rand/v2"
	"testing"
)

// benchLedger returns a ledger with one open step far larger than any
// benchmark run can fill.
func benchLedger(b *testing.B, cfg Config) *Ledger {
	b.Helper()
	l := newLedger(b, cfg, rand.New(rand.NewPCG(1, 2)))
	begin(b, l, 1, false, MaxStepBytes/2)
	return l
}

// BenchmarkOnTrim decides one trimmed 4,096-byte packet per iteration.
// Four packets arrive for every two trimmed, so the vesting rule lets about
// one trim in five be forgiven and refuses the others; the forgiven share
// is reported as forgiven/op.
func BenchmarkOnTrim(b *testing.B) {
	l := benchLedger(b, DefaultConfig())
	b.ReportAllocs()
	var trims, forgives int
	for ; b.Loop(); trims++ {
		if trims%2 == 0 {
			if err := l.OnArrival(1, 4*4096, 0); err != nil {
				b.Fatal(err)
			}
		}
		d := l.OnTrim(1, 4096, 4096)
		if !d.Counted {
			b.Fatalf("trim %d: %+v", trims, d)
		}
		if d.Forgive {
			forgives++
		}
	}
	b.ReportMetric(float64(forgives)/float64(trims), "forgiven/op")
}

// BenchmarkOnArrival counts one arriving 4,096-byte packet per iteration,
// every other one a requested retransmission of trimmed bytes.
func BenchmarkOnArrival(b *testing.B) {
	cfg := DefaultConfig()
	cfg.P = 0 // never forgive: the big trim below stays outstanding
	l := benchLedger(b, cfg)
	l.OnTrim(1, 1<<40, 1<<40)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		from := int64(i%2) * 4096
		if err := l.OnArrival(1, 4096, from); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFlags is the per-acknowledgement flag computation.
func BenchmarkFlags(b *testing.B) {
	l := benchLedger(b, DefaultConfig())
	b.ReportAllocs()
	var n int
	for b.Loop() {
		if _, ex := l.Flags(1); ex {
			n++
		}
	}
	_ = n
}

func BenchmarkShed(b *testing.B) {
	b.ReportAllocs()
	var n int
	for i := uint64(0); b.Loop(); i++ {
		if Shed(1, 5, 3, i, 0.1) {
			n++
		}
	}
	_ = n
}
