package forgivedrv

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/hostapi/nicapi"
	"github.com/forgive-emu/forgive/internal/cli"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/tss"
	"github.com/forgive-emu/forgive/udpio"
	"github.com/forgive-emu/forgive/wire"
)

// ErrStopped is returned by requests that reach a daemon that is shutting
// down.
var ErrStopped = errors.New("forgivedrv: daemon stopped")

// idleWait bounds a sleep with nothing scheduled, so a stop request is
// noticed even if a wake-up were lost.
const idleWait = time.Second

// Daemon is one running forgived.
type Daemon struct {
	cfg *Config
	log *zap.Logger
	// sendLog is log sampled per second (cli.PerSecond), for a send the
	// kernel refuses: such a fault repeats on every batch.
	sendLog *zap.Logger
	eng     *nic.Engine
	conn    *udpio.Conn
	sw      netip.AddrPort
	srv     *hostapi.Server
	start   time.Time
	closed  chan struct{}
	// ready is true while the loop forwards: from after the sockets are
	// bound and the metrics served until shutdown begins (/ready).
	ready atomic.Bool
	// metricsAddr is the bound address of /metrics, once served.
	metricsAddr atomic.Pointer[string]

	mu      sync.Mutex
	inbox   []func(now time.Duration)
	written map[hostapi.ClientID]int // completions written to each client's socket, for the loop's Host
	stop    bool

	// Owned by the loop goroutine. h is the host API's semantics over
	// eng (the flow map, what each client holds, the checks), shared with
	// the simulator's placement.
	h     *nicapi.Host
	rx    []udpio.Msg
	tx    []udpio.Msg
	stats LoopStats

	// The security sublayer, when the config names a domain: the engine
	// transmits into tx's buffers tss.Headroom bytes in, where they are
	// sealed in place, and receives what is opened in place in rx's.
	sealer *tss.Sealer
	opener *tss.Opener
	epoch  uint64 // the sealer's start epoch (nextStart)

	// With engines > 1 (group.go): the group of loops this one belongs
	// to, and its place in it (0: the daemon itself); nil alone.
	grp *group
	idx int
}

// LoopStats counts the loop's own work.
type LoopStats struct {
	Wakeups      uint64
	Batches      uint64 // non-empty reads
	SendErrors   uint64
	Truncated    uint64
	Completions  uint64
	LostComplete uint64 // completions for a client that was gone
	// ForeignSource counts datagrams refused because they did not come
	// from the switch port the host is cabled to: a host has one
	// neighbour, so anything else is forged or misrouted.
	ForeignSource uint64

	// The security sublayer: packets sealed and opened (OpenedTrimmed of
	// them trimmed headers, authenticated by their header tag alone),
	// packets the engine produced that could not be sealed, and packets
	// refused, by reason (tss.Reason). A host without a key refuses every
	// sealed packet as RefusedUnknownDomain.
	Sealed               uint64
	Opened               uint64
	OpenedTrimmed        uint64
	SealErrors           uint64
	RefusedUnsealed      uint64
	RefusedUnknownDomain uint64
	RefusedWrongDomain   uint64
	RefusedHeaderTag     uint64
	RefusedPayloadTag    uint64
	RefusedMalformedSeal uint64
	// RefusedReplayed counts sealed packets refused as replays: a nonce
	// already opened, one too far behind its sender's newest, or one of an
	// earlier start of its sender (tss.ErrReplayed). SenderStarts counts
	// the sender starts first heard from: each peer's first, and one per
	// restart of a peer.
	RefusedReplayed uint64
	SenderStarts    uint64

	// SocketDrops are the datagrams the kernel dropped at the socket, its
	// receive buffer full (udpio.Conn.SocketDrops), read when the counters
	// are.
	SocketDrops uint64
}

// New binds the daemon's socket and host-API socket. Run starts it. It
// is Prepare then NewPrepared.
func New(cfg *Config, log *zap.Logger) (*Daemon, error) {
	p, err := Prepare(cfg)
	if err != nil {
		return nil, err
	}
	return NewPrepared(p, log)
}

