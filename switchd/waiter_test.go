package switchd

import (
	"testing"
	"time"
)

// waitReturns runs w.wait(d) and fails if it has not returned within limit.
func waitReturns(t *testing.T, w *waiter, d, limit time.Duration) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.wait(d)
	}()
	select {
	case <-done:
	case <-time.After(limit):
		w.wake()
		<-done
		t.Fatalf("wait(%v) did not return within %v", d, limit)
	}
}

func newTestWaiter(t *testing.T) *waiter {
	t.Helper()
	w, err := newWaiter()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.close() })
	return w
}

// A wake that comes before the wait is not lost: the eventfd stays
// readable until the sleeper reads it.
func TestWakeBeforeWaitIsRemembered(t *testing.T) {
	w := newTestWaiter(t)
	w.wake()
	waitReturns(t, w, forever, 5*time.Second)
	w.wake()
	waitReturns(t, w, time.Second/2, 5*time.Second) // the precise (ppoll) path
}

func TestWakeEndsAWaitWithoutDeadline(t *testing.T) {
	w := newTestWaiter(t)
	go func() {
		time.Sleep(10 * time.Millisecond)
		w.wake()
	}()
	waitReturns(t, w, forever, 5*time.Second)
}

// Both sleeping paths end on their own: the short one in ppoll, the long
// one parked in the runtime poller and finished in ppoll.
func TestWaitEndsAtItsDeadline(t *testing.T) {
	w := newTestWaiter(t)
	waitReturns(t, w, 100*time.Microsecond, 5*time.Second)
	waitReturns(t, w, 5*time.Millisecond, 5*time.Second)
}
