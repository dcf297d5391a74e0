package hostapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// DefaultTimeout bounds Dial and Region.Close, the calls that take no
// context.
const DefaultTimeout = 10 * time.Second

// Client is an application's connection to its daemon. Its methods are
// safe for concurrent use; each call waits for its own reply, and calls
// from several goroutines are in flight together.
type Client struct {
	conn   *net.UnixConn
	info   HelloReply
	nextID atomic.Uint64

	mu      sync.Mutex
	pending map[uint64]chan result
	regions map[*Region]struct{}
	queue   []Completion // pushed, not yet polled
	err     error        // why the connection ended; set once
	closed  bool

	notify chan struct{} // capacity 1: the queue became non-empty
	done   chan struct{} // closed when the reader has stopped
}

type result struct {
	body []byte
	err  error
}

// Dial connects to the daemon socket at path and says hello.
func Dial(path string) (*Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	return DialContext(ctx, path)
}

// DialContext is Dial with a context for the connection and the hello.
// The client declares the job named by the environment variable JobEnv
// (FORGIVE_JOB), if set; DialJob names one.
func DialContext(ctx context.Context, path string) (*Client, error) {
	return DialJob(ctx, path, os.Getenv(JobEnv))
}

// DialJob is DialContext declaring job: the clients of one uid that
// declare the same job share its steps and the flow ids reserved for it
// (docs/hostapi.md, "Ownership"); "" is the uid's default job.
func DialJob(ctx context.Context, path, job string) (*Client, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unixpacket", path)
	if err != nil {
		return nil, fmt.Errorf("hostapi: dial %s: %w", path, err)
	}
	c := &Client{
		conn:    nc.(*net.UnixConn),
		pending: map[uint64]chan result{},
		regions: map[*Region]struct{}{},
		notify:  make(chan struct{}, 1),
		done:    make(chan struct{}),
	}
	go c.readLoop()
	hello := &HelloReq{Versions: []int{Version}, Name: clientName(), Job: job}
	if err := c.call(ctx, OpHello, hello, &c.info, -1); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

func clientName() string {
	name := fmt.Sprintf("%s[%d]", filepath.Base(os.Args[0]), os.Getpid())
	return name[:min(len(name), 64)]
}

// Info returns the daemon's hello: its host, this client's id, the limits.
func (c *Client) Info() HelloReply { return c.info }

// RegisterMemory creates a shared memory region of size bytes (a sealed
// memfd, mapped here and by the daemon) and registers it. The region's
// bytes are what sends read and receives write.
func (c *Client) RegisterMemory(ctx context.Context, size int) (*Region, error) {
	if size <= 0 {
		return nil, fmt.Errorf("hostapi: region size %d, want > 0", size)
	}
	fd, mem, err := newMemfd(size)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd) // the daemon has its own copy once the call is sent
	var rep RegisterReply
	if err := c.call(ctx, OpRegisterMemory, &RegisterReq{Length: uint64(size)}, &rep, fd); err != nil {
		_ = unmap(mem)
		return nil, err
	}
	r := &Region{c: c, id: rep.Region, mem: mem}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		_ = unmap(mem)
		return nil, ErrClosed
	}
	c.regions[r] = struct{}{}
	return r, nil
}

// CreateFlow opens a flow to a peer host; the peer's application creates
// the same flow id towards this host.
func (c *Client) CreateFlow(ctx context.Context, spec FlowSpec) error {
	return c.call(ctx, OpCreateFlow, &spec, nil, -1)
}

// DestroyFlow closes a flow; its outstanding work requests complete with
// StatusError.
func (c *Client) DestroyFlow(ctx context.Context, flow FlowID) error {
	return c.call(ctx, OpDestroyFlow, &DestroyFlowReq{Flow: flow}, nil, -1)
}

// PostSend posts a send; its completion arrives through Poll.
func (c *Client) PostSend(ctx context.Context, req SendReq) error {
	return c.call(ctx, OpPostSend, &req, nil, -1)
}

// PostRecv posts a receive buffer; its completion, with the forgiven
// ranges, arrives through Poll.
func (c *Client) PostRecv(ctx context.Context, req RecvReq) error {
	return c.call(ctx, OpPostRecv, &req, nil, -1)
}

// BeginStep tells the daemon a training step begins, before its gradient
// traffic starts.
func (c *Client) BeginStep(ctx context.Context, req StepReq) error {
	return c.call(ctx, OpBeginStep, &req, nil, -1)
}

// EndStep tells the daemon this rank's all-reduce for step completed.
func (c *Client) EndStep(ctx context.Context, step uint64) error {
	return c.call(ctx, OpEndStep, &EndStepReq{Step: step}, nil, -1)
}

