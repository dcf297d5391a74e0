package udpio

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

const (
	// DefaultBatchSize is how many datagrams one syscall moves at most when
	// Options.BatchSize is zero. Past a few dozen the per-call saving is small
	// next to the per-packet cost of copying and of the loopback stack.
	DefaultBatchSize = 64
	// MaxBatchSize is the kernel's ceiling on recvmmsg/sendmmsg (UIO_MAXIOV).
	MaxBatchSize = 1024
	// DefaultSocketBuffer is the SO_RCVBUF and SO_SNDBUF request when the
	// Options leave them zero: enough to absorb a burst of a thousand
	// 4 KiB packets while the event loop is busy elsewhere.
	DefaultSocketBuffer = 4 << 20
)

// Options configure a Conn. The zero value is ready to use.
type Options struct {
	// BatchSize bounds the datagrams moved per syscall (and the memory kept
	// for them). Zero means DefaultBatchSize; values above MaxBatchSize are
	// lowered to it.
	BatchSize int
	// RecvBuffer and SendBuffer are the requested socket buffer sizes in
	// bytes; zero means DefaultSocketBuffer.
	RecvBuffer, SendBuffer int
	// ReuseAddr sets SO_REUSEADDR. It is off by default so that a second
	// daemon started on a taken address fails instead of sharing the port.
	ReuseAddr bool
	// ReusePort sets SO_REUSEPORT: sockets of one user that all set it
	// may bind the same address, and the kernel spreads the datagrams
	// they receive over them (by a hash of the source address and port,
	// or by the program AttachReuseportCBPF gives the group). It is how a
	// daemon runs several engines behind one address.
	ReusePort bool
	// Offload turns on UDP segmentation offload in both directions:
	// WriteBatch sends each run of consecutive datagrams with one
	// destination, one TOS byte and one size (the run's last may be
	// shorter) as one sendmmsg message with a UDP_SEGMENT control
	// message, and ReadBatch asks for coalesced datagrams (UDP_GRO) and
	// splits each back into exactly the datagrams sent. What the caller
	// sees is the same datagrams, addresses and TOS bytes as without it.
	// Where the kernel lacks either, that direction quietly runs without
	// (Conn.Offload says which are on). See offload_linux.go.
	Offload bool
	// ReceiveViews, with Offload, hands out each datagram of a coalesced
	// receive as a view of the Conn's receive memory (Msg.Buf is replaced
	// by the view) instead of copying it into the Msg's own buffer: a
	// receiver that is done with a batch before it reads the next saves a
	// copy of every datagram. A view is valid until the next read on the
	// Conn, which may overwrite it; a caller that keeps a datagram longer
	// (a switch queueing it) copies it or leaves this off. Without GRO
	// (the kernel refused it) datagrams are read into the Msgs' buffers
	// as usual.
	ReceiveViews bool

	// Test hooks: testGROOpt replaces the UDP_GRO option number (an
	// unknown one makes the kernel refuse it, as an old kernel does), and
	// testGSOErrno is returned instead of calling sendmmsg when the first
	// message of a call is segmented (a kernel or device without GSO).
	testGROOpt   int
	testGSOErrno unix.Errno
}

func (o Options) batchSize() int {
	if o.BatchSize <= 0 {
		return DefaultBatchSize
	}
	return min(o.BatchSize, MaxBatchSize)
}

func (o Options) recvBuffer() int { return orDefault(o.RecvBuffer, DefaultSocketBuffer) }
func (o Options) sendBuffer() int { return orDefault(o.SendBuffer, DefaultSocketBuffer) }

