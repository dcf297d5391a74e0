package hostapi

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"slices"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Backend is what the daemon implements: the emulated NIC behind the
// socket, and the host API's semantics over it. The server calls it from
// its per-connection goroutines, so calls for different clients are
// concurrent; the daemon serialises them into its event loop. The server
// checks only what is about the socket (framing, the hello, descriptors,
// the mappings); the backend decides what a client may do: that every
// region and flow a call names is the calling client's, that buffers lie
// inside their regions, and that the client's limits allow the call
// (forgived's, hostapi/nicapi.Host, decides it as the simulator's host
// does).
//
// Contract:
//   - Hello tells the backend the job client c declared, before any other
//     call for c; an error refuses the hello.
//   - CheckRegister refuses a region of length bytes the client may not
//     register; the server calls it before mapping the memory.
//   - RegisterMemory receives the mapped region; the backend may read and
//     write mem until DeregisterMemory returns nil or ClientGone returns.
//     The server unmaps mem only after that. It returns a RegionID that is
//     not 0 and not in use by the same client.
//   - A PostSend or PostRecv that returns nil is completed exactly once,
//     through Server.Complete; one that returns an error is not completed.
//     Its work request stays outstanding, against the client's
//     MaxOutstanding, until the server calls Written for its completion,
//     once the completion is written to the socket.
//   - DestroyFlow completes the flow's outstanding work requests with
//     StatusError.
//   - ClientGone releases everything the client owned (flows, regions and
//     any steps) and returns only when the backend no longer touches its
//     memory.
//   - An error may be (or wrap) an *Error to choose the code the client
//     sees; any other error is reported as CodeBackend with its text.
type Backend interface {
	Hello(c ClientID, job Job) error
	CheckRegister(c ClientID, length uint64) error
	RegisterMemory(c ClientID, mem []byte) (RegionID, error)
	DeregisterMemory(c ClientID, r RegionID) error
	CreateFlow(c ClientID, spec FlowSpec) error
	DestroyFlow(c ClientID, flow FlowID) error
	PostSend(c ClientID, req SendReq) error
	PostRecv(c ClientID, req RecvReq) error
	Written(c ClientID, n int)
	BeginStep(c ClientID, req StepReq) error
	EndStep(c ClientID, step uint64) error
	Counters(c ClientID) (Counters, error)
	Steps(c ClientID) ([]StepRecord, error)
	Status() (Status, error)
	ClientGone(c ClientID)
}

// ServerConfig configures Listen. Zero values take the defaults.
type ServerConfig struct {
	HostID   HostID // reported by hello and status
	HostName string

	// AllowedUIDs and AllowedGIDs admit a peer whose uid, or whose primary
	// gid, is listed (SO_PEERCRED reports only the primary gid), besides
	// root and the daemon's own uid, which are always admitted: both can
	// already read and change the daemon's memory, files and socket, so
	// refusing them would protect nothing.
	AllowedUIDs []uint32
	AllowedGIDs []uint32

	Limits     Limits // per client; zero fields take DefaultLimits
	MaxClients int    // connected clients; 0 means DefaultMaxClients
	// MaxClientsPerUID bounds the connections of one uid that have not
	// said hello yet, so one user cannot lock the others out before
	// anything tells its connections apart; 0 means
	// DefaultMaxClientsPerUID.
	MaxClientsPerUID int
	// MaxClientsPerJob bounds the clients of one job (its uid and the
	// name its clients declare) once they said hello, so that pods that
	// share a uid but not a job do not exhaust each other's; 0 means
	// DefaultMaxClientsPerJob.
	MaxClientsPerJob int
	// HelloTimeout disconnects a client that has not completed its hello
	// this long after connecting; 0 means DefaultHelloTimeout.
	HelloTimeout time.Duration
	// IdleTimeout disconnects a client that said hello and then, for this
	// long, sent no request, was pushed no completion and had no work
	// request outstanding, so that abandoned connections do not hold
	// their uid's MaxClientsPerUID (or MaxClients) for ever; 0 means
	// DefaultIdleTimeout.
	IdleTimeout time.Duration

	// The socket file's owner, group and mode. Nil owner or group keeps
	// the daemon's; mode 0 means SocketMode. A group and mode 0660 let
	// the non-root users of allowed_gids connect.
	SocketUID, SocketGID *uint32
	SocketMode           fs.FileMode
}