// Counters reads the daemon's counters for this client.
func (c *Client) Counters(ctx context.Context) (Counters, error) {
	var out Counters
	err := c.call(ctx, OpCounters, nil, &out, -1)
	return out, err
}

// Steps reads the most recent step records, oldest first; limit 0 means
// DefaultStepRecords.
func (c *Client) Steps(ctx context.Context, limit int) ([]StepRecord, error) {
	var out StepsReply
	err := c.call(ctx, OpSteps, &StepsReq{Limit: limit}, &out, -1)
	return out.Steps, err
}

// Status reads the daemon's status.
func (c *Client) Status(ctx context.Context) (Status, error) {
	var out Status
	err := c.call(ctx, OpStatus, nil, &out, -1)
	return out, err
}

// Poll returns the next completion, waiting until one arrives, ctx is
// done or the connection ends. Completions are queued without bound inside
// the client, so an application that polls late never stalls the replies
// to its other calls; the daemon's outstanding limit bounds the queue.
func (c *Client) Poll(ctx context.Context) (Completion, error) {
	for {
		if comp, ok := c.TryPoll(); ok {
			return comp, nil
		}
		select {
		case <-c.notify:
		case <-ctx.Done():
			return Completion{}, ctx.Err()
		case <-c.done:
			if comp, ok := c.TryPoll(); ok {
				return comp, nil
			}
			return Completion{}, c.connErr()
		}
	}
}

// TryPoll returns the next completion if one is queued.
func (c *Client) TryPoll() (Completion, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.queue) == 0 {
		return Completion{}, false
	}
	comp := c.queue[0]
	c.queue[0] = Completion{}
	c.queue = c.queue[1:]
	if len(c.queue) > 0 {
		c.signal() // another poller may be waiting
	}
	return comp, true
}

// Close disconnects from the daemon, which releases everything this
// client registered or created, and unmaps every region still open: their
// Bytes must not be used afterwards.
func (c *Client) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	c.err = ErrClosed // whatever ended the connection before, calls now fail as closed
	regions := c.regions
	c.regions = map[*Region]struct{}{}
	c.mu.Unlock()

	err := c.conn.Close()
	if errors.Is(err, net.ErrClosed) {
		err = nil // the reader closed it when the daemon went away
	}
	<-c.done
	for r := range regions {
		_ = unmap(r.mem)
	}
	return err
}

// call sends one request and waits for its reply. fd >= 0 is passed with
// the request (SCM_RIGHTS). resp, if not nil, receives the reply body;
// replies are decoded leniently so that a newer daemon may add fields.
func (c *Client) call(ctx context.Context, op Op, req, resp any, fd int) error {
	body, err := encodeBody(req)
	if err != nil {
		return fmt.Errorf("hostapi: encode %v: %w", op, err)
	}
	if len(body) > MaxBody {
		return fmt.Errorf("hostapi: %v request of %d bytes exceeds %d", op, len(body), MaxBody)
	}
	if err := ctx.Err(); err != nil {
		return err // not sent
	}
	id := c.nextID.Add(1)
	ch := make(chan result, 1)
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return c.err
	}
	c.pending[id] = ch
	c.mu.Unlock()

	frame := appendFrame(make([]byte, 0, HeaderLen+len(body)), op, 0, id, body)
	var oob []byte
	if fd >= 0 {
		oob = unix.UnixRights(fd)
	}
	if _, _, err := c.conn.WriteMsgUnix(frame, oob, nil); err != nil {
		return c.writeFailed(op, err)
	}
	select {
	case r := <-ch:
		if r.err != nil || resp == nil {
			return r.err
		}
		if err := json.Unmarshal(r.body, resp); err != nil {
			return fmt.Errorf("hostapi: decode %v reply: %w", op, err)
		}
		return nil
	case <-ctx.Done():
		c.forget(id) // a late reply is dropped
		return ctx.Err()
	}
}

// writeFailed ends the connection after a failed send and returns why it
// ended. When the daemon closed its end (EPIPE) it may have said why first,
// as it does when it refuses a client, so the reader is left to drain that
// message; any other failure closes the socket at once.
func (c *Client) writeFailed(op Op, err error) error {
	if !errors.Is(err, unix.EPIPE) {
		c.shutdown(fmt.Errorf("%w: send %v: %v", ErrConnLost, op, err))
		_ = c.conn.Close()
	}
	<-c.done
	return c.connErr()
}

func (c *Client) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

func (c *Client) connErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// signal wakes one Poll; c.mu is held.
func (c *Client) signal() {
	select {
	case c.notify <- struct{}{}:
	default:
	}
}

// --- reader ---------------------------------------------------------------