// NewPrepared binds the sockets of a daemon on what Prepare checked and
// built; a Prepared starts one daemon only (it holds its engine).
func NewPrepared(p *Prepared, log *zap.Logger) (*Daemon, error) {
	if p.eng == nil {
		return nil, errors.New("forgivedrv: the prepared configuration was already started")
	}
	cfg, eng, ncfg := p.cfg, p.eng, p.ncfg
	p.eng = nil
	listen, sw, _ := cfg.Addresses()
	// The loop hands each batch to the engine, which keeps nothing of a
	// packet past Receive (the payload goes to registered memory), before
	// it reads the next: the datagrams can stay where the kernel put
	// them.
	opts := udpio.Options{Offload: true, ReceiveViews: true}
	var more []*udpio.Conn
	var conn *udpio.Conn
	var err error
	if len(p.more) > 0 {
		conns, err := listenGroup(listen, 1+len(p.more), opts)
		if err != nil {
			return nil, err
		}
		conn, more = conns[0], conns[1:]
	} else if conn, err = udpio.Listen(listen.String(), opts); err != nil {
		return nil, fmt.Errorf("forgivedrv: listen %v: %w", listen, err)
	}
	for _, c := range append([]*udpio.Conn{conn}, more...) {
		if err := c.SetSocketBuffers(p.sockBuf, p.sockBuf); err != nil {
			conn.Close()
			for _, m := range more {
				m.Close()
			}
			return nil, fmt.Errorf("forgivedrv: listen %v: %w", listen, err)
		}
	}
	d := &Daemon{cfg: cfg, log: log, sendLog: cli.PerSecond(log), eng: eng, conn: conn, sw: sw, start: time.Now(),
		closed: make(chan struct{})}
	bufSize := wire.DataLen + ncfg.MTU
	ring := p.ring
	closeMore := func() {
		for _, c := range more {
			c.Close()
		}
	}
	if ring != nil {
		// The epoch names this start of the host: a peer takes packets of
		// its newest start only, so it is later than the last start's
		// even if the wall clock stepped back (startfile.go).
		if d.epoch, err = nextStart(cfg.StartFile(), wallClock()); err != nil {
			conn.Close()
			closeMore()
			return nil, fmt.Errorf("%w: security.start_file: %w", ErrConfig, err)
		}
		if d.sealer, err = tss.NewSealer(ring, rand.Reader, d.epoch); err != nil {
			conn.Close()
			closeMore()
			return nil, fmt.Errorf("forgivedrv: %w", err)
		}
		d.opener = tss.NewOpener(ring)
	}
	d.buffers(bufSize)
	scfg := p.server
	var be hostapi.Backend = backend{d}
	if len(p.more) > 0 {
		d.startGroup(p.more, more, scfg.Limits, bufSize)
		be = groupBackend{d.grp}
	} else {
		d.h = nicapi.New(eng, scfg.Limits, d.complete)
	}
	res, _ := cfg.Reservations() // checked by Prepare
	if d.grp != nil {
		d.grp.host.Reserve(res)
	} else {
		d.h.Reserve(res)
	}
	srv, err := hostapi.Listen(cfg.Socket, scfg, be, slogger(log.Named("hostapi")))
	if err != nil {
		conn.Close()
		closeMore()
		return nil, err
	}
	d.srv = srv
	return d, nil
}

// buffers makes the loop's batches of datagrams.
func (d *Daemon) buffers(bufSize int) {
	d.rx = make([]udpio.Msg, d.conn.BatchSize())
	d.tx = make([]udpio.Msg, d.conn.BatchSize())
	for i := range d.rx {
		// Room for a sealed packet even without a key, so one is refused
		// as sealed (refused_unknown_domain), not as truncated; one spare
		// byte exposes an oversized datagram as truncated.
		d.rx[i].Buf = make([]byte, bufSize+wire.SealOverhead+1)
		d.tx[i].Buf = make([]byte, bufSize+wire.SealOverhead)
	}
}

// closeConns closes the sockets of every loop.
func (d *Daemon) closeConns() {
	if d.grp == nil {
		d.conn.Close()
		return
	}
	for _, s := range d.grp.shards {
		s.conn.Close()
	}
}

// PlainWarning is the warning a daemon without a security section logs at
// start, with what that leaves open.
const PlainWarning = "security off: the fabric's packets are neither sealed nor authenticated"

// SharedFlowIDsWarning is the warning a daemon that admits other users
// (allowed_uids, allowed_gids) without reserving flow ids for jobs logs at
// start.
const SharedFlowIDsWarning = "host API: admitted users share the flow ids, first come"

