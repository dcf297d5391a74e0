package udpio

import (
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// result is what a ReadBatchUntil (or its ppoll phase) returned, and when.
type result struct {
	n   int
	err error
	at  time.Time
}

// goRead runs read in a goroutine and returns where its result arrives.
func goRead(read func() (int, error)) <-chan result {
	done := make(chan result, 1)
	go func() {
		n, err := read()
		done <- result{n, err, time.Now()}
	}()
	return done
}

// await returns the result, failing the test if none came within guard.
func await(t *testing.T, done <-chan result, what string) result {
	t.Helper()
	select {
	case r := <-done:
		return r
	case <-time.After(guard):
		t.Fatalf("%s: still waiting after %v", what, guard)
		return result{}
	}
}

// letItBlock gives a goroutine just started time to reach its wait, so
// that what follows most likely happens during the wait. Either order
// must pass: nothing is asserted about the time.
func letItBlock() { time.Sleep(5 * time.Millisecond) }

// The precise phase (ppoll on the socket and the eventfd) returns a
// datagram that arrives while it waits, and returns it before its
// deadline. The phase is called directly, with a far deadline, so that
// the datagram can only be noticed by ppoll.
func TestDatagramEndsPreciseWait(t *testing.T) {
	rx := listen(t, "127.0.0.1:0", Options{})
	tx := listen(t, "127.0.0.2:0", Options{})
	msgs := makeMsgs(4, 16)
	deadline := time.Now().Add(guard)
	done := goRead(func() (int, error) { return rx.readPrecise(msgs, deadline) })
	letItBlock()
	writeAllMsgs(t, tx, []Msg{{Buf: []byte("hello"), N: 5, Addr: rx.LocalAddr()}})
	r := await(t, done, "ppoll with a datagram queued")
	if r.n != 1 || r.err != nil || string(msgs[0].Payload()) != "hello" {
		t.Fatalf("readPrecise = %d, %v, %q; want 1, nil, \"hello\"", r.n, r.err, msgs[0].Payload())
	}
	if !r.at.Before(deadline) {
		t.Fatal("returned at the deadline, not when the datagram arrived")
	}
}

// Wake ends a wait in ppoll, whether it comes before or during it, and
// the wake is consumed: the next wait sleeps until its deadline.
func TestWakeEndsPreciseWait(t *testing.T) {
	rx := listen(t, "127.0.0.1:0", Options{})
	msgs := makeMsgs(1, 8)
	for _, before := range []bool{true, false} {
		deadline := time.Now().Add(guard)
		if before {
			rx.Wake()
		}
		done := goRead(func() (int, error) { return rx.readPrecise(msgs, deadline) })
		if !before {
			letItBlock()
			rx.Wake()
		}
		r := await(t, done, "ppoll after Wake")
		if r.n != 0 || r.err != nil || !r.at.Before(deadline) {
			t.Fatalf("wake before=%v: readPrecise = %d, %v, before deadline %v; want 0, nil, true",
				before, r.n, r.err, r.at.Before(deadline))
		}
	}
	deadline := time.Now().Add(time.Millisecond)
	if n, err := rx.ReadBatchUntil(msgs, deadline); n != 0 || err != nil || time.Now().Before(deadline) {
		t.Fatalf("after the wakes: ReadBatchUntil = %d, %v, early %v; want 0, nil, false", n, err, time.Now().Before(deadline))
	}
}

// A deadline that passes returns 0, nil, and never early: both the short
// wait (ppoll only) and the long one (poller, then ppoll).
func TestPreciseWaitEndsAtItsDeadline(t *testing.T) {
	rx := listen(t, "127.0.0.1:0", Options{})
	msgs := makeMsgs(1, 8)
	for _, d := range []time.Duration{200 * time.Microsecond, 5 * time.Millisecond} {
		deadline := time.Now().Add(d)
		n, err := rx.ReadBatchUntil(msgs, deadline)
		if n != 0 || err != nil {
			t.Fatalf("%v wait: ReadBatchUntil = %d, %v; want 0, nil", d, n, err)
		}
		if early := time.Until(deadline); early > 0 {
			t.Fatalf("%v wait returned %v before its deadline", d, early)
		}
	}
}

// Close ends a wait in ppoll with net.ErrClosed. It must end the wait
// itself: the socket's descriptor is held by the wait, and Close waits for
// it, so a Close that did not wake ppoll would hang until the deadline.
func TestCloseEndsPreciseWait(t *testing.T) {
	rx, err := Listen("127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	done := goRead(func() (int, error) { return rx.readPrecise(makeMsgs(1, 8), time.Now().Add(guard)) })
	letItBlock()
	closed := make(chan error, 1)
	go func() { closed <- rx.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("Close: %v", err)
		}
	case <-time.After(guard / 2):
		t.Fatal("Close blocked behind the ppoll wait")
	}
	if r := await(t, done, "ppoll after Close"); !errors.Is(r.err, net.ErrClosed) {
		t.Fatalf("readPrecise after Close = %d, %v; want net.ErrClosed", r.n, r.err)
	}
	if err := rx.Close(); !errors.Is(err, net.ErrClosed) {
		t.Fatalf("second Close: %v, want net.ErrClosed", err)
	}
}

// After Close the eventfd's descriptor number is free and the process may
// reuse it; a late Wake must not write to whatever now holds it.
func TestWakeAfterCloseTouchesNoDescriptor(t *testing.T) {
	rx, err := Listen("127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	old := rx.wakeFD
	rx.Close()
	// Descriptors are allocated lowest first: a few new ones take the
	// number back.
	var fds []int
	defer func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	}()
	reused := -1
	for range 8 {
		fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		fds = append(fds, fd)
		if fd == old {
			reused = fd
			break
		}
	}
	if reused < 0 {
		t.Skipf("descriptor %d was not reused", old)
	}
	rx.Wake()
	var buf [8]byte
	if _, err := unix.Read(reused, buf[:]); !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("the descriptor that reused the eventfd's number was written to (read: %v)", err)
	}
}