// DefaultLimits are the per-client limits used for zero fields.
var DefaultLimits = Limits{
	MaxRegions:         64,
	MaxRegisteredBytes: 4 << 30,
	MaxFlows:           1024,
	MaxOutstanding:     4096,
	CompletionQueue:    8192,
}

// DefaultMaxClients bounds the connected clients when the config does not.
const DefaultMaxClients = 256

// DefaultMaxClientsPerUID bounds one uid's connections waiting for their
// hello.
const DefaultMaxClientsPerUID = 32

// DefaultMaxClientsPerJob bounds one job's connections: a host runs a few
// ranks of a job, each with one connection.
const DefaultMaxClientsPerJob = 32

// DefaultHelloTimeout is how long a new connection has to say hello.
const DefaultHelloTimeout = 5 * time.Second

// DefaultIdleTimeout is how long a connection may sit idle, with nothing
// outstanding, before it is closed: far longer than a training job's
// pause between steps (an evaluation, a checkpoint), far shorter than
// for ever.
const DefaultIdleTimeout = 10 * time.Minute

// SocketMode is the permission of the socket file: owner and group.
const SocketMode = 0o660

func (c ServerConfig) withDefaults() ServerConfig {
	l, d := &c.Limits, DefaultLimits
	l.MaxRegions = cmpOr(l.MaxRegions, d.MaxRegions)
	l.MaxRegisteredBytes = cmpOr(l.MaxRegisteredBytes, d.MaxRegisteredBytes)
	l.MaxFlows = cmpOr(l.MaxFlows, d.MaxFlows)
	l.MaxOutstanding = cmpOr(l.MaxOutstanding, d.MaxOutstanding)
	l.CompletionQueue = cmpOr(l.CompletionQueue, d.CompletionQueue)
	c.MaxClients = cmpOr(c.MaxClients, DefaultMaxClients)
	c.MaxClientsPerUID = cmpOr(c.MaxClientsPerUID, DefaultMaxClientsPerUID)
	c.MaxClientsPerJob = cmpOr(c.MaxClientsPerJob, DefaultMaxClientsPerJob)
	c.HelloTimeout = cmpOr(c.HelloTimeout, DefaultHelloTimeout)
	c.IdleTimeout = cmpOr(c.IdleTimeout, DefaultIdleTimeout)
	c.SocketMode = cmpOr(c.SocketMode, SocketMode)
	return c
}

