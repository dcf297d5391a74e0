package congestion

import (
	"testing"
	"time"
)

func mustDCQCN(tb testing.TB) *DCQCN {
	tb.Helper()
	d, err := NewDCQCN(DefaultDCQCN(400 * G))
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// The per-packet and per-CNP paths allocate nothing.
func TestHotPathsDoNotAllocate(t *testing.T) {
	d := mustDCQCN(t)
	p := NewPacer(DefaultPacerConfig())
	n := NewNotifier(DefaultNotifierConfig())
	s, _ := NewSender(0, mustDCQCN(t), DefaultSenderConfig())
	var now time.Duration
	allocs := testing.AllocsPerRun(1000, func() {
		now += 7 * us
		d.OnCNP(now)
		d.Advance(now + 60*us)
		d.OnSent(now, 4096)
		p.OnSend(now, 4096, d.Rate())
		n.OnCE(now)
		n.Advance(now)
		s.OnReport(now, true, false)
		s.OnCongestionNotification(now)
		s.OnSent(now, 4096)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per run, want 0", allocs)
	}
}

func BenchmarkDCQCNOnCNP(b *testing.B) {
	d := mustDCQCN(b)
	b.ReportAllocs()
	var now time.Duration
	for b.Loop() {
		now += 60 * us // one α decay between CNPs, so math.Pow runs
		d.OnCNP(now)
	}
}

// Each Advance crosses one rate-timer expiry; a CNP every 64 wake-ups
// keeps the flow recovering.
func BenchmarkDCQCNAdvance(b *testing.B) {
	d := mustDCQCN(b)
	b.ReportAllocs()
	var now time.Duration
	i := 0
	for b.Loop() {
		if i%64 == 0 {
			d.OnCNP(now)
		}
		i++
		now += 55 * us
		d.Advance(now)
	}
}

func BenchmarkDCQCNOnSent(b *testing.B) {
	d := mustDCQCN(b)
	d.OnCNP(0)
	b.ReportAllocs()
	var now time.Duration
	for b.Loop() {
		now += 82 // a 4 KiB packet at 400 Gb/s
		d.OnSent(now, 4096)
	}
}

func BenchmarkPacerOnSend(b *testing.B) {
	p := NewPacer(DefaultPacerConfig())
	b.ReportAllocs()
	var now time.Duration
	for b.Loop() {
		now = max(now, p.NextSend())
		p.OnSend(now, 4096, 399.9*G)
	}
}

func BenchmarkNotifierOnCE(b *testing.B) {
	n := NewNotifier(DefaultNotifierConfig())
	b.ReportAllocs()
	var now time.Duration
	for b.Loop() {
		now += 100
		n.OnCE(now)
	}
}

func BenchmarkSenderOnSent(b *testing.B) {
	s, err := NewSender(0, mustDCQCN(b), DefaultSenderConfig())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	var now time.Duration
	for b.Loop() {
		now = max(now, s.NextSend())
		s.OnSent(now, 4096)
	}
}

func mustNSCC(tb testing.TB) *NSCC {
	tb.Helper()
	n, err := NewNSCC(DefaultNSCC(400*G, 10*us, 4096))
	if err != nil {
		tb.Fatal(err)
	}
	return n
}

// NSCC's per-ACK and per-trim paths, and a sender around it, allocate
// nothing.
func TestNSCCHotPathsDoNotAllocate(t *testing.T) {
	n := mustNSCC(t)
	s, _ := NewSender(0, mustNSCC(t), DefaultSenderConfig())
	var now time.Duration
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		now += 3 * us
		i++
		a := AckSignal{Acked: 4096, RTT: time.Duration(10+i%20) * us, ECN: i%3 == 0, InFlight: 40000}
		n.OnAck(now, a)
		if i%16 == 0 {
			n.OnNack(now, 4096, 40000)
		}
		s.OnReport(now, i%64 < 32, false)
		s.OnAck(now, a)
		s.OnRetransmissionRequest(now, 4096, 40000)
		s.OnCongestionNotification(now)
		s.OnSent(now, 4096)
		_, _ = s.Window()
	})
	if allocs != 0 {
		t.Errorf("%v allocations per run, want 0", allocs)
	}
}

// One ACK every 3 µs whose delay sweeps 0 to 19 µs and a mark every
// third: every rule of OnAck runs.
func BenchmarkNSCCOnAck(b *testing.B) {
	n := mustNSCC(b)
	b.ReportAllocs()
	var now time.Duration
	i := 0
	for b.Loop() {
		now += 3 * us
		i++
		n.OnAck(now, AckSignal{Acked: 4096, RTT: time.Duration(10+i%20) * us, ECN: i%3 == 0, InFlight: 40000})
	}
}

func BenchmarkNSCCOnNack(b *testing.B) {
	n := mustNSCC(b)
	b.ReportAllocs()
	var now time.Duration
	for b.Loop() {
		now += 3 * us
		n.OnNack(now, 4096, 40000)
		n.OnAck(now, AckSignal{Acked: 4096, RTT: 12 * us, InFlight: 40000})
	}
}
