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

	readMu sync.Mutex
	rb     *batch
	rcount int   // slots offered to the current recvmmsg
	rn     int   // datagrams it returned
	rerr   error // its errno, other than EAGAIN/EINTR
	rwait  bool  // whether EAGAIN waits for readability
	recvFn func(uintptr) bool
	pollFn func(uintptr)

	writeMu sync.Mutex
	wb      *batch
	wcount  int
	wn      int
	werr    error
	sendFn  func(uintptr) bool
}

// Listen opens a UDP socket on an IPv4 address ("127.0.0.2:4793",
// "10.0.0.1:0" inside a namespace), with IP_RECVTOS on, the socket buffers
// sized, and SO_REUSEADDR as the Options say.
func Listen(addr string, opts Options) (*Conn, error) {
	lc := net.ListenConfig{Control: control(opts)}
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
	return newConn(udp, raw, netip.AddrPortFrom(local.Addr().Unmap(), local.Port()), opts.batchSize()), nil
}

func newConn(udp *net.UDPConn, raw syscall.RawConn, local netip.AddrPort, size int) *Conn {
	c := &Conn{
		udp:       udp,
		raw:       raw,
		local:     local,
		batchSize: size,
		rb:        newBatch(size, recvOOBSpace),
		wb:        newBatch(size, tosCmsgSpace),
	}
	for i := range size {
		putTOSHeader(c.wb.slotOOB(i))
	}
	// Method values are bound once: building them per call would allocate.
	c.recvFn = c.recvmmsg
	c.pollFn = c.pollRecvmmsg
	c.sendFn = c.sendmmsg
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

// SetReadDeadline sets the deadline of ReadBatch, as net.Conn does.
// ReadBatchUntil replaces it on every call.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.udp.SetReadDeadline(t) }

// SetWriteDeadline sets the deadline of WriteBatch, as net.Conn does.
func (c *Conn) SetWriteDeadline(t time.Time) error { return c.udp.SetWriteDeadline(t) }

// Close closes the socket. A ReadBatch or WriteBatch blocked in another
// goroutine returns an error matching net.ErrClosed.
func (c *Conn) Close() error { return c.udp.Close() }

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
// waits for a datagram or Wake only. The call owns the read deadline.
func (c *Conn) ReadBatchUntil(msgs []Msg, deadline time.Time) (int, error) {
	// Under load the socket is never empty: take what is queued without
	// paying for a deadline update.
	if n, err := c.read(msgs, false); n > 0 || err != nil {
		return n, err
	}
	if err := c.udp.SetReadDeadline(deadline); err != nil {
		return 0, fmt.Errorf("udpio: set read deadline: %w", err)
	}
	// Checked after the deadline is set: a Wake that ran before this point
	// is seen here, and one that runs after it moves the deadline into the
	// past and so ends the read below.
	if c.woken.Swap(false) {
		return 0, nil
	}
	n, err := c.read(msgs, true)
	if errors.Is(err, os.ErrDeadlineExceeded) {
		c.woken.Store(false)
		return 0, nil
	}
	return n, err
}

// Wake makes a ReadBatchUntil blocked in another goroutine (or the next one
// to block) return 0, nil. It is how a goroutine that queued work for the
// event loop (a client request, a stop) gets the loop's attention without a
// second blocking primitive.
func (c *Conn) Wake() {
	c.woken.Store(true)
	_ = c.udp.SetReadDeadline(aLongTimeAgo)
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
	c.rb.prepareRecv(msgs)
	c.rcount, c.rn, c.rerr, c.rwait = len(msgs), 0, nil, wait
	var err error
	if wait {
		err = c.raw.Read(c.recvFn)
	} else {
		err = c.raw.Control(c.pollFn)
	}
	if err != nil {
		return 0, fmt.Errorf("udpio: read: %w", err)
	}
	if c.rerr != nil {
		return 0, fmt.Errorf("udpio: read: %w", os.NewSyscallError("recvmmsg", c.rerr))
	}
	c.rb.finishRecv(msgs, c.rn)
	return c.rn, nil
}

// recvmmsg is called by the runtime poller with the socket's descriptor; it
// returns false to be called again once the socket is readable.
func (c *Conn) recvmmsg(fd uintptr) bool {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, fd, c.rb.ptr(), uintptr(c.rcount), 0, 0, 0)
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
		packed, invalid := c.wb.prepareSend(chunk)
		if packed > 0 {
			n, err := c.send(packed)
			sent += n
			if err != nil {
				return sent, err
			}
			if n < packed {
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
	if err := c.raw.Write(c.sendFn); err != nil {
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