// Run serves until ctx is cancelled, then fails outstanding work with a
// clear status, closes the sockets and removes the socket file.
func (d *Daemon) Run(ctx context.Context) error {
	serveErr := make(chan error, 1)
	// The server outlives ctx: it closes only after the loop has failed the
	// outstanding work, so the clients receive those completions.
	go func() { serveErr <- d.srv.Serve(context.WithoutCancel(ctx)) }()
	stopWake := context.AfterFunc(ctx, d.stopLoop)
	defer stopWake()
	metricsCtx, stopMetrics := context.WithCancel(ctx)
	defer stopMetrics()
	fields := []zap.Field{zap.Uint16("host", d.cfg.Host), zap.Stringer("listen", d.conn.LocalAddr()),
		zap.Stringer("switch", d.sw), zap.String("socket", d.cfg.Socket)}
	if d.opener != nil {
		ids := make([]uint32, 0, len(d.cfg.Security.Domains))
		for _, dom := range d.cfg.Security.Domains {
			ids = append(ids, dom.ID)
		}
		fields = append(fields, zap.Uint32s("security_domains", ids), zap.Uint64("start_epoch", d.epoch))
	} else {
		d.log.Warn(PlainWarning, zap.String("open",
			"packets go unsealed: anyone on the fabric's path can read, forge, replay and rewrite them; "+
				"a forged source address is refused only by the switch-neighbour check, a flow only by its tags; "+
				"sealed packets from peers are refused as of an unknown domain"),
			zap.String("fix", "add a security section (docs/security.md)"))
	}
	if (len(d.cfg.AllowedUIDs) > 0 || len(d.cfg.AllowedGIDs) > 0) && len(d.cfg.Jobs) == 0 {
		d.log.Warn(SharedFlowIDsWarning, zap.String("open",
			"flow ids are the host's on the wire: the first admitted client to create one receives what its peer sends on it"),
			zap.String("fix", "reserve each job's flow ids (jobs:, docs/hostapi.md)"))
	}
	if d.cfg.Metrics != "" {
		addr, err := d.serveMetrics(metricsCtx, d.cfg.Metrics)
		if err != nil {
			d.stopLoop()
			d.srv.Close()
			<-serveErr
			d.closeConns()
			return err
		}
		d.metricsAddr.Store(&addr)
		fields = append(fields, zap.String("metrics", addr))
	}
	d.ready.Store(true)
	d.log.Info("ready", fields...)
	err := d.runLoops()
	close(d.closed)
	srvErr := d.srv.Close()
	<-serveErr
	d.closeConns()
	return errors.Join(err, srvErr)
}

// Ready reports whether the daemon forwards: its sockets bound, its loop
// running and not stopping. /ready answers 200 while it does.
func (d *Daemon) Ready() bool { return d.ready.Load() }

// MetricsAddr is the address /metrics, /healthz and /ready are served on
// (the config's metrics with port 0 resolved), empty before Run serves
// them or when the config names none.
func (d *Daemon) MetricsAddr() string {
	if a := d.metricsAddr.Load(); a != nil {
		return *a
	}
	return ""
}

// stopLoop asks the loop to stop at its next wake-up, and wakes it.
func (d *Daemon) stopLoop() {
	d.mu.Lock()
	d.stop = true
	d.mu.Unlock()
	d.conn.Wake()
}

// now returns the engine time: nanoseconds since the daemon started, on
// the monotonic clock.
func (d *Daemon) now() time.Duration { return time.Since(d.start) }

func (d *Daemon) loop() error {
	for {
		deadline := time.Now().Add(idleWait)
		if at, ok := d.eng.NextDeadline(); ok {
			deadline = d.start.Add(at)
		}
		// The engine's deadlines (pacing, DCQCN timers, delayed ACKs,
		// retransmissions) are often a few hundred microseconds away:
		// ReadBatchUntil meets them within tens of microseconds, not on
		// the runtime timers' millisecond grid.
		n, err := d.conn.ReadBatchUntil(d.rx, deadline)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("forgivedrv: read: %w", err)
		}
		now := d.now()
		d.stats.Wakeups++
		if n > 0 {
			d.stats.Batches++
		}
		d.ingest(now, d.rx[:n])
		if d.runInbox(now) {
			return nil
		}
		d.eng.Advance(now)
		d.transmit(now)
		d.deliverCompletions()
	}
}