func cmpOr[T int | uint64 | time.Duration | fs.FileMode](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// Server serves the host API on a unix socket.
type Server struct {
	cfg     ServerConfig
	backend Backend
	log     *slog.Logger
	ln      *net.UnixListener
	path    string
	sock    os.FileInfo // the socket file we created, to remove only ours
	selfUID uint32      // the daemon's uid, always admitted with root
	started time.Time

	mu         sync.Mutex
	closed     bool
	nextClient ClientID
	sessions   map[ClientID]*session
	perUID     map[uint32]int             // sessions before hello, by peer uid
	perJob     map[Job]int                // sessions after hello, by job
	lingering  map[*net.UnixConn]struct{} // refused, waiting briefly for the hello
	stats      ServerStats
	refusals   refusalLog

	wg        sync.WaitGroup // session goroutines
	closeOnce sync.Once
	done      chan struct{} // closed when Close has finished
	closeErr  error
}

// ServerStats is a snapshot of what the server holds (clients and the
// regions it maps), and of the connections it refused or dropped, by
// reason.
type ServerStats struct {
	Clients         int
	Regions         int
	RegisteredBytes uint64

	RefusedPermission uint64 // uid and gid not allowed
	RefusedFull       uint64 // MaxClients connected
	RefusedPerUID     uint64 // MaxClientsPerUID of the peer's uid connected, none of them past hello
	RefusedPerJob     uint64 // hellos refused: MaxClientsPerJob of the job connected
	// RefusedNotOwner counts the requests refused because they named what
	// belongs to another client or job, or is not the caller's at all
	// (no_such_flow, no_such_region, no_such_step, flow_exists,
	// flow_reserved): a client probing or taking what is not its own.
	RefusedNotOwner uint64
	RefusedNoCred   uint64 // no peer credentials
	HelloTimeouts   uint64 // disconnected without a hello within HelloTimeout
	IdleTimeouts    uint64 // disconnected after IdleTimeout idle, nothing outstanding
}

// Listen creates the socket at path (mode, owner and group from cfg; by
// default 0660 and the daemon's) and returns a server ready
// to Serve. A socket file left by a crashed daemon is removed; a live
// daemon on the path is an error (ErrDaemonRunning), and so is a path that
// is not a socket (ErrNotSocket). log may be nil.
func Listen(path string, cfg ServerConfig, backend Backend, log *slog.Logger) (*Server, error) {
	if backend == nil {
		return nil, errors.New("hostapi: Listen: nil backend")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := removeStale(path); err != nil {
		return nil, err
	}
	ln, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: path, Net: "unixpacket"})
	if err != nil {
		return nil, fmt.Errorf("hostapi: listen on %s: %w", path, err)
	}
	ln.SetUnlinkOnClose(false) // Close removes the file only if it is still ours
	cfg = cfg.withDefaults()
	err = os.Chmod(path, cfg.SocketMode)
	if err == nil && (cfg.SocketUID != nil || cfg.SocketGID != nil) {
		uid, gid := -1, -1
		if cfg.SocketUID != nil {
			uid = int(*cfg.SocketUID)
		}
		if cfg.SocketGID != nil {
			gid = int(*cfg.SocketGID)
		}
		err = os.Chown(path, uid, gid)
	}
	var sock os.FileInfo
	if err == nil {
		sock, err = os.Stat(path)
	}
	if err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("hostapi: socket file %s: %w", path, err)
	}
	return &Server{
		cfg:       cfg,
		backend:   backend,
		log:       log.With(slog.String("socket", path)),
		ln:        ln,
		path:      path,
		sock:      sock,
		selfUID:   uint32(os.Getuid()),
		started:   time.Now(),
		sessions:  map[ClientID]*session{},
		perUID:    map[uint32]int{},
		perJob:    map[Job]int{},
		lingering: map[*net.UnixConn]struct{}{},
		done:      make(chan struct{}),
	}, nil
}

// removeStale clears a socket file nobody answers on. Connecting is the
// only reliable liveness test: a daemon that crashed left the file but
// nothing listens, so the kernel refuses the connection.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("hostapi: %s: %w", path, err)
	}
	if fi.Mode().Type() != fs.ModeSocket {
		return fmt.Errorf("%w: %s (%v)", ErrNotSocket, path, fi.Mode().Type())
	}
	conn, err := net.DialTimeout("unixpacket", path, time.Second)
	switch {
	case err == nil:
		_ = conn.Close()
		return fmt.Errorf("%w: %s", ErrDaemonRunning, path)
	case errors.Is(err, unix.ECONNREFUSED):
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("hostapi: remove stale socket %s: %w", path, err)
		}
		return nil
	default:
		return fmt.Errorf("hostapi: %s exists and connecting to it failed (%v); remove it if no process uses it", path, err)
	}
}

// Path returns the socket path.
func (srv *Server) Path() string { return srv.path }

// Serve accepts clients until ctx is done or Close is called, then shuts
// down (as Close does) and returns nil. It is called once.
func (srv *Server) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { _ = srv.Close() })
	defer stop()
	var backoff time.Duration
	for {
		conn, err := srv.ln.AcceptUnix()
		if err != nil {
			if srv.isClosed() {
				<-srv.done
				return nil
			}
			// Out of descriptors or memory: wait for some to be freed
			// rather than spin or give up, as net/http does.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			srv.log.Warn("accept failed; retrying", slog.Any("error", err), slog.Duration("backoff", backoff))
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
			}
			continue
		}
		backoff = 0
		srv.admit(conn)
	}
}

