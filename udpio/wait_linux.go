package udpio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// preciseWindow is the longest wait done in ppoll(2). Go's timers, and so
// the runtime poller's deadlines, fire on a millisecond grid on Linux (a
// 20 µs time.Timer wakes about a millisecond late), so a longer wait parks
// in the poller until preciseWindow before its deadline and finishes in
// ppoll, whose timeout the kernel honours within the thread's timer slack.
// The window is twice the grid, so the poller's lateness never eats into
// the deadline itself.
const preciseWindow = 2 * time.Millisecond

// timerSlack is the timer slack of a thread about to sleep in ppoll: how
// late the kernel may end the sleep to batch it with other wake-ups (50 µs
// by default).
const timerSlack = time.Microsecond

// slackRefused records that the kernel refused to set the slack (a
// seccomp filter), so that waits stop asking.
var slackRefused atomic.Bool

// fineSlack sets the calling thread's timer slack to timerSlack, just
// before a ppoll on this thread. It is set at every wait (a 250 ns
// syscall) because the waiting goroutine may run on a different thread
// each time: locking it to one thread instead would make every wake-up
// from the runtime poller a handoff between two threads, which more than
// doubled a round trip between two processes through a loop parked in the
// poller (see the package documentation). The slack stays
// on the thread, where it only makes the runtime's own millisecond
// timeouts a little more punctual.
func fineSlack() {
	if slackRefused.Load() {
		return
	}
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(timerSlack), 0, 0, 0); err != nil {
		slackRefused.Store(true) // waits still work, within the default slack
	}
}

// ppollUntil waits in ppoll(2), with the thread's timer slack made fine,
// until one of fds is ready or the deadline passes, and returns how many
// are ready. It resumes after a signal (EINTR), and never returns 0 before
// the deadline. ts is the caller's scratch, so that nothing escapes to the
// heap.
func ppollUntil(fds []unix.PollFd, deadline time.Time, ts *unix.Timespec) (int, error) {
	fineSlack()
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return 0, nil
		}
		*ts = unix.NsecToTimespec(int64(left))
		n, err := unix.Ppoll(fds, ts, nil)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return 0, os.NewSyscallError("ppoll", err)
		case n > 0:
			return n, nil
		}
	}
}

// eventOne is the 8-byte increment written to an eventfd to signal it.
var eventOne = func() (b [8]byte) {
	binary.NativeEndian.PutUint64(b[:], 1)
	return b
}()

// newEventfd returns a non-blocking eventfd: the wake-up both wait kinds
// share. A signal before the wait is not lost, since the counter stays
// readable until the waiter reads it, and signals coalesce.
func newEventfd() (int, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return -1, fmt.Errorf("udpio: %w", os.NewSyscallError("eventfd", err))
	}
	return fd, nil
}

// signalEventfd adds one to the counter. It never blocks: the counter
// would have to reach 2⁶⁴-1 first.
func signalEventfd(fd int) { _, _ = unix.Write(fd, eventOne[:]) }

// drainEventfd resets the counter; unix.EAGAIN means it was not set. buf
// is the caller's scratch.
func drainEventfd(fd int, buf *[8]byte) error {
	_, err := unix.Read(fd, buf[:])
	return err
}

// Waiter sleeps until a deadline or a Wake from another goroutine, with
// the precision of Conn.ReadBatchUntil, for a loop that has no socket to
// wait on (trimswitch's timer goroutine). Its wake-up is an eventfd: a
// Wake before the wait is not lost, and Wakes coalesce.
//
// Wait is for one goroutine; Wake and Close may be called from any
// goroutine. Nothing allocates after NewWaiter.
type Waiter struct {
	file    *os.File // the eventfd, registered with the runtime poller
	rc      syscall.RawConn
	closing atomic.Bool

	// Owned by the goroutine in Wait.
	fds     [1]unix.PollFd
	ts      unix.Timespec
	buf     [8]byte
	until   time.Time
	pollErr error
	drainFn func(uintptr) bool
	ppollFn func(uintptr)
	wakeFn  func(uintptr)
}