// assembly is a daemon message arriving in several frames.
type assembly struct {
	op    Op
	flags uint8
	body  []byte
}

func (c *Client) readLoop() {
	defer close(c.done)
	buf := make([]byte, MaxFrame)
	oob := make([]byte, unix.CmsgSpace(maxFDs*4))
	partial := map[uint64]*assembly{} // by request id; 0 for pushes
	for {
		n, oobn, flags, _, err := c.conn.ReadMsgUnix(buf, oob)
		closeFDs(parseRights(oob[:oobn])) // the daemon sends none
		switch {
		case errors.Is(err, io.EOF):
			err = fmt.Errorf("%w: daemon closed the connection", ErrConnLost)
		case err != nil:
			err = fmt.Errorf("%w: %v", ErrConnLost, err)
		case flags&unix.MSG_TRUNC != 0:
			err = fmt.Errorf("%w: daemon frame longer than %d bytes", ErrFraming, MaxFrame)
		default:
			err = c.readFrame(buf[:n], partial)
		}
		if err != nil {
			c.shutdown(err)
			_ = c.conn.Close()
			return
		}
	}
}

// readFrame handles one daemon frame; an error ends the connection.
func (c *Client) readFrame(frame []byte, partial map[uint64]*assembly) error {
	h, chunk, err := parseFrame(frame)
	if err != nil {
		return err
	}
	if h.version != Version {
		return fmt.Errorf("%w: daemon frame version %d", ErrFraming, h.version)
	}
	a := partial[h.id]
	if a == nil {
		a = &assembly{op: h.op, flags: h.flags &^ FlagMore}
	} else if a.op != h.op {
		return fmt.Errorf("%w: frame of %v continues a %v message", ErrFraming, h.op, a.op)
	}
	if len(a.body)+len(chunk) > MaxMessage {
		return fmt.Errorf("%w: daemon message exceeds %d bytes", ErrFraming, MaxMessage)
	}
	a.body = append(a.body, chunk...) // copies: buf is reused
	if h.flags&FlagMore != 0 {
		partial[h.id] = a
		return nil
	}
	delete(partial, h.id)
	return c.deliver(h.id, a)
}

func (c *Client) deliver(id uint64, m *assembly) error {
	switch {
	case id == 0 && m.op == OpCompletion:
		var comp Completion
		if err := json.Unmarshal(m.body, &comp); err != nil {
			return fmt.Errorf("%w: bad completion: %v", ErrFraming, err)
		}
		c.mu.Lock()
		c.queue = append(c.queue, comp)
		c.signal()
		c.mu.Unlock()
		return nil
	case id == 0 && m.flags&FlagError != 0:
		return decodeError(m.body) // the daemon refused or dropped the connection
	case id == 0:
		return nil // a push this version does not know: ignore it
	}
	r := result{body: m.body}
	if m.flags&FlagError != 0 {
		r = result{err: decodeError(m.body)}
	}
	c.mu.Lock()
	ch := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if ch != nil {
		ch <- r
	}
	return nil
}

func decodeError(body []byte) error {
	e := new(Error)
	if err := json.Unmarshal(body, e); err != nil || e.Code == "" {
		return errorf(CodeInternal, "undecodable error reply %q", body)
	}
	return e
}

// shutdown records why the connection ended and fails every pending call.
func (c *Client) shutdown(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err == nil {
		c.err = err
	}
	for id, ch := range c.pending {
		ch <- result{err: c.err}
		delete(c.pending, id)
	}
}

// --- regions --------------------------------------------------------------

// Region is registered memory shared with the daemon.
type Region struct {
	c   *Client
	id  RegionID
	mem []byte
}

// ID names the region in SendReq and RecvReq.
func (r *Region) ID() RegionID { return r.id }

// Bytes is the region's memory. Receives write into it while posted;
// forgiven ranges read as zeros.
func (r *Region) Bytes() []byte { return r.mem }

// Len is the region's length in bytes.
func (r *Region) Len() int { return len(r.mem) }

// Close deregisters the region and unmaps it here. The local mapping is
// released even if deregistration fails (the daemon then keeps its own
// until the client disconnects); the error says why.
func (r *Region) Close() error {
	c := r.c
	c.mu.Lock()
	_, open := c.regions[r]
	delete(c.regions, r)
	c.mu.Unlock()
	if !open {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultTimeout)
	defer cancel()
	err := c.call(ctx, OpDeregisterMemory, &DeregisterReq{Region: r.id}, nil, -1)
	if uerr := unmap(r.mem); uerr != nil && err == nil {
		err = fmt.Errorf("hostapi: munmap region %d: %w", r.id, uerr)
	}
	return err
}