func orDefault(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// Conn is a batched IPv4 UDP socket carrying the TOS byte per datagram.
//
// One goroutine may read while another writes: each direction has its own
// preallocated batch, guarded by its own mutex. Close may be called from any
// goroutine and unblocks both.
type Conn struct {
	udp       *net.UDPConn
	raw       syscall.RawConn
	local     netip.AddrPort
	batchSize int
	woken     atomic.Bool // Wake was called and no ReadBatchUntil has returned for it yet
	closing   atomic.Bool // Close has begun
	// wakeFD is the eventfd that ends a wait in ppoll. It is used only
	// inside a raw.Control callback: the socket's descriptor reference
	// keeps Close from closing it under a Wake or a wait.
	wakeFD int
	wakeFn func(uintptr)

	readMu sync.Mutex
	rb     *batch
	rbatch *batch // the slots of the current recvmmsg
	rcount int    // how many it offers
	rn     int    // datagrams it returned
	rerr   error  // its errno, other than EAGAIN/EINTR
	rwait  bool   // whether EAGAIN waits for readability
	recvFn func(uintptr) bool
	pollFn func(uintptr)

	// The state of ReadBatchUntil's wait in ppoll, owned by its goroutine.
	pfds    [2]unix.PollFd // the socket, the wake eventfd
	pts     unix.Timespec
	pbuf    [8]byte
	puntil  time.Time
	perr    error
	ppollFn func(uintptr)
	drainFn func(uintptr)

	writeMu sync.Mutex
	wb      *batch
	wcount  int
	wn      int
	werr    error
	sendFn  func(uintptr) bool

	// Segmentation offload (offload_linux.go). gso is owned by the
	// writer (under writeMu), gro by the reader (under readMu); both
	// are read atomically by Offload.
	gso, gro   atomic.Bool
	gsoErrno   unix.Errno // the test hook, Options.testGSOErrno
	gsoFailure atomic.Pointer[error]
	gsoLimit   atomic.Int64 // SegmentLimit; written under writeMu
	rg         *groBatch    // the coalesced receives and what is left of them
}

// Listen opens a UDP socket on an IPv4 address ("127.0.0.2:4793",
// "10.0.0.1:0" inside a namespace), with IP_RECVTOS on, the socket buffers
// sized, and SO_REUSEADDR as the Options say.
func Listen(addr string, opts Options) (*Conn, error) {
	var gro bool
	lc := net.ListenConfig{Control: control(opts, &gro)}
	pc, err := lc.ListenPacket(context.Background(), "udp4", addr)
	if err != nil {
		return nil, fmt.Errorf("udpio: listen %s: %w", addr, err)
	}
	udp := pc.(*net.UDPConn)
	local := udp.LocalAddr().(*net.UDPAddr).AddrPort()
	if !local.Addr().Unmap().Is4() {
		udp.Close()
		return nil, fmt.Errorf("udpio: listen %s: %w", addr, ErrNotIPv4)
	}
	raw, err := udp.SyscallConn()
	if err != nil {
		udp.Close()
		return nil, fmt.Errorf("udpio: listen %s: %w", addr, err)
	}
	wakeFD, err := newEventfd()
	if err != nil {
		udp.Close()
		return nil, fmt.Errorf("udpio: listen %s: %w", addr, err)
	}
	c := newConn(udp, raw, wakeFD, netip.AddrPortFrom(local.Addr().Unmap(), local.Port()), opts.batchSize(), opts.Offload)
	c.gro.Store(gro)
	if !gro {
		c.rg = nil // the kernel has no UDP_GRO: receive as without Offload
	} else if c.rg != nil {
		c.rg.views = opts.ReceiveViews
	}
	c.gsoErrno = opts.testGSOErrno
	return c, nil
}

func newConn(udp *net.UDPConn, raw syscall.RawConn, wakeFD int, local netip.AddrPort, size int, offload bool) *Conn {
	wOOB := tosCmsgSpace
	if offload {
		wOOB += segCmsgSpace
	}
	c := &Conn{
		udp:       udp,
		raw:       raw,
		wakeFD:    wakeFD,
		local:     local,
		batchSize: size,
		rb:        newBatch(size, recvOOBSpace),
		wb:        newBatch(size, wOOB),
	}
	for i := range size {
		putTOSHeader(c.wb.slotOOB(i))
		if offload {
			putSegmentHeader(c.wb.slotOOB(i)[tosCmsgSpace:])
		}
	}
	if offload {
		c.gso.Store(true)
		c.rg = newGROBatch(min(size, groSlots))
	}
	// Method values are bound once: building them per call would allocate.
	c.recvFn = c.recvmmsg
	c.pollFn = c.pollRecvmmsg
	c.sendFn = c.sendmmsg
	c.wakeFn = c.signalWake
	c.ppollFn = c.ppoll
	c.drainFn = c.drainWake
	return c
}

// LocalAddr returns the bound address and port.
func (c *Conn) LocalAddr() netip.AddrPort { return c.local }

// BatchSize returns the most datagrams one ReadBatch returns or one
// sendmmsg call carries.
func (c *Conn) BatchSize() int { return c.batchSize }

// SocketBuffers returns the receive and send buffer sizes the kernel granted,
// as it reports them (twice the usable payload space on Linux).
func (c *Conn) SocketBuffers() (recv, send int, err error) {
	return getBuffers(c.raw)
}

// SyscallConn returns the socket's raw connection, as net.UDPConn's does:
// for socket options udpio does not set.
func (c *Conn) SyscallConn() syscall.RawConn { return c.raw }

// SetReadDeadline sets the deadline of ReadBatch, as net.Conn does.
// ReadBatchUntil replaces it on every call.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.udp.SetReadDeadline(t) }

// SetWriteDeadline sets the deadline of WriteBatch, as net.Conn does.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.udp.SetWriteDeadline(t) }

// Close closes the socket. A ReadBatch, ReadBatchUntil or WriteBatch
// blocked in another goroutine returns an error matching net.ErrClosed.
func (c *Conn) Close() error {
	c.closing.Store(true)
	// A wait in ppoll holds a reference to the socket, and udp.Close waits
	// for every reference to be dropped: end the wait first.
	_ = c.raw.Control(c.wakeFn)
	err := c.udp.Close()
	if !errors.Is(err, net.ErrClosed) { // not a second Close
		// udp.Close returned after the last RawConn callback did, and no
		// new one can start, so nothing can touch the eventfd any more.
		_ = unix.Close(c.wakeFD)
	}
	return err
}

// ReadBatch waits until at least one datagram is queued, then receives up to
// min(len(msgs), BatchSize()) of them in one recvmmsg call and returns how
// many it filled. Each filled Msg has N, Addr, TOS and Truncated set; a
// datagram longer than its Buf is cut to len(Buf) and flagged Truncated
// rather than reported as an error. It honours the read deadline
// (os.ErrDeadlineExceeded) and Close (net.ErrClosed).
func (c *Conn) ReadBatch(msgs []Msg) (int, error) {
	return c.read(msgs, true)
}

// ReadBatchUntil is ReadBatch for an event loop: it returns the datagrams
// already queued at once, and otherwise waits until one arrives, the
// deadline passes or Wake is called. In the last two cases it returns 0 and
// a nil error, and the loop runs its timers and its inbox. A zero deadline
// waits for a datagram or Wake only. The call owns the read deadline, and
// is for the one goroutine that runs the loop.
//
// The deadline is met within tens of microseconds, not on the runtime
// timers' millisecond grid: a wait that ends less than 2 ms from now
// sleeps in ppoll(2) on the socket and the wake-up eventfd, with the
// thread's timer slack set to 1 µs, and a longer one parks in the runtime
// poller until 2 ms before the deadline and finishes in ppoll. It never
// returns 0, nil before the deadline unless woken.
func (c *Conn) ReadBatchUntil(msgs []Msg, deadline time.Time) (int, error) {
	// Under load the socket is never empty: take what is queued without
	// paying for a deadline update.
	if n, err := c.read(msgs, false); n > 0 || err != nil {
		return n, err
	}
	if deadline.IsZero() {
		n, _, err := c.park(msgs, deadline) // done: it has no deadline to give up at
		return n, err
	}
	left := time.Until(deadline)
	if left <= 0 {
		return 0, nil // due: a pending Wake is left for the next wait
	}
	if left > preciseWindow {
		if n, done, err := c.park(msgs, deadline); done {
			return n, err
		}
	}
	return c.readPrecise(msgs, deadline)
}

// park waits in the runtime poller for a datagram or a Wake, giving up
// preciseWindow before the deadline (a zero deadline: never). done false
// means it gave up, and the wait is to be finished in ppoll.
func (c *Conn) park(msgs []Msg, deadline time.Time) (n int, done bool, err error) {
	early := time.Time{}
	if !deadline.IsZero() {
		early = deadline.Add(-preciseWindow)
	}
	if err := c.udp.SetReadDeadline(early); err != nil {
		return 0, true, fmt.Errorf("udpio: set read deadline: %w", err)
	}
	// Checked after the deadline is set: a Wake that ran before this point
	// is seen here, and one that runs after it moves the deadline into the
	// past and so ends the read below.
	if c.takeWake() {
		return 0, true, nil
	}
	n, err = c.read(msgs, true)
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		return n, true, err
	}
	if c.takeWake() {
		return 0, true, nil
	}
	return 0, false, nil
}