// closeDrain bounds how long Close waits for clients to receive the
// completions already queued for them.
const closeDrain = time.Second

// Close stops accepting, lets every client receive the completions already
// queued for it (up to closeDrain), disconnects every client (each one's backend
// state released through ClientGone and its regions unmapped), waits for
// that, and removes the socket file. It is safe to call more than once.
func (srv *Server) Close() error {
	srv.closeOnce.Do(func() {
		srv.mu.Lock()
		srv.closed = true
		sessions := make([]*session, 0, len(srv.sessions))
		for _, s := range srv.sessions {
			sessions = append(sessions, s)
		}
		for conn := range srv.lingering {
			_ = conn.Close() // its goroutine's read fails at once
		}
		srv.mu.Unlock()

		srv.closeErr = srv.ln.Close()
		deadline := time.Now().Add(closeDrain)
		for _, s := range sessions {
			s.drain(deadline)
			s.kill("daemon shutting down")
		}
		srv.wg.Wait()
		if fi, err := os.Stat(srv.path); err == nil && os.SameFile(fi, srv.sock) {
			if err := os.Remove(srv.path); err != nil && srv.closeErr == nil {
				srv.closeErr = err
			}
		}
		close(srv.done)
	})
	<-srv.done
	return srv.closeErr
}

func (srv *Server) isClosed() bool {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	return srv.closed
}

// Stats returns a snapshot of the clients and the regions mapped.
func (srv *Server) Stats() ServerStats {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	st := srv.stats
	st.Clients = len(srv.sessions)
	return st
}

// Complete pushes a completion to client c. It never blocks: the
// completion joins the client's bounded queue, and a client whose queue is
// full (it stopped reading) is disconnected and ErrQueueFull returned.
// ErrUnknownClient means c is not connected (any more); ErrBadCompletion
// means comp cannot be sent (no kind or status), and nothing was queued.
func (srv *Server) Complete(c ClientID, comp Completion) error {
	if err := comp.check(); err != nil {
		return err
	}
	srv.mu.Lock()
	s := srv.sessions[c]
	srv.mu.Unlock()
	if s == nil {
		return fmt.Errorf("%w: %d", ErrUnknownClient, c)
	}
	if !s.enqueue(comp) {
		s.kill(fmt.Sprintf("completion queue of %d is full: the client stopped reading", srv.cfg.Limits.CompletionQueue))
		return fmt.Errorf("%w: client %d disconnected", ErrQueueFull, c)
	}
	return nil
}

// Disconnect closes client c's connection; its state is released as for
// any disconnect. It reports whether c was connected.
func (srv *Server) Disconnect(c ClientID, reason string) bool {
	srv.mu.Lock()
	s := srv.sessions[c]
	srv.mu.Unlock()
	if s != nil {
		s.kill(reason)
	}
	return s != nil
}

