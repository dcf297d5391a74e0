package hostd

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/tss"
	"github.com/forgive-emu/forgive/udpio"
	"github.com/forgive-emu/forgive/wire"
)

// ErrStopped is returned by requests that reach a daemon that is shutting
// down.
var ErrStopped = errors.New("hostd: daemon stopped")

// idleWait bounds a sleep with nothing scheduled, so a stop request is
// noticed even if a wake-up were lost.
const idleWait = time.Second

// Daemon is one running forgived.
type Daemon struct {
	cfg    *Config
	log    *zap.Logger
	eng    *nic.Engine
	conn   *udpio.Conn
	sw     netip.AddrPort
	srv    *hostapi.Server
	start  time.Time
	closed chan struct{}

	mu    sync.Mutex
	inbox []func(now time.Duration)
	stop  bool

	// Owned by the loop goroutine. flows maps the host API's flow ids
	// (unique on the host) to the engine's keys; which client owns a flow
	// or a region is the host-API server's to know, not the daemon's.
	flows map[hostapi.FlowID]nic.FlowKey
	rx    []udpio.Msg
	tx    []udpio.Msg
	stats LoopStats

	// The security sublayer, when the config names a domain: the engine
	// transmits into plain and receives from opened, the sealed packets
	// are in tx and rx.
	sealer *tss.Sealer
	opener *tss.Opener
	plain  []byte
	opened []byte
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
}

// New binds the daemon's socket and host-API socket. Run starts it.
func New(cfg *Config, log *zap.Logger) (*Daemon, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ncfg, err := cfg.NIC()
	if err != nil {
		return nil, err
	}
	listen, sw, _ := cfg.Addresses()
	// Flow tags, and so initial PSNs, from the kernel's CSPRNG: an
	// off-path sender must not be able to guess them (the simulator keeps
	// them derived from its seed).
	if _, err := rand.Read(ncfg.TagSeed[:]); err != nil {
		return nil, fmt.Errorf("hostd: flow tag seed: %w", err)
	}
	eng, err := nic.New(ncfg)
	if err != nil {
		return nil, err
	}
	conn, err := udpio.Listen(listen.String(), udpio.Options{})
	if err != nil {
		return nil, fmt.Errorf("hostd: listen %v: %w", listen, err)
	}
	d := &Daemon{cfg: cfg, log: log, eng: eng, conn: conn, sw: sw, start: time.Now(),
		closed: make(chan struct{}), flows: map[hostapi.FlowID]nic.FlowKey{}}
	bufSize := wire.DataLen + ncfg.MTU
	ring, err := cfg.Keyring()
	if err != nil {
		conn.Close()
		return nil, err
	}
	if ring != nil {
		if d.sealer, err = tss.NewSealer(ring, rand.Reader); err != nil {
			conn.Close()
			return nil, fmt.Errorf("hostd: %w", err)
		}
		d.opener = tss.NewOpener(ring)
		d.plain, d.opened = make([]byte, bufSize), make([]byte, 0, bufSize)
	}
	d.rx = make([]udpio.Msg, conn.BatchSize())
	d.tx = make([]udpio.Msg, conn.BatchSize())
	for i := range d.rx {
		// Room for a sealed packet even without a key, so one is refused
		// as sealed (refused_unknown_domain), not as truncated; one spare
		// byte exposes an oversized datagram as truncated.
		d.rx[i].Buf = make([]byte, bufSize+wire.SealOverhead+1)
		d.tx[i].Buf = make([]byte, bufSize+wire.SealOverhead)
	}
	scfg, _ := cfg.ServerConfig() // checked by Validate
	srv, err := hostapi.Listen(cfg.Socket, scfg, backend{d}, log.Named("hostapi"))
	if err != nil {
		conn.Close()
		return nil, err
	}
	d.srv = srv
	return d, nil
}

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
		fields = append(fields, zap.Uint32s("security_domains", ids))
	}
	if d.cfg.Metrics != "" {
		addr, err := d.serveMetrics(metricsCtx, d.cfg.Metrics)
		if err != nil {
			d.stopLoop()
			d.srv.Close()
			<-serveErr
			d.conn.Close()
			return err
		}
		fields = append(fields, zap.String("metrics", addr))
	}
	d.log.Info("ready", fields...)
	err := d.loop()
	d.shutdown()
	close(d.closed)
	srvErr := d.srv.Close()
	<-serveErr
	d.conn.Close()
	return errors.Join(err, srvErr)
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
			return fmt.Errorf("hostd: read: %w", err)
		}
		now := d.now()
		d.stats.Wakeups++
		if n > 0 {
			d.stats.Batches++
		}
		for i := range d.rx[:n] {
			m := &d.rx[i]
			if m.Truncated {
				d.stats.Truncated++
				continue
			}
			if m.Addr != d.sw {
				d.stats.ForeignSource++
				continue
			}
			pkt := m.Payload()
			if d.opener != nil || wire.Sealed(pkt) {
				var ok bool
				if pkt, ok = d.open(pkt); !ok {
					continue
				}
			}
			d.eng.Receive(now, pkt, m.TOS)
		}
		if d.runInbox(now) {
			return nil
		}
		d.eng.Advance(now)
		d.transmit(now)
		d.deliverCompletions()
	}
}