// takeWake consumes a pending Wake. It clears the flag before the eventfd
// because Wake sets them in the other order: a Wake racing with it leaves
// a flag or a count behind, which ends a later wait early (a spurious
// wake-up, harmless to a loop), never nothing at all.
func (c *Conn) takeWake() bool {
	if !c.woken.Swap(false) {
		return false
	}
	_ = c.raw.Control(c.drainFn)
	return true
}

// readPrecise waits in ppoll until a datagram is queued, Wake or Close is
// called or the deadline passes, then takes what is queued.
func (c *Conn) readPrecise(msgs []Msg, deadline time.Time) (int, error) {
	c.puntil, c.perr = deadline, nil
	if err := c.raw.Control(c.ppollFn); err != nil {
		return 0, fmt.Errorf("udpio: read: %w", err)
	}
	switch {
	case c.closing.Load():
		return 0, errReadClosed
	case c.perr != nil:
		return 0, c.perr
	case c.pfds[0].Revents == 0:
		return 0, nil // the deadline passed, or a Wake
	}
	// Readable: a datagram, or a socket error for recvmmsg to report.
	return c.read(msgs, false)
}

var (
	// errReadClosed is what a wait ended by Close returns.
	errReadClosed = fmt.Errorf("udpio: read: %w", net.ErrClosed)
	// errReadDeadline is what a read that passed its deadline returns.
	errReadDeadline = fmt.Errorf("udpio: read: %w", os.ErrDeadlineExceeded)
)