// admit checks a new connection's credentials and limits and starts its
// session; a connection it refuses is told why and closed at once.
func (srv *Server) admit(conn *net.UnixConn) {
	cred, err := peerCred(conn)
	if err != nil {
		srv.refuse(conn, &srv.stats.RefusedNoCred, "no peer credentials", nil,
			errorf(CodeInternal, "peer credentials unavailable: %v", err))
		return
	}
	log := srv.log.With(slog.Int("pid", int(cred.Pid)), slog.Uint64("uid", uint64(cred.Uid)), slog.Uint64("gid", uint64(cred.Gid)))
	if !srv.allowed(cred) {
		srv.refuse(conn, &srv.stats.RefusedPermission, "uid and gid not allowed", cred,
			errorf(CodePermissionDenied, "uid %d gid %d may not use this daemon", cred.Uid, cred.Gid))
		return
	}
	srv.mu.Lock()
	switch {
	case srv.closed:
		srv.mu.Unlock()
		_ = conn.Close()
		return
	case len(srv.sessions) >= srv.cfg.MaxClients:
		srv.mu.Unlock()
		srv.refuse(conn, &srv.stats.RefusedFull, "daemon full", cred,
			errorf(CodeLimitExceeded, "daemon serves at most %d clients", srv.cfg.MaxClients))
		return
	case srv.perUID[cred.Uid] >= srv.cfg.MaxClientsPerUID:
		srv.mu.Unlock()
		srv.refuse(conn, &srv.stats.RefusedPerUID, "too many clients of this uid", cred,
			errorf(CodeLimitExceeded, "uid %d has %d clients connected that have not said hello, the most one uid may", cred.Uid, srv.cfg.MaxClientsPerUID))
		return
	}
	srv.nextClient++
	s := newSession(srv, srv.nextClient, conn, log)
	s.uid = cred.Uid
	srv.sessions[s.id] = s
	srv.perUID[cred.Uid]++
	srv.wg.Add(2)
	srv.mu.Unlock()

	log.Info("client connected", slog.Uint64("client", uint64(s.id)))
	go s.readLoop()
	go s.writeLoop()
}

// refuseRead bounds the requests a refused connection may already have
// queued that refuse reads (a header each, the rest of the frame is
// discarded) before answering.
const refuseRead = 4

// A few refused connections wait up to refuseLinger for their hello, so
// that the reply reaches the client (closing on an unread hello makes it
// read ECONNRESET instead); beyond maxLingering, as in a flood, refusal is
// at once.
const (
	refuseLinger = 200 * time.Millisecond
	maxLingering = 8
)

// refuse counts a refused connection under its reason and tells it why.
// Up to maxLingering refused connections at a time wait up to
// refuseLinger for their hello (a header-sized buffer each) so the reply
// reaches the client; any more, as in a flood, are refused at once: no
// goroutine, no frame buffer, no wait. A hello already queued is then
// answered as its reply, otherwise the reason goes as a push (id 0),
// which the client reads when its hello finds the socket closed; a hello
// that arrives between that read and the close loses the reason, not the
// refusal. The log says what was refused at most once a second.
func (srv *Server) refuse(conn *net.UnixConn, counter *uint64, reason string, cred *unix.Ucred, e *Error) {
	srv.mu.Lock()
	*counter++
	linger := !srv.closed && len(srv.lingering) < maxLingering
	if linger {
		srv.lingering[conn] = struct{}{}
		srv.wg.Add(1)
	}
	srv.mu.Unlock()
	srv.refusals.note(srv.log, reason, cred)
	if linger {
		go srv.lingerRefuse(conn, e)
		return
	}
	op, id := OpHello, uint64(0)
	if raw, err := conn.SyscallConn(); err == nil {
		var hdr [HeaderLen]byte
		_ = raw.Read(func(fd uintptr) bool {
			for range refuseRead {
				n, _, err := unix.Recvfrom(int(fd), hdr[:], unix.MSG_DONTWAIT)
				if err != nil || n == 0 {
					break
				}
				if h, _, err := parseFrame(hdr[:n]); err == nil && id == 0 {
					op, id = h.op, h.id
				}
			}
			return true // never wait
		})
	}
	var scratch []byte
	body, _ := encodeBody(e)
	_ = conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_ = writeMessage(conn, &scratch, op, FlagReply|FlagError, id, body)
	_ = conn.Close()
}