// open authenticates and decrypts a received packet for the engine, or
// counts why it is refused. PAUSE stays plain: the switch generates it for
// its link only, and the neighbour check above is its defence. A datagram
// that is not even a FORGIVE header goes to the engine, which counts it
// malformed.
func (d *Daemon) open(pkt []byte) ([]byte, bool) {
	t, err := wire.Peek(pkt)
	if err != nil || (t == wire.TypePause && !wire.Sealed(pkt)) {
		return pkt, true
	}
	if d.opener == nil {
		d.stats.RefusedUnknownDomain++ // sealed, and this host has no key
		return nil, false
	}
	out, info, err := d.opener.Open(d.opened[:0], pkt)
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
		default:
			d.stats.RefusedMalformedSeal++
		}
		return nil, false
	}
	d.stats.Opened++
	if info.Trimmed {
		d.stats.OpenedTrimmed++
	}
	return out, true
}

// runInbox runs the queued host-API requests; it reports a stop request.
func (d *Daemon) runInbox(now time.Duration) bool {
	d.mu.Lock()
	work, stop := d.inbox, d.stop
	d.inbox = nil
	d.mu.Unlock()
	for _, fn := range work {
		fn(now)
	}
	return stop
}

// transmit sends everything the engine may send now, in batches.
func (d *Daemon) transmit(now time.Duration) {
	for {
		n := 0
		for n < len(d.tx) {
			buf := d.tx[n].Buf[:cap(d.tx[n].Buf)]
			if d.sealer != nil {
				buf = d.plain
			}
			pkt, tos, ok := d.eng.Transmit(now, buf)
			if !ok {
				break
			}
			switch {
			case d.sealer != nil && wire.Header(pkt).Type() == wire.TypePause:
				// Link-local, plain by design (docs/security.md).
				pkt = append(d.tx[n].Buf[:0], pkt...)
			case d.sealer != nil:
				sealed, err := d.sealer.Seal(d.tx[n].Buf[:0], pkt)
				if err != nil {
					d.stats.SealErrors++
					d.log.Debug("packet not sealed", zap.Error(err))
					continue
				}
				d.stats.Sealed++
				pkt = sealed
			}
			d.tx[n].N, d.tx[n].TOS, d.tx[n].Addr = len(pkt), tos, d.sw
			n++
		}
		if n == 0 {
			return
		}
		if sent, err := d.conn.WriteBatch(d.tx[:n]); err != nil {
			d.stats.SendErrors += uint64(n - sent)
			if errors.Is(err, net.ErrClosed) {
				return
			}
		}
		if n < len(d.tx) {
			return
		}
	}
}

func (d *Daemon) deliverCompletions() {
	for _, c := range d.eng.Completions() {
		client, ok := d.srv.FlowOwner(hostapi.FlowID(c.Flow.ID))
		if !ok {
			d.stats.LostComplete++
			continue
		}
		d.stats.Completions++
		if err := d.srv.Complete(client, CompletionToAPI(c)); err != nil {
			d.stats.LostComplete++
			d.log.Debug("completion not delivered", zap.Uint64("client", uint64(client)), zap.Error(err))
		}
	}
}

// shutdown fails every flow's outstanding work ("SIGTERM finishes or
// fails outstanding work with a clear status") and hands the completions
// to clients that are still connected.
func (d *Daemon) shutdown() {
	for _, key := range d.eng.Flows() {
		_ = d.eng.DestroyFlow(key)
	}
	d.deliverCompletions()
	// Requests that raced with the stop get ErrStopped.
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
func (d *Daemon) Engine(fn func(e *nic.Engine, s LoopStats)) error {
	return d.do(func(time.Duration) error { fn(d.eng, d.stats); return nil })
}