// ppoll is readPrecise's RawConn callback: the socket's descriptor is
// valid, and the eventfd open, until it returns.
func (c *Conn) ppoll(fd uintptr) {
	c.pfds[0] = unix.PollFd{Fd: int32(fd), Events: unix.POLLIN}
	c.pfds[1] = unix.PollFd{Fd: int32(c.wakeFD), Events: unix.POLLIN}
	if _, err := ppollUntil(c.pfds[:], c.puntil, &c.pts); err != nil {
		c.perr = fmt.Errorf("udpio: read: %w", err)
		return
	}
	if c.pfds[1].Revents != 0 {
		c.woken.Store(false) // the flag first, as in takeWake
		_ = drainEventfd(c.wakeFD, &c.pbuf)
	}
}

func (c *Conn) drainWake(uintptr) { _ = drainEventfd(c.wakeFD, &c.pbuf) }

func (c *Conn) signalWake(uintptr) { signalEventfd(c.wakeFD) }

// Wake makes a ReadBatchUntil blocked in another goroutine (or the next one
// to block) return 0, nil. It is how a goroutine that queued work for the
// event loop (a client request, a stop) gets the loop's attention without a
// second blocking primitive. It never blocks, and does nothing after Close.
func (c *Conn) Wake() {
	c.woken.Store(true)
	_ = c.raw.Control(c.wakeFn)             // ends a wait in ppoll
	_ = c.udp.SetReadDeadline(aLongTimeAgo) // ends a wait in the poller
}

// aLongTimeAgo is a deadline that has passed, to end a blocked read now.
var aLongTimeAgo = time.Unix(1, 0)

// read runs one recvmmsg for up to BatchSize messages. With wait false it
// returns 0, nil when nothing is queued, and ignores the deadline.
func (c *Conn) read(msgs []Msg, wait bool) (int, error) {
	msgs = msgs[:min(len(msgs), c.batchSize)]
	if len(msgs) == 0 {
		return 0, nil
	}
	c.readMu.Lock()
	defer c.readMu.Unlock()
	if g := c.rg; g != nil && c.gro.Load() {
		if !g.pending() {
			count := g.prepare(len(msgs))
			if err := c.recv(g.b, count, wait); err != nil {
				return 0, err
			}
			g.finish(c.rn)
		}
		return g.split(msgs), nil
	}
	c.rb.prepareRecv(msgs)
	if err := c.recv(c.rb, len(msgs), wait); err != nil {
		return 0, err
	}
	c.rb.finishRecv(msgs, c.rn)
	return c.rn, nil
}