// ingest hands a batch of received datagrams to the engine, counting
// those refused before it: the loop's per-packet receive path, without the
// socket.
func (d *Daemon) ingest(now time.Duration, msgs []udpio.Msg) {
	for i := range msgs {
		m := &msgs[i]
		if m.Truncated {
			d.stats.Truncated++
			continue
		}
		if m.Addr != d.sw {
			d.stats.ForeignSource++
			continue
		}
		pkt := m.Payload()
		var ord nic.Order
		if d.opener != nil || wire.Sealed(pkt) {
			var ok bool
			if pkt, ord, ok = d.open(pkt); !ok {
				continue
			}
		}
		if d.grp != nil && wire.Header(pkt).Type() == wire.TypePause {
			d.broadcastPause(pkt)
		}
		// A sealed packet's order binds flows to the sender's latest
		// incarnation (nic.Engine.ReceiveOrdered); a plain one has none.
		d.eng.ReceiveOrdered(now, pkt, m.TOS, ord)
	}
}

// open authenticates and decrypts a received packet for the engine, or
// counts why it is refused. PAUSE stays plain: the switch generates it for
// its link only, and the neighbour check above is its defence. A datagram
// that is not even a FORGIVE header goes to the engine, which counts it
// malformed.
func (d *Daemon) open(pkt []byte) ([]byte, nic.Order, bool) {
	t, err := wire.Peek(pkt)
	if err != nil || (t == wire.TypePause && !wire.Sealed(pkt)) {
		return pkt, nic.Order{}, true
	}
	if d.opener == nil {
		d.stats.RefusedUnknownDomain++ // sealed, and this host has no key
		return nil, nic.Order{}, false
	}
	out, info, err := d.opener.OpenInPlace(pkt)
	if err != nil {
		switch tss.Reason(err) {
		case "unsealed":
			d.stats.RefusedUnsealed++
		case "unknown_domain":
			d.stats.RefusedUnknownDomain++
		case "wrong_domain":
			d.stats.RefusedWrongDomain++
		case "header_tag":
			d.stats.RefusedHeaderTag++
		case "payload_tag":
			d.stats.RefusedPayloadTag++
		case "replayed":
			d.stats.RefusedReplayed++
		default:
			d.stats.RefusedMalformedSeal++
		}
		return nil, nic.Order{}, false
	}
	d.stats.Opened++
	if info.Trimmed {
		d.stats.OpenedTrimmed++
	}
	if info.NewStart {
		d.stats.SenderStarts++
	}
	return out, nic.Order{Start: info.Start, Counter: info.Counter}, true
}

// runInbox runs the queued host-API requests; it reports a stop request.
func (d *Daemon) runInbox(now time.Duration) bool {
	d.mu.Lock()
	work, stop := d.inbox, d.stop
	d.inbox = nil
	for c, n := range d.written {
		d.h.Written(c, n)
	}
	clear(d.written)
	d.mu.Unlock()
	for _, fn := range work {
		fn(now)
	}
	return stop
}

// wrote notes that n completions were written to client c's socket; the
// loop tells its Host (nicapi.Host.Written) when it next runs its inbox,
// and the writer does not wait for it.
func (d *Daemon) wrote(c hostapi.ClientID, n int) {
	d.mu.Lock()
	if d.stop {
		d.mu.Unlock()
		return
	}
	if d.written == nil {
		d.written = map[hostapi.ClientID]int{}
	}
	first := len(d.written) == 0 && len(d.inbox) == 0
	d.written[c] += n
	d.mu.Unlock()
	if first {
		d.conn.Wake()
	}
}

// transmit sends everything the engine may send now, in batches.
func (d *Daemon) transmit(now time.Duration) {
	for {
		n := d.fill(now)
		if n == 0 {
			return
		}
		if sent, err := d.conn.WriteBatch(d.tx[:n]); err != nil {
			d.stats.SendErrors += uint64(n - sent)
			if errors.Is(err, net.ErrClosed) {
				return
			}
			d.sendLog.Warn("send failed", zap.Stringer("switch", d.sw), zap.Int("refused", n-sent),
				zap.Uint64("send_errors", d.stats.SendErrors), zap.Error(err))
		}
		if n < len(d.tx) {
			return
		}
	}
}

