package trimswitchdrv

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/forgive-emu/forgive/internal/cli"
	"github.com/forgive-emu/forgive/switchcore"
	"github.com/forgive-emu/forgive/udpio"
)

// Driver runs one switch: the engine, a socket per port, the metrics
// server and the capture. Open binds everything, Run forwards until its
// context ends and then releases everything.
type Driver struct {
	cfg *Config
	log *zap.Logger
	// sendLog is log sampled per second (cli.PerSecond), for a send the
	// kernel refuses: such a fault repeats on every batch.
	sendLog *zap.Logger
	start   time.Time // the engine's epoch: now = time.Since(start)

	mu    sync.Mutex // guards sw and armed
	sw    *switchcore.Switch
	armed time.Duration // the deadline the timer sleeps toward; forever: none
	spare [][]byte      // scratch for Reclaim, under mu

	txMu sync.Mutex // held while writing, taken before mu is released
	// dirty lists the ports with messages in their tx batch, under txMu.
	dirty []*port

	ports   []*port
	pool    *pool
	waiter  *udpio.Waiter // the timer goroutine's sleep
	capture *capture      // nil: no capture
	metrics *metricsServer

	ready    atomic.Bool
	stopping atomic.Bool
	closed   sync.Once
}

// port is one switch port's socket and counters.
type port struct {
	id       switchcore.PortID
	name     string
	conn     *udpio.Conn
	local    netip.AddrPort // as bound (the configured port may be 0)
	neighbor netip.AddrPort
	captured bool

	invalid    [NumInvalidReasons]atomic.Uint64
	sendErrors atomic.Uint64

	tx []udpio.Msg // outputs of the current transmit, under txMu
}

// Open validates cfg, builds the engine and binds every socket: the ports,
// the metrics server (which answers /ready with 503 until Run starts) and
// the capture file. log may be nil.
func Open(cfg *Config, log *zap.Logger) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if log == nil {
		log = zap.NewNop()
	}
	d := &Driver{cfg: cfg, log: log, sendLog: cli.PerSecond(log), armed: forever, pool: newPool(cfg.MaxDatagramBytes())}
	fc := cfg.Core()
	fc.NewBuffer = d.pool.newBuffer
	sw, err := switchcore.New(fc)
	if err != nil {
		return nil, &ConfigError{Problems: []error{err}}
	}
	d.sw = sw
	if err := d.open(); err != nil {
		d.release()
		return nil, err
	}
	d.start = time.Now()
	return d, nil
}

func (d *Driver) open() error {
	var err error
	if d.waiter, err = udpio.NewWaiter(); err != nil {
		return fmt.Errorf("trimswitchdrv: timer: %w", err)
	}
	opts := udpio.Options{
		BatchSize:  d.cfg.Batch,
		RecvBuffer: int(d.cfg.SocketBuffer),
		SendBuffer: int(d.cfg.SocketBuffer),
		Offload:    true,
	}
	for i := range d.cfg.Ports {
		pc := &d.cfg.Ports[i]
		conn, err := udpio.Listen(pc.Local, opts)
		if err != nil {
			return fmt.Errorf("trimswitchdrv: port %s: %w", pc.Name, err)
		}
		d.ports = append(d.ports, &port{
			id:       switchcore.PortID(i),
			name:     pc.Name,
			conn:     conn,
			local:    conn.LocalAddr(),
			neighbor: netip.MustParseAddrPort(pc.Neighbor),
		})
	}
	if d.cfg.Capture.File != "" {
		if d.capture, err = openCapture(d.cfg.Capture.File); err != nil {
			return err
		}
		for _, p := range d.ports {
			p.captured = len(d.cfg.Capture.Ports) == 0 || contains(d.cfg.Capture.Ports, p.name)
		}
	}
	if d.cfg.Metrics != "" {
		if d.metrics, err = serveMetrics(d.cfg.Metrics, d); err != nil {
			return err
		}
	}
	return nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// now is the engine's clock: monotonic time since Open.
func (d *Driver) now() time.Duration { return time.Since(d.start) }

// LocalAddr returns the bound address of port i.
func (d *Driver) LocalAddr(i int) netip.AddrPort { return d.ports[i].local }

// MetricsAddr returns the bound address of the metrics server, or "".
func (d *Driver) MetricsAddr() string {
	if d.metrics == nil {
		return ""
	}
	return d.metrics.addr
}

// Ready reports whether Run is forwarding.
func (d *Driver) Ready() bool { return d.ready.Load() }

// Run forwards until ctx is done or a socket fails, then stops reading,
// flushes the capture, closes every socket and returns. It returns nil
// after a clean stop.
func (d *Driver) Run(ctx context.Context) error {
	failed := make(chan error, len(d.ports))
	var wg sync.WaitGroup
	// Every reader's buffers are taken before any reader starts, so the
	// pool holds its steady set once Run reports ready.
	batches := make([][]udpio.Msg, len(d.ports))
	for i, p := range d.ports {
		batches[i] = make([]udpio.Msg, p.conn.BatchSize())
		d.pool.refill(batches[i])
	}
	for i, p := range d.ports {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := d.readLoop(p, batches[i]); err != nil {
				failed <- fmt.Errorf("trimswitchdrv: port %s: %w", p.name, err)
			}
		}()
	}
	timerDone := make(chan struct{})
	go func() {
		defer close(timerDone)
		d.timerLoop()
	}()
	d.ready.Store(true)
	d.logReady()

	var err error
	select {
	case <-ctx.Done():
	case err = <-failed:
		d.log.Error("stopping after a socket error", zap.Error(err))
	}
	d.stop(&wg, timerDone)
	if cerr := d.release(); err == nil {
		err = cerr
	}
	return err
}