// No Wake is lost at any point of the wait: before it, in the poller,
// in ppoll, or between two waits. A loop alternates waits with no deadline
// (poller only) and far-deadline ppoll waits; every Wake must get it to
// return, with a guard only against a hang.
func TestNoWakeIsLost(t *testing.T) {
	rx, err := Listen("127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	var pending atomic.Bool
	acks := make(chan struct{})
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		msgs := makeMsgs(1, 8)
		for i := 0; ; i++ {
			var err error
			if i%2 == 0 {
				_, err = rx.ReadBatchUntil(msgs, time.Time{})
			} else {
				_, err = rx.readPrecise(msgs, time.Now().Add(guard))
			}
			if err != nil {
				return
			}
			if pending.Swap(false) {
				acks <- struct{}{}
			}
		}
	}()
	for i := range 500 {
		pending.Store(true)
		rx.Wake()
		select {
		case <-acks:
		case <-time.After(guard):
			rx.Close()
			<-loopDone
			t.Fatalf("wake %d lost", i)
		}
	}
	rx.Close()
	<-loopDone
}

// The precise waits allocate nothing, whether they end at the deadline or
// on a Wake.
func TestPreciseWaitsDoNotAllocate(t *testing.T) {
	rx := listen(t, "127.0.0.1:0", Options{})
	msgs := makeMsgs(4, 64)
	round := func() {
		if _, err := rx.ReadBatchUntil(msgs, time.Now().Add(50*time.Microsecond)); err != nil {
			t.Fatal(err)
		}
		rx.Wake()
		if _, err := rx.ReadBatchUntil(msgs, time.Now().Add(time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		rx.Wake()
		if _, err := rx.ReadBatchUntil(msgs, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
	}
	round()
	if allocs := testing.AllocsPerRun(50, round); allocs != 0 {
		t.Fatalf("a round of precise waits allocates %v times, want 0", allocs)
	}
}

// The thread that sleeps in ppoll has its timer slack at 1 µs, so the
// kernel ends the sleep within microseconds of the deadline. The test
// goroutine is locked to its thread only to read that thread's slack back.
func TestPreciseWaitSetsTheThreadsSlack(t *testing.T) {
	rx := listen(t, "127.0.0.1:0", Options{})
	done := make(chan error)
	go func() {
		// The goroutine exits locked: the runtime retires the thread.
		runtime.LockOSThread()
		const coarse = 50 * time.Microsecond
		if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(coarse), 0, 0, 0); err != nil {
			done <- err
			return
		}
		if _, err := rx.ReadBatchUntil(makeMsgs(1, 8), time.Now().Add(100*time.Microsecond)); err != nil {
			done <- err
			return
		}
		slack, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
		if err == nil && time.Duration(slack) != timerSlack {
			err = fmt.Errorf("after a precise wait the thread's slack is %v, want %v", time.Duration(slack), timerSlack)
		}
		done <- err
	}()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func newTestWaiter(t *testing.T) *Waiter {
	t.Helper()
	w, err := NewWaiter()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

func goWait(w *Waiter, deadline time.Time) <-chan result {
	return goRead(func() (int, error) { return 0, w.Wait(deadline) })
}

// A Wake that comes before the Wait is not lost, on both paths: parked in
// the poller (no deadline) and in ppoll (a deadline under 2 ms away, and a
// far one).
func TestWaiterRemembersAWakeBeforeTheWait(t *testing.T) {
	w := newTestWaiter(t)
	for _, d := range []time.Duration{0, 1500 * time.Microsecond, guard} {
		w.Wake()
		var deadline time.Time
		if d > 0 {
			deadline = time.Now().Add(d)
		}
		r := await(t, goWait(w, deadline), "Wait after Wake")
		if r.err != nil {
			t.Fatalf("Wait(%v) after Wake: %v", d, r.err)
		}
		if d == guard && !r.at.Before(deadline) {
			t.Fatal("Wait(guard) after Wake slept until its deadline")
		}
	}
}

func TestWaiterWakeEndsAWaitWithoutDeadline(t *testing.T) {
	w := newTestWaiter(t)
	done := goWait(w, time.Time{})
	letItBlock()
	w.Wake()
	if r := await(t, done, "Wait after Wake"); r.err != nil {
		t.Fatal(r.err)
	}
}

// Both sleeping paths end on their own, and never early.
func TestWaiterEndsAtItsDeadline(t *testing.T) {
	w := newTestWaiter(t)
	for _, d := range []time.Duration{100 * time.Microsecond, 5 * time.Millisecond} {
		deadline := time.Now().Add(d)
		if err := w.Wait(deadline); err != nil {
			t.Fatalf("Wait(%v): %v", d, err)
		}
		if early := time.Until(deadline); early > 0 {
			t.Fatalf("Wait(%v) returned %v early", d, early)
		}
	}
}

// Close ends a Wait on either path with os.ErrClosed, and later Waits
// fail and Wakes do nothing. The ppoll phase is called directly with a far
// deadline: a Close that did not wake it would block behind it.
func TestWaiterCloseEndsTheWait(t *testing.T) {
	for _, inPpoll := range []bool{false, true} {
		w, err := NewWaiter()
		if err != nil {
			t.Fatal(err)
		}
		done := goRead(func() (int, error) {
			if inPpoll {
				return 0, w.waitPrecise(time.Now().Add(guard))
			}
			return 0, w.Wait(time.Time{})
		})
		letItBlock()
		closed := make(chan error, 1)
		go func() { closed <- w.Close() }()
		select {
		case err := <-closed:
			if err != nil {
				t.Fatalf("Close: %v", err)
			}
		case <-time.After(guard / 2):
			t.Fatalf("in ppoll %v: Close blocked behind the wait", inPpoll)
		}
		if r := await(t, done, "Wait after Close"); !errors.Is(r.err, os.ErrClosed) {
			t.Fatalf("in ppoll %v: Wait after Close: %v, want os.ErrClosed", inPpoll, r.err)
		}
		if err := w.Wait(time.Time{}); !errors.Is(err, os.ErrClosed) {
			t.Fatalf("Wait on a closed Waiter: %v, want os.ErrClosed", err)
		}
		w.Wake()
	}
}

// The Waiter allocates nothing: not in ppoll, not for a pending Wake, not
// parked in the poller until its early deadline.
func TestWaiterDoesNotAllocate(t *testing.T) {
	w := newTestWaiter(t)
	round := func() {
		for _, d := range []time.Duration{50 * time.Microsecond, time.Hour, 2500 * time.Microsecond} {
			if d == time.Hour {
				w.Wake()
			}
			if err := w.Wait(time.Now().Add(d)); err != nil {
				t.Fatal(err)
			}
		}
	}
	round()
	if allocs := testing.AllocsPerRun(20, round); allocs != 0 {
		t.Fatalf("a round of waits allocates %v times, want 0", allocs)
	}
}

// BenchmarkWaitLateness measures how late a 200 µs wait on an empty socket
// ends, as the median and 99th percentile over the ops (one op, one wait):
//
//   - poller: a read deadline in the runtime poller, which is what
//     ReadBatchUntil did before it had a ppoll phase;
//   - ReadBatchUntil: ppoll with the thread's timer slack at 1 µs.
//
// Run it with:
//
//	go test ./udpio -run '^$' -bench WaitLateness -benchtime=200x
func BenchmarkWaitLateness(b *testing.B) {
	const wait = 200 * time.Microsecond
	b.Run("poller", func(b *testing.B) {
		c := listen(b, "127.0.0.1:0", Options{})
		msgs := makeMsgs(1, 64)
		reportLateness(b, wait, func(deadline time.Time) error {
			if err := c.SetReadDeadline(deadline); err != nil {
				return err
			}
			if _, err := c.ReadBatch(msgs); !errors.Is(err, os.ErrDeadlineExceeded) {
				return fmt.Errorf("ReadBatch past its deadline: %v", err)
			}
			return nil
		})
	})
	b.Run("ReadBatchUntil", func(b *testing.B) {
		c := listen(b, "127.0.0.1:0", Options{})
		msgs := makeMsgs(1, 64)
		reportLateness(b, wait, func(deadline time.Time) error {
			if n, err := c.ReadBatchUntil(msgs, deadline); n != 0 || err != nil {
				return fmt.Errorf("ReadBatchUntil on an empty socket = %d, %v", n, err)
			}
			return nil
		})
	})
}

// reportLateness runs b.N waits of d and reports the median and 99th
// percentile of how late they ended.
func reportLateness(b *testing.B, d time.Duration, wait func(deadline time.Time) error) {
	late := make([]time.Duration, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range late {
		deadline := time.Now().Add(d)
		if err := wait(deadline); err != nil {
			b.Fatal(err)
		}
		late[i] = time.Since(deadline)
	}
	b.StopTimer()
	slices.Sort(late)
	b.ReportMetric(float64(late[len(late)/2])/1e3, "late-median-µs")
	b.ReportMetric(float64(late[len(late)*99/100])/1e3, "late-p99-µs")
}