// lingerRefuse answers a refused connection's hello, waiting for it up to
// refuseLinger with a header-sized buffer, and closes the connection.
func (srv *Server) lingerRefuse(conn *net.UnixConn, e *Error) {
	defer srv.wg.Done()
	op, id := OpHello, uint64(0)
	var hdr [HeaderLen]byte
	if conn.SetReadDeadline(time.Now().Add(refuseLinger)) == nil {
		if n, err := conn.Read(hdr[:]); err == nil {
			if h, _, err := parseFrame(hdr[:n]); err == nil {
				op, id = h.op, h.id
			}
		}
	}
	var scratch []byte
	body, _ := encodeBody(e)
	_ = conn.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
	_ = writeMessage(conn, &scratch, op, FlagReply|FlagError, id, body)
	srv.mu.Lock()
	delete(srv.lingering, conn)
	srv.mu.Unlock()
	_ = conn.Close()
}

// refusalLog rate-limits the log lines of refused connections: a flood of
// connections must not become a flood of lines.
type refusalLog struct {
	mu         sync.Mutex
	last       time.Time
	suppressed int
}

func (r *refusalLog) note(log *slog.Logger, reason string, cred *unix.Ucred) {
	r.mu.Lock()
	now := time.Now()
	if now.Sub(r.last) < time.Second {
		r.suppressed++
		r.mu.Unlock()
		return
	}
	r.last = now
	suppressed := r.suppressed
	r.suppressed = 0
	r.mu.Unlock()
	fields := []any{slog.String("reason", reason), slog.Int("refused_since_last_line", suppressed)}
	if cred != nil {
		fields = append(fields, slog.Int("pid", int(cred.Pid)), slog.Uint64("uid", uint64(cred.Uid)), slog.Uint64("gid", uint64(cred.Gid)))
	}
	log.Warn("refused client", fields...)
}

func (srv *Server) allowed(cred *unix.Ucred) bool {
	if cred.Uid == 0 || cred.Uid == srv.selfUID {
		return true
	}
	return slices.Contains(srv.cfg.AllowedUIDs, cred.Uid) || slices.Contains(srv.cfg.AllowedGIDs, cred.Gid)
}

func peerCred(conn *net.UnixConn) (*unix.Ucred, error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return nil, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return nil, err
	}
	return cred, credErr
}

// addMapped records regions mapped (n > 0) or unmapped (n < 0).
func (srv *Server) addMapped(n int, bytes uint64) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.stats.Regions += n
	if n > 0 {
		srv.stats.RegisteredBytes += bytes
	} else {
		srv.stats.RegisteredBytes -= bytes
	}
}

func (srv *Server) removeSession(c ClientID) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if s := srv.sessions[c]; s != nil {
		if s.helloDone {
			if srv.perJob[s.job]--; srv.perJob[s.job] <= 0 {
				delete(srv.perJob, s.job)
			}
		} else if srv.perUID[s.uid]--; srv.perUID[s.uid] <= 0 {
			delete(srv.perUID, s.uid)
		}
	}
	delete(srv.sessions, c)
}

// joinJob moves a session that said hello from its uid's count to its
// job's; it refuses the hello when the job has MaxClientsPerJob clients.
func (srv *Server) joinJob(s *session, job Job) error {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.perJob[job] >= srv.cfg.MaxClientsPerJob {
		srv.stats.RefusedPerJob++
		return errorf(CodeLimitExceeded, "%v has %d clients connected, the most one job may", job, srv.cfg.MaxClientsPerJob)
	}
	srv.perJob[job]++
	if srv.perUID[s.uid]--; srv.perUID[s.uid] <= 0 {
		delete(srv.perUID, s.uid)
	}
	return nil
}

// leaveJob undoes joinJob for a hello the backend refused.
func (srv *Server) leaveJob(s *session, job Job) {
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.perJob[job]--; srv.perJob[job] <= 0 {
		delete(srv.perJob, job)
	}
	srv.perUID[s.uid]++
}

func (srv *Server) countNotOwner() {
	srv.mu.Lock()
	srv.stats.RefusedNotOwner++
	srv.mu.Unlock()
}

func (srv *Server) countHelloTimeout() {
	srv.mu.Lock()
	srv.stats.HelloTimeouts++
	srv.mu.Unlock()
}

func (srv *Server) countIdleTimeout() {
	srv.mu.Lock()
	srv.stats.IdleTimeouts++
	srv.mu.Unlock()
}
