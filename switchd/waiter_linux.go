package switchd

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// forever is a wait with no deadline.
const forever = time.Duration(1<<63 - 1)

// preciseWait is the longest wait done in ppoll; longer waits park in the
// runtime poller (millisecond grid) for all but this much, then finish in
// ppoll.
const preciseWait = 2 * time.Millisecond

// timerSlack is the timer slack of the timer goroutine's thread: how late
// the kernel may wake it to batch wake-ups (50 µs by default).
const timerSlack = time.Microsecond

// waiter sleeps until a deadline or a wake-up, whichever comes first. The
// wake-up is an eventfd, so a wake before the sleep is not lost: the
// counter stays readable until the sleeper reads it.
type waiter struct {
	fd    int
	file  *os.File // the eventfd registered with the runtime poller
	rc    syscall.RawConn
	fds   [1]unix.PollFd
	ts    unix.Timespec
	buf   [8]byte
	one   [8]byte
	drain func(fd uintptr) bool
}

func newWaiter() (*waiter, error) {
	fd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("switchd: eventfd: %w", err)
	}
	w := &waiter{fd: fd, file: os.NewFile(uintptr(fd), "switchd-timer")}
	if w.rc, err = w.file.SyscallConn(); err != nil {
		w.file.Close()
		return nil, fmt.Errorf("switchd: eventfd: %w", err)
	}
	w.fds[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	binary.NativeEndian.PutUint64(w.one[:], 1)
	w.drain = func(fd uintptr) bool {
		_, err := unix.Read(int(fd), w.buf[:])
		return !errors.Is(err, unix.EAGAIN)
	}
	return w, nil
}

// setTimerSlack sets the calling thread's timer slack; the caller has
// locked its goroutine to the thread.
func setTimerSlack() error {
	return unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(timerSlack), 0, 0, 0)
}

// wake ends the current or next wait. It never blocks: when the counter is
// already set the write adds to it, which the sleeper reads as one wake-up.
func (w *waiter) wake() { _, _ = unix.Write(w.fd, w.one[:]) }

// wait sleeps for d (forever: until woken).
func (w *waiter) wait(d time.Duration) {
	if d <= 0 {
		return
	}
	if d > preciseWait {
		start := time.Now()
		if w.park(d) {
			return
		}
		d -= time.Since(start)
		if d <= 0 {
			return
		}
	}
	w.ppoll(d)
}

// park waits in the runtime poller for a wake-up, giving up preciseWait
// before d (d forever: never gives up). It reports whether it was woken.
func (w *waiter) park(d time.Duration) bool {
	deadline := time.Time{}
	if d != forever {
		deadline = time.Now().Add(d - preciseWait)
	}
	if err := w.file.SetReadDeadline(deadline); err != nil {
		return true // not pollable: the caller loops, which is correct if slower
	}
	return w.rc.Read(w.drain) == nil
}

// ppoll waits in the kernel with the thread's fine timer slack.
func (w *waiter) ppoll(d time.Duration) {
	w.ts = unix.NsecToTimespec(int64(d))
	n, _ := unix.Ppoll(w.fds[:], &w.ts, nil)
	if n > 0 {
		_, _ = unix.Read(w.fd, w.buf[:])
	}
}

func (w *waiter) close() error { return w.file.Close() }
