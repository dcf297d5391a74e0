package congestion

import (
	"errors"
	"testing"
	"time"

	"pgregory.net/rapid"
)

// "When a marked packet arrives for a flow, the NIC sends a congestion
// notification packet (CNP) back to the sender, but at most one per flow
// every N = 50 µs, however many marked packets arrived."
func TestNotifierOneCNPPerInterval(t *testing.T) {
	n := NewNotifier(NotifierConfig{Interval: 50 * us})
	var sentAt []time.Duration
	for now := time.Duration(0); now < 200*us; now += 10 * us {
		if n.OnCE(now) {
			sentAt = append(sentAt, now)
		}
	}
	want := []time.Duration{0, 50 * us, 100 * us, 150 * us}
	if len(sentAt) != len(want) {
		t.Fatalf("CNPs at %v, want %v", sentAt, want)
	}
	for i := range want {
		if sentAt[i] != want[i] {
			t.Fatalf("CNPs at %v, want %v", sentAt, want)
		}
	}
	if got := n.Stats(); got != (NotifierStats{Marked: 20, CNPs: 4}) {
		t.Errorf("Stats = %+v", got)
	}
	if _, ok := n.NextDeadline(); ok {
		t.Error("a notifier without deferral asked for a wake-up")
	}
}

// The paper: the NIC "generates at most one CNP packet every N
// microseconds for the flow, if any packet that arrives within that time
// window was marked." A mark the interval suppressed is echoed when the
// interval ends.
func TestNotifierDeferredCNP(t *testing.T) {
	n := NewNotifier(DefaultNotifierConfig())
	if !n.OnCE(0) {
		t.Fatal("first mark sent no CNP")
	}
	if n.OnCE(10 * us) {
		t.Fatal("a mark inside the interval sent a CNP")
	}
	at, ok := n.NextDeadline()
	if !ok || at != 50*us {
		t.Fatalf("NextDeadline = %v, %v; want 50µs, true", at, ok)
	}
	if n.Advance(49 * us) {
		t.Fatal("deferred CNP sent before the interval ended")
	}
	if !n.Advance(50 * us) {
		t.Fatal("deferred CNP not sent at the end of the interval")
	}
	if n.Advance(200 * us) {
		t.Fatal("a second deferred CNP for the same mark")
	}
	if n.OnCE(60 * us) {
		t.Fatal("a mark 10 µs after the deferred CNP sent another")
	}
	if got := n.Stats().CNPs; got != 2 {
		t.Errorf("CNPs = %d, want 2", got)
	}
}

// A zero interval echoes every mark, as HPCC's simulator does.
func TestNotifierZeroInterval(t *testing.T) {
	n := NewNotifier(NotifierConfig{})
	for i := range 5 {
		if !n.OnCE(time.Duration(i)) {
			t.Fatalf("mark %d not echoed with a zero interval", i)
		}
	}
	if err := (NotifierConfig{Interval: -1}).Validate(); !errors.Is(err, ErrConfig) {
		t.Errorf("negative interval: Validate() = %v", err)
	}
}

// Property: CNPs are never closer than the interval, and every mark is
// covered: a CNP was sent at it, or within the interval before it, or (if
// deferred) one is sent when its interval ends.
func TestNotifierProperty(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		interval := time.Duration(rapid.Int64Range(0, 100).Draw(t, "interval")) * us
		deferred := rapid.Bool().Draw(t, "deferred")
		n := NewNotifier(NotifierConfig{Interval: interval, Deferred: deferred})
		steps := rapid.SliceOfN(rapid.Int64Range(0, 80), 1, 200).Draw(t, "gaps")

		var now time.Duration
		var cnps []time.Duration
		uncovered := false // a mark not yet covered by a CNP
		for _, gap := range steps {
			now += time.Duration(gap) * us
			// A driver that honours NextDeadline wakes at it first.
			if at, ok := n.NextDeadline(); ok && at <= now {
				if !n.Advance(at) {
					t.Fatalf("deadline %v passed without a CNP", at)
				}
				cnps = append(cnps, at)
				uncovered = false
			}
			if n.OnCE(now) {
				cnps = append(cnps, now)
				uncovered = false
				continue
			}
			if len(cnps) == 0 || now-cnps[len(cnps)-1] >= interval {
				t.Fatalf("mark at %v suppressed with the last CNP at %v", now, cnps)
			}
			uncovered = true
		}
		for i := 1; i < len(cnps); i++ {
			if cnps[i]-cnps[i-1] < interval {
				t.Fatalf("CNPs at %v and %v, closer than %v", cnps[i-1], cnps[i], interval)
			}
		}
		if _, pending := n.NextDeadline(); pending != (deferred && uncovered) {
			t.Fatalf("pending = %v, want %v", pending, deferred && uncovered)
		}
	})
}