func (d *Driver) logReady() {
	ports := make([]string, len(d.ports))
	for i, p := range d.ports {
		ports[i] = fmt.Sprintf("%s=%v>%v", p.name, p.local, p.neighbor)
	}
	fields := []zap.Field{zap.String("switch", d.cfg.SwitchName()), zap.Strings("ports", ports)}
	if a := d.MetricsAddr(); a != "" {
		fields = append(fields, zap.String("metrics", a))
	}
	if d.capture != nil {
		fields = append(fields, zap.String("capture", d.cfg.Capture.File))
	}
	d.log.Info("ready", fields...)
}

// aLongTimeAgo is a deadline that has passed: it ends blocked reads and
// writes at once.
var aLongTimeAgo = time.Unix(1, 0)

// stop ends the readers and the timer and waits for them.
func (d *Driver) stop(readers *sync.WaitGroup, timerDone <-chan struct{}) {
	d.ready.Store(false)
	d.stopping.Store(true)
	for _, p := range d.ports {
		_ = p.conn.SetReadDeadline(aLongTimeAgo)
		_ = p.conn.SetWriteDeadline(aLongTimeAgo)
	}
	readers.Wait()
	d.waiter.Wake()
	<-timerDone
}

// release flushes the capture and closes every socket and file. It is
// safe to call more than once.
func (d *Driver) release() error {
	var errs []error
	d.closed.Do(func() {
		d.stopping.Store(true)
		if d.metrics != nil {
			errs = append(errs, d.metrics.close())
		}
		if d.capture != nil {
			errs = append(errs, d.capture.close())
		}
		for _, p := range d.ports {
			errs = append(errs, p.conn.Close())
		}
		if d.waiter != nil {
			errs = append(errs, d.waiter.Close())
		}
		st := d.Snapshot()
		t := st.Fabric.Totals()
		d.log.Info("stopped",
			zap.Uint64("received", t.Received.Packets), zap.Uint64("sent", t.Sent.Packets),
			zap.Uint64("dropped", t.Dropped.Packets), zap.Uint64("invalid", st.TotalInvalid()),
			zap.Int("buffers", d.pool.allocated()))
	})
	return errors.Join(errs...)
}

// Close releases a Driver that Run never ran (Run releases on its own).
func (d *Driver) Close() error { return d.release() }

// Snapshot is a consistent copy of the switch's counters.
type Snapshot struct {
	Fabric switchcore.Stats
	Ports  []PortSnapshot
}

// PortSnapshot is what the driver counts per port beyond the engine.
type PortSnapshot struct {
	Name       string
	Invalid    [NumInvalidReasons]uint64
	SendErrors uint64
	// SocketDrops are the datagrams the kernel dropped at the port's
	// socket, its receive buffer full, before a reader took them
	// (udpio.Conn.SocketDrops); 0 when the kernel does not say.
	SocketDrops              uint64
	DataQueued, HeaderQueued int // bytes in the port's queues now
}

// TotalInvalid sums invalid datagrams over ports and reasons.
func (s *Snapshot) TotalInvalid() uint64 {
	var n uint64
	for _, p := range s.Ports {
		for _, v := range p.Invalid {
			n += v
		}
	}
	return n
}

// Snapshot copies the counters under the engine lock.
func (d *Driver) Snapshot() Snapshot {
	d.mu.Lock()
	s := Snapshot{Fabric: d.sw.Stats(), Ports: make([]PortSnapshot, len(d.ports))}
	for i, p := range d.ports {
		s.Ports[i].DataQueued, s.Ports[i].HeaderQueued = d.sw.Occupancy(p.id)
	}
	d.mu.Unlock()
	for i, p := range d.ports {
		ps := &s.Ports[i]
		ps.Name = p.name
		for r := range ps.Invalid {
			ps.Invalid[r] = p.invalid[r].Load()
		}
		ps.SendErrors = p.sendErrors.Load()
		ps.SocketDrops, _ = p.conn.SocketDrops()
	}
	return s
}
