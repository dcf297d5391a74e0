package hostapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// maxFDs is how many descriptors one request may carry before the kernel
// truncates the control message (MSG_CTRUNC); register_memory needs one.
const maxFDs = 4

// session is the server side of one client connection. Two goroutines
// serve it: readLoop answers requests in order, one at a time, and
// writeLoop pushes completions. The mappings belong to readLoop alone, so
// they need no lock; only what Complete and the writer share with it is
// guarded.
type session struct {
	srv  *Server
	id   ClientID
	uid  uint32 // the peer's, for the per-uid limit
	job  Job    // the job its hello declared, for the per-job limit
	conn *net.UnixConn
	log  *slog.Logger

	// Owned by readLoop.
	helloDone bool
	regions   map[RegionID][]byte // the client's mappings, by the backend's ids
	orphans   [][]byte            // mappings a misbehaving backend may still use
	rbuf, oob []byte
	scratch   []byte

	// Shared with Complete and writeLoop.
	mu         sync.Mutex
	queue      []Completion  // pushed, not yet written; grows on demand
	writing    int           // dequeued, being written
	wake       chan struct{} // capacity 1: the queue became non-empty
	stop       chan struct{} // closed by teardown: writeLoop returns
	writerDone chan struct{}
	released   chan struct{} // closed when teardown has finished
	killOnce   sync.Once

	requests, errorReplies, completions atomic.Uint64
	// lastActive is when the client last sent a request or was pushed a
	// completion (Unix nanoseconds), for IdleTimeout.
	lastActive atomic.Int64
}

func newSession(srv *Server, id ClientID, conn *net.UnixConn, log *slog.Logger) *session {
	return &session{
		srv:        srv,
		id:         id,
		conn:       conn,
		log:        log.With(slog.Uint64("client", uint64(id))),
		regions:    map[RegionID][]byte{},
		rbuf:       make([]byte, MaxFrame),
		oob:        make([]byte, unix.CmsgSpace(maxFDs*4)),
		wake:       make(chan struct{}, 1),
		stop:       make(chan struct{}),
		writerDone: make(chan struct{}),
		released:   make(chan struct{}),
	}
}

// kill closes the connection once, logging why; both loops then end and
// readLoop tears the session down.
func (s *session) kill(reason string) {
	s.killOnce.Do(func() {
		if reason != "" {
			s.log.Info("disconnecting client", slog.String("reason", reason))
		}
		_ = s.conn.Close()
	})
}

func (s *session) readLoop() {
	defer s.srv.wg.Done()
	defer s.teardown()
	helloBy := time.Now().Add(s.srv.cfg.HelloTimeout)
	if s.conn.SetReadDeadline(helloBy) != nil {
		s.kill("cannot arm the hello timeout")
		return
	}
	for {
		n, oobn, flags, _, err := s.conn.ReadMsgUnix(s.rbuf, s.oob)
		fds := parseRights(s.oob[:oobn])
		if err != nil {
			closeFDs(fds)
			if errors.Is(err, os.ErrDeadlineExceeded) && s.helloDone {
				if s.stillBusy() {
					continue
				}
				s.srv.countIdleTimeout()
				s.kill(fmt.Sprintf("idle for %v with nothing outstanding", s.srv.cfg.IdleTimeout))
			} else if errors.Is(err, os.ErrDeadlineExceeded) {
				s.srv.countHelloTimeout()
				s.kill(fmt.Sprintf("no hello within %v", s.srv.cfg.HelloTimeout))
			} else if errors.Is(err, io.EOF) {
				s.kill("client closed the connection")
			} else {
				s.kill("read: " + err.Error())
			}
			return
		}
		if flags&unix.MSG_TRUNC != 0 {
			closeFDs(fds)
			s.kill(fmt.Sprintf("%v: frame longer than %d bytes", ErrFraming, MaxFrame))
			return
		}
		err = s.serveFrame(s.rbuf[:n], fds, flags&unix.MSG_CTRUNC != 0)
		if s.helloDone && err == nil {
			s.lastActive.Store(time.Now().UnixNano())
			err = s.conn.SetReadDeadline(time.Now().Add(s.srv.cfg.IdleTimeout))
		}
		// The descriptors are closed whatever happened: a registered memfd
		// stays mapped without its descriptor, and any other is unwanted.
		closeFDs(fds)
		if err != nil {
			s.kill(err.Error())
			return
		}
	}
}