// recv runs one recvmmsg on the first count slots of b and leaves in c.rn
// how many it filled. With wait false it fills none when nothing is queued,
// and ignores the deadline.
func (c *Conn) recv(b *batch, count int, wait bool) error {
	c.rbatch, c.rcount, c.rn, c.rerr, c.rwait = b, count, 0, nil, wait
	var err error
	if wait {
		err = c.raw.Read(c.recvFn)
	} else {
		err = c.raw.Control(c.pollFn)
	}
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// An event loop meets this on most long waits: spare it the
		// allocations of wrapping.
		return errReadDeadline
	}
	if err != nil {
		return fmt.Errorf("udpio: read: %w", err)
	}
	if c.rerr != nil {
		return fmt.Errorf("udpio: read: %w", os.NewSyscallError("recvmmsg", c.rerr))
	}
	return nil
}

// recvmmsg is called by the runtime poller with the socket's descriptor; it
// returns false to be called again once the socket is readable.
func (c *Conn) recvmmsg(fd uintptr) bool {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd, c.rbatch.ptr(), uintptr(c.rcount), 0, 0, 0)
		switch errno {
		case 0:
			c.rn = int(n)
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return !c.rwait
		default:
			c.rerr = errno
			return true
		}
	}
}

func (c *Conn) pollRecvmmsg(fd uintptr) { c.recvmmsg(fd) }

// WriteBatch sends every message in msgs, each with its own TOS byte, in as
// few sendmmsg calls as the batch size allows. It returns how many were
// sent; when that is less than len(msgs) the error says why msgs[n] was not
// sent (ErrInvalidMsg for a message that cannot be sent, a wrapped errno
// from the kernel, net.ErrClosed). Messages after msgs[n] are not attempted.
// It waits for socket buffer space rather than failing with EAGAIN.
func (c *Conn) WriteBatch(msgs []Msg) (int, error) {
	c.writeMu.Lock()
	defer c.writeMu.Unlock()
	sent := 0
	for sent < len(msgs) {
		chunk := msgs[sent:min(len(msgs), sent+c.batchSize)]
		gso := c.gso.Load()
		var hdrs, packed int
		var invalid error
		if gso {
			hdrs, packed, invalid = c.wb.prepareSendSegmented(chunk, int(c.gsoLimit.Load()))
		} else {
			packed, invalid = c.wb.prepareSend(chunk)
			hdrs = packed
		}
		if hdrs > 0 {
			n, err := c.send(hdrs)
			if err != nil && gso && c.wb.segs[0] > 1 {
				// The error is the first message's: a run of chunk[0].N-byte
				// datagrams.
				switch {
				case gsoOverMTU(err) && c.limitSegments(chunk[0].N):
					continue // the same messages again, that run one datagram each
				case gsoUnsupported(err):
					c.disableGSO(err)
					continue // the same messages again, one datagram each
				}
			}
			done := n
			if gso {
				done = c.wb.sentMsgs(n)
			}
			sent += done
			if err != nil {
				return sent, err
			}
			if done < packed {
				continue // the kernel took part of the chunk; pack the rest again
			}
		}
		if invalid != nil {
			return sent, fmt.Errorf("udpio: write message %d: %w", sent, invalid)
		}
	}
	return sent, nil
}

// send runs sendmmsg on the first count prepared slots.
func (c *Conn) send(count int) (int, error) {
	c.wcount, c.wn, c.werr = count, 0, nil
	if c.gsoErrno != 0 && c.gso.Load() && c.wb.segs[0] > 1 {
		c.werr = c.gsoErrno // the test hook: a kernel without GSO
	} else if err := c.raw.Write(c.sendFn); err != nil {
		return 0, fmt.Errorf("udpio: write: %w", err)
	}
	if c.werr != nil {
		return 0, fmt.Errorf("udpio: write: %w", os.NewSyscallError("sendmmsg", c.werr))
	}
	return c.wn, nil
}

func (c *Conn) sendmmsg(fd uintptr) bool {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, fd, c.wb.ptr(), uintptr(c.wcount), 0, 0, 0)
		switch errno {
		case 0:
			c.wn = int(n)
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		default:
			c.werr = errno
			return true
		}
	}
}