// fill writes into d.tx what the engine may send now, sealed when this
// host seals, up to a batch, and returns how many: the loop's per-packet
// transmit path, without the socket. A data packet's payload is not
// copied: the engine returns it as a view of the registered memory
// (nic.Engine.TransmitGather), which plain leaves as the Msg's Tail (the
// kernel gathers header and payload into one datagram) and sealed is
// encrypted from where it lies into the buffer behind the header
// (tss.Sealer.SealGather). Both are sent before the loop next runs a
// host-API request, which is what keeps the memory mapped.
func (d *Daemon) fill(now time.Duration) int {
	n := 0
	for n < len(d.tx) {
		m := &d.tx[n]
		full := m.Buf[:cap(m.Buf)]
		buf := full
		if d.sealer != nil {
			buf = full[tss.Headroom:]
		}
		pkt, payload, tos, ok := d.eng.TransmitGather(now, buf)
		if !ok {
			break
		}
		m.Tail = nil
		switch {
		case d.sealer != nil && wire.Header(pkt).Type() == wire.TypePause:
			// Link-local, plain by design (docs/security.md).
			pkt = append(full[:0], pkt...)
		case d.sealer != nil:
			if len(pkt) > 0 && &pkt[0] != &buf[0] { // the engine wrote elsewhere
				pkt = append(buf[:0], pkt...)
			}
			sealed, err := d.sealer.SealGather(full[:tss.Headroom+len(pkt)], len(pkt), payload)
			if err != nil {
				d.stats.SealErrors++
				d.log.Debug("packet not sealed", zap.Error(err))
				continue
			}
			d.stats.Sealed++
			pkt = sealed
		default:
			m.Tail = payload
		}
		m.N, m.TOS, m.Addr = len(pkt), tos, d.sw
		n++
	}
	return n
}

func (d *Daemon) deliverCompletions() {
	if d.grp != nil {
		d.grp.push(d.eng.Completions())
		return
	}
	d.h.Deliver()
}

// complete is the Host's sink: a completion of a client's flow goes to
// the server's queue for that client.
func (d *Daemon) complete(client hostapi.ClientID, comp hostapi.Completion) {
	d.stats.Completions++
	if err := d.srv.Complete(client, comp); err != nil {
		d.stats.LostComplete++
		d.log.Debug("completion not delivered", zap.Uint64("client", uint64(client)), zap.Error(err))
	}
}

// loopStats are the loop's counters, with the completions of flows no
// client held among the lost ones.
func (d *Daemon) loopStats() LoopStats {
	s := d.stats
	s.LostComplete += d.h.Unrouted()
	if drops, err := d.conn.SocketDrops(); err == nil {
		s.SocketDrops = drops
	}
	return s
}

// shutdown fails every flow's outstanding work ("SIGTERM finishes or
// fails outstanding work with a clear status") and hands the completions
// to clients that are still connected.
func (d *Daemon) shutdown() {
	for _, key := range d.eng.Flows() {
		_ = d.eng.DestroyFlow(key)
	}
	d.deliverCompletions()
	d.failInbox()
}

// failInbox runs the requests that raced with the stop: they get
// ErrStopped, or the engine's refusal.
func (d *Daemon) failInbox() {
	d.mu.Lock()
	work := d.inbox
	d.inbox = nil
	d.mu.Unlock()
	for _, fn := range work {
		fn(d.now())
	}
}

// do runs fn on the loop goroutine and returns its error.
func (d *Daemon) do(fn func(now time.Duration) error) error {
	done := make(chan error, 1)
	d.mu.Lock()
	if d.stop {
		d.mu.Unlock()
		return ErrStopped
	}
	d.inbox = append(d.inbox, func(now time.Duration) { done <- fn(now) })
	d.mu.Unlock()
	d.conn.Wake()
	select {
	case err := <-done:
		return err
	case <-d.closed:
		select {
		case err := <-done:
			return err
		default:
			return ErrStopped
		}
	}
}

// Engine runs fn with the engine on the loop goroutine, for metrics and
// status readers.
//
// With engines > 1 it is engine 0, with every loop's counters.
func (d *Daemon) Engine(fn func(e *nic.Engine, s LoopStats)) error {
	if g := d.grp; g != nil {
		return groupBackend{g}.with(func() error {
			l := g.loopStats()
			return d.do(func(time.Duration) error { fn(d.eng, l); return nil })
		})
	}
	return d.do(func(time.Duration) error { fn(d.eng, d.loopStats()); return nil })
}