// stillBusy is called when the idle deadline passed: it reports whether
// the client was active since (a completion pushed) or has work
// outstanding, and if so arms the deadline again.
func (s *session) stillBusy() bool {
	idle := s.srv.cfg.IdleTimeout
	next := time.Unix(0, s.lastActive.Load()).Add(idle)
	if time.Now().Before(next) {
		return s.conn.SetReadDeadline(next) == nil
	}
	if c, err := s.srv.backend.Counters(s.id); err == nil && c.Client.Outstanding > 0 {
		return s.conn.SetReadDeadline(time.Now().Add(idle)) == nil
	}
	return false
}

// serveFrame answers one frame. Its error means the connection must close
// (a framing error, or the reply could not be written).
func (s *session) serveFrame(frame []byte, fds []int, fdsTruncated bool) error {
	req, err := decodeRequest(frame)
	if errors.Is(err, ErrFraming) {
		return err
	}
	if err == nil {
		err = s.admissible(req, fds, fdsTruncated)
	}
	var result any
	if err == nil {
		result, err = s.dispatch(req, fds)
	}
	return s.reply(req.op, req.id, result, err)
}

// admissible checks what decoding cannot: the session state and the
// descriptors that came with the request.
func (s *session) admissible(req request, fds []int, fdsTruncated bool) error {
	if !s.helloDone && req.op != OpHello {
		return errorf(CodeHelloRequired, "%v before hello", req.op)
	}
	if req.op == OpRegisterMemory {
		if fdsTruncated || len(fds) != 1 {
			return errorf(CodeBadFD, "register_memory takes exactly one descriptor (SCM_RIGHTS), got %s", countFDs(fds, fdsTruncated))
		}
		return nil
	}
	if len(fds) > 0 || fdsTruncated {
		return errorf(CodeBadFD, "%v takes no descriptors, got %s", req.op, countFDs(fds, fdsTruncated))
	}
	return nil
}

func countFDs(fds []int, truncated bool) string {
	if truncated {
		return fmt.Sprintf("more than %d", maxFDs)
	}
	return fmt.Sprint(len(fds))
}

func (s *session) dispatch(req request, fds []int) (any, error) {
	switch b := req.body.(type) {
	case *HelloReq:
		return s.hello(b)
	case *RegisterReq:
		return s.registerMemory(b, fds[0])
	case *DeregisterReq:
		return nil, s.deregisterMemory(b.Region)
	case *FlowSpec:
		return nil, s.srv.backend.CreateFlow(s.id, *b)
	case *DestroyFlowReq:
		return nil, s.srv.backend.DestroyFlow(s.id, b.Flow)
	case *SendReq:
		return nil, s.srv.backend.PostSend(s.id, *b)
	case *RecvReq:
		return nil, s.srv.backend.PostRecv(s.id, *b)
	case *StepReq:
		return nil, s.srv.backend.BeginStep(s.id, *b)
	case *EndStepReq:
		return nil, s.srv.backend.EndStep(s.id, b.Step)
	case *StepsReq:
		return s.steps(b.Limit)
	}
	switch req.op {
	case OpCounters:
		return s.counters()
	case OpStatus:
		return s.status()
	}
	return nil, errorf(CodeInternal, "no handler for %v", req.op)
}

// reply writes the answer to a request: the result, or the error.
func (s *session) reply(op Op, id uint64, result any, err error) error {
	s.requests.Add(1)
	var body []byte
	if err == nil {
		body, err = encodeResult(op, result)
	}
	flags := uint8(FlagReply)
	if err != nil {
		e := asError(err)
		s.errorReplies.Add(1)
		switch e.Code {
		case CodeNoSuchFlow, CodeNoSuchRegion, CodeNoSuchStep, CodeFlowExists, CodeFlowReserved:
			s.srv.countNotOwner()
		}
		s.log.Debug("error reply", slog.String("op", op.String()), slog.Uint64("id", id),
			slog.String("code", string(e.Code)), slog.String("message", e.Message))
		flags |= FlagError
		body, _ = encodeBody(e)
	}
	if werr := writeMessage(s.conn, &s.scratch, op, flags, id, body); werr != nil {
		return fmt.Errorf("write reply: %w", werr)
	}
	return nil
}