// NewWaiter opens a Waiter. Close releases its eventfd.
func NewWaiter() (*Waiter, error) {
	fd, err := newEventfd()
	if err != nil {
		return nil, err
	}
	w := &Waiter{file: os.NewFile(uintptr(fd), "udpio-waiter")}
	if w.rc, err = w.file.SyscallConn(); err != nil {
		w.file.Close()
		return nil, fmt.Errorf("udpio: waiter: %w", err)
	}
	// Method values are bound once: building them per call would allocate.
	w.drainFn = w.drain
	w.ppollFn = w.ppoll
	w.wakeFn = func(fd uintptr) { signalEventfd(int(fd)) }
	return w, nil
}

// Wake ends the current Wait, or makes the next one return at once.
// After Close it does nothing. It goes through the file's descriptor
// reference, so it can never write to a descriptor number that Close has
// freed and the process has reused.
func (w *Waiter) Wake() { _ = w.rc.Control(w.wakeFn) }

// Close ends a Wait in progress, which then returns an error matching
// os.ErrClosed, and releases the eventfd.
func (w *Waiter) Close() error {
	w.closing.Store(true)
	w.Wake() // a ppoll holds the descriptor, and so Close, until it returns
	return w.file.Close()
}

// Wait sleeps until the deadline passes or Wake is called; a zero
// deadline waits for Wake only. It returns nil in both cases, and an error
// matching os.ErrClosed once the Waiter is closed. A Wait whose deadline
// is less than 2 ms away sleeps in ppoll(2); a longer one parks in the
// runtime poller until 2 ms before the deadline and finishes in ppoll.
func (w *Waiter) Wait(deadline time.Time) error {
	if !deadline.IsZero() && time.Until(deadline) <= 0 {
		return nil
	}
	if deadline.IsZero() || time.Until(deadline) > preciseWindow {
		if done, err := w.park(deadline); done {
			return err
		}
	}
	return w.waitPrecise(deadline)
}

// park waits in the runtime poller for a Wake, giving up preciseWindow
// before the deadline (zero: never). done reports that the Wait is over:
// woken, or failed.
func (w *Waiter) park(deadline time.Time) (done bool, err error) {
	early := time.Time{}
	if !deadline.IsZero() {
		early = deadline.Add(-preciseWindow)
	}
	if err := w.file.SetReadDeadline(early); err != nil {
		return true, w.closedOr(err)
	}
	err = w.rc.Read(w.drainFn)
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return false, nil
	case err != nil:
		return true, w.closedOr(err)
	case w.closing.Load():
		return true, errWaiterClosed // the wake-up was Close's
	}
	return true, nil
}

// waitPrecise waits in ppoll until the deadline, a Wake or Close.
func (w *Waiter) waitPrecise(deadline time.Time) error {
	w.until, w.pollErr = deadline, nil
	if err := w.rc.Control(w.ppollFn); err != nil {
		return w.closedOr(err)
	}
	if w.closing.Load() {
		return errWaiterClosed
	}
	return w.pollErr
}

// drain is the poller's read callback: it asks to be called again once the
// eventfd is readable.
func (w *Waiter) drain(fd uintptr) bool {
	return !errors.Is(drainEventfd(int(fd), &w.buf), unix.EAGAIN)
}

func (w *Waiter) ppoll(fd uintptr) {
	w.fds[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	n, err := ppollUntil(w.fds[:], w.until, &w.ts)
	if n > 0 {
		_ = drainEventfd(int(fd), &w.buf)
	}
	if err != nil {
		w.pollErr = fmt.Errorf("udpio: wait: %w", err)
	}
}

var errWaiterClosed = fmt.Errorf("udpio: wait: %w", os.ErrClosed)

// closedOr reports a closed Waiter as os.ErrClosed, whatever the file
// layer said, and wraps other errors.
func (w *Waiter) closedOr(err error) error {
	if w.closing.Load() {
		return errWaiterClosed
	}
	return fmt.Errorf("udpio: wait: %w", err)
}