func encodeResult(op Op, result any) ([]byte, error) {
	body, err := encodeBody(result)
	if err != nil {
		return nil, errorf(CodeInternal, "encode %v reply: %v", op, err)
	}
	if len(body) > MaxMessage {
		return nil, errorf(CodeInternal, "%v reply of %d bytes exceeds the %d-byte message limit", op, len(body), MaxMessage)
	}
	return body, nil
}

// writeLoop pushes completions in the order the backend made them, and
// tells the backend of each one written (Backend.Written): a completion's
// work request stays outstanding until then, so a client that stops
// reading runs into its outstanding limit before its queue can fill; only
// completions the backend makes without a work request can overflow it.
func (s *session) writeLoop() {
	defer s.srv.wg.Done()
	defer close(s.writerDone)
	var scratch []byte
	for {
		select {
		case <-s.stop:
			return
		case <-s.wake:
		}
		for comp, ok := s.dequeue(); ok; comp, ok = s.dequeue() {
			err := s.push(comp, &scratch)
			s.mu.Lock()
			s.writing--
			s.mu.Unlock()
			if err != nil {
				s.kill(err.Error())
				return
			}
		}
	}
}

// enqueue adds a completion for writeLoop; false means the queue is full.
func (s *session) enqueue(comp Completion) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) >= s.srv.cfg.Limits.CompletionQueue {
		return false
	}
	s.queue = append(s.queue, comp)
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return true
}

func (s *session) dequeue() (Completion, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.queue) == 0 {
		return Completion{}, false
	}
	comp := s.queue[0]
	s.queue[0] = Completion{} // drop its Forgiven slice now
	s.queue = s.queue[1:]
	s.writing++
	return comp, true
}

// drain waits until every completion queued so far has been written, or
// the deadline passes, so that a daemon shutting down delivers the
// failures of outstanding work before it disconnects.
func (s *session) drain(deadline time.Time) {
	for time.Now().Before(deadline) {
		s.mu.Lock()
		idle := len(s.queue) == 0 && s.writing == 0
		s.mu.Unlock()
		select {
		case <-s.writerDone:
			return
		default:
		}
		if idle {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

func (s *session) push(comp Completion, scratch *[]byte) error {
	body, err := json.Marshal(comp)
	if err != nil {
		return fmt.Errorf("encode completion of wr %d: %w", comp.WRID, err)
	}
	if len(body) > MaxMessage {
		return fmt.Errorf("completion of wr %d is %d bytes, over the %d-byte message limit", comp.WRID, len(body), MaxMessage)
	}
	if err := writeMessage(s.conn, scratch, OpCompletion, 0, 0, body); err != nil {
		return fmt.Errorf("write completion: %w", err)
	}
	s.completions.Add(1)
	s.lastActive.Store(time.Now().UnixNano())
	s.srv.backend.Written(s.id, 1)
	return nil
}

// teardown releases everything the client held, in the order the backend
// contract needs: the backend lets go of the client's memory (ClientGone)
// before the server unmaps it.
func (s *session) teardown() {
	s.kill("")
	close(s.stop)
	<-s.writerDone
	s.srv.removeSession(s.id) // from here Complete reports ErrUnknownClient
	if s.helloDone {
		s.srv.backend.ClientGone(s.id)
	}
	var bytes uint64
	for _, mem := range s.regions {
		bytes += uint64(len(mem))
		s.unmap(mem)
	}
	s.srv.addMapped(-len(s.regions), bytes)
	for _, mem := range s.orphans {
		s.unmap(mem)
	}
	s.log.Info("client released", slog.Int("regions", len(s.regions)))
	close(s.released)
}

func (s *session) unmap(mem []byte) {
	if err := unmap(mem); err != nil {
		s.log.Error("munmap failed", slog.Any("error", err))
	}
}
