package forgivedrv

import (
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/hostapi/nicapi"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/udpio"
	"github.com/forgive-emu/forgive/wire"
)

// A daemon with engines: N > 1 runs N loops, each a Daemon with its own
// engine (nic.NewGroup: one host link and one step ledger shared), its own
// socket on the listen address and its own goroutine. The sockets are one
// SO_REUSEPORT group whose classic BPF program (SteerProgram) gives every
// datagram to the engine of its flow; the host API creates each flow on
// that engine (Steer). One nicapi.Host fronts them all, so the host API's
// semantics (ownership, limits, the flow map, the step checks) are one
// host's, whatever the number of engines: the Host runs under the group's
// lock on the server's goroutines, and each of its calls on an engine
// runs on that engine's loop (Daemon.do), as one engine's calls do.
type group struct {
	shards []*Daemon // shards[0] is the daemon itself

	hmu  sync.Mutex // held around every use of host
	host *nicapi.Host
	// Counted under hmu: the completions routed to clients, and those
	// whose client was gone.
	completions, lost uint64

	// The engines' completions wait in queue until the Host routes them:
	// a loop never takes hmu (a request holding it may be waiting on that
	// loop), it queues and wakes the router.
	qmu    sync.Mutex
	queue  []nic.Completion
	notify chan struct{}
	done   chan struct{} // closed to stop the router
	routed chan struct{} // closed when the router has stopped
}

// listenGroup binds n sockets of one SO_REUSEPORT group on listen and
// gives the group its steering program. A socket bound without
// SO_REUSEPORT is tried first and closed: an address another socket holds
// is refused as it is for one engine, instead of joining its group.
func listenGroup(listen netip.AddrPort, n int, opts udpio.Options) ([]*udpio.Conn, error) {
	probe, err := udpio.Listen(listen.String(), opts)
	if err != nil {
		return nil, fmt.Errorf("forgivedrv: listen %v: %w", listen, err)
	}
	addr := probe.LocalAddr() // port 0 resolved
	probe.Close()
	opts.ReusePort = true
	conns := make([]*udpio.Conn, 0, n)
	fail := func(err error) ([]*udpio.Conn, error) {
		for _, c := range conns {
			c.Close()
		}
		return nil, err
	}
	for range n {
		c, err := udpio.Listen(addr.String(), opts)
		if err != nil {
			return fail(fmt.Errorf("forgivedrv: listen %v (engine %d of %d): %w", addr, len(conns), n, err))
		}
		conns = append(conns, c)
	}
	if err := conns[0].AttachReuseportCBPF(SteerProgram(n)); err != nil {
		return fail(fmt.Errorf("forgivedrv: listen %v: steering: %w", addr, err))
	}
	return conns, nil
}

// startGroup makes d the first of a group of loops over engines d.eng and
// more, on sockets d.conn and conns, and the Host that fronts them.
func (d *Daemon) startGroup(more []*nic.Engine, conns []*udpio.Conn, limits hostapi.Limits, bufSize int) {
	g := &group{notify: make(chan struct{}, 1), done: make(chan struct{}), routed: make(chan struct{})}
	g.shards = append(g.shards, d)
	d.grp = g
	for i, eng := range more {
		s := &Daemon{cfg: d.cfg, log: d.log, sendLog: d.sendLog, eng: eng, conn: conns[i], sw: d.sw, start: d.start,
			closed: d.closed, grp: g, idx: i + 1}
		s.buffers(bufSize)
		g.shards = append(g.shards, s)
	}
	g.host = nicapi.NewOver(engines{g}, limits, g.complete)
}

// complete is the group's Host's sink (under hmu).
func (g *group) complete(client hostapi.ClientID, comp hostapi.Completion) {
	d := g.shards[0]
	g.completions++
	if err := d.srv.Complete(client, comp); err != nil {
		g.lost++
		d.log.Debug("completion not delivered", zap.Uint64("client", uint64(client)), zap.Error(err))
	}
}

// push queues an engine's completions for the Host and wakes the router;
// it runs on the engine's loop.
func (g *group) push(cs []nic.Completion) {
	if len(cs) == 0 {
		return
	}
	g.qmu.Lock()
	g.queue = append(g.queue, cs...)
	g.qmu.Unlock()
	select {
	case g.notify <- struct{}{}:
	default:
	}
}

// take hands the queued completions to the Host (Engine.Completions).
func (g *group) take() []nic.Completion {
	g.qmu.Lock()
	q := g.queue
	g.queue = nil
	g.qmu.Unlock()
	return q
}

// route delivers the queued completions until done is closed.
func (g *group) route() {
	defer close(g.routed)
	for {
		select {
		case <-g.notify:
			g.deliver()
		case <-g.done:
			return
		}
	}
}

func (g *group) deliver() {
	g.hmu.Lock()
	g.host.Deliver()
	g.hmu.Unlock()
}

// runLoops runs the other loops and the router beside d's loop, which
// runLoops runs on the caller's goroutine; it stops and joins them all,
// then fails the outstanding work of every engine.
func (d *Daemon) runLoops() error {
	g := d.grp
	if g == nil {
		err := d.loop()
		d.ready.Store(false)
		d.shutdown()
		return err
	}
	go g.route()
	errs := make(chan error, len(g.shards)-1)
	for _, s := range g.shards[1:] {
		go func() { errs <- s.loop() }()
	}
	err := d.loop()
	d.ready.Store(false)
	for _, s := range g.shards[1:] {
		s.stopLoop()
	}
	for range g.shards[1:] {
		err = errors.Join(err, <-errs)
	}
	close(g.done)
	<-g.routed
	// Every loop has stopped: their engines are this goroutine's now.
	for _, s := range g.shards {
		for _, key := range s.eng.Flows() {
			_ = s.eng.DestroyFlow(key)
		}
		g.push(s.eng.Completions())
	}
	g.deliver()
	for _, s := range g.shards {
		s.failInbox()
	}
	return err
}

// broadcastPause hands a PAUSE frame engine 0 received to the other
// engines: the host link's pause holds for all of them.
func (d *Daemon) broadcastPause(pkt []byte) {
	if t, err := wire.Validate(pkt); err != nil || t != wire.TypePause {
		return
	}
	p := wire.Pause(append([]byte(nil), pkt...))
	for _, s := range d.grp.shards[1:] {
		s.post(func(now time.Duration) { s.eng.ReceivePause(now, p) })
	}
}

// post queues fn on the loop without waiting for it; dropped once the
// loop stops.
func (d *Daemon) post(fn func(now time.Duration)) {
	d.mu.Lock()
	if d.stop {
		d.mu.Unlock()
		return
	}
	d.inbox = append(d.inbox, fn)
	d.mu.Unlock()
	d.conn.Wake()
}

// engines is the group's engines as one nicapi.Engine: a flow's calls go
// to its engine (Steer), a region to every engine (the same id on each:
// they all register the same regions in the same order), the steps to
// engine 0 (the ledger is shared, any engine answers alike). Each call runs
// on its engine's loop; the completions it makes join the group's queue
// before it returns, so the Host routes them as it would one engine's.
type engines struct{ g *group }

var _ nicapi.Engine = engines{}

func (e engines) on(i int, fn func(eng *nic.Engine, now time.Duration) error) error {
	s := e.g.shards[i]
	return s.do(func(now time.Duration) error {
		err := fn(s.eng, now)
		e.g.push(s.eng.Completions())
		return err
	})
}

func (e engines) of(key nic.FlowKey) int { return Steer(key.Peer, key.ID, len(e.g.shards)) }

func (e engines) register(fn func(eng *nic.Engine) (nic.RegionID, error)) (nic.RegionID, error) {
	var ids []nic.RegionID
	for i := range e.g.shards {
		var id nic.RegionID
		err := e.on(i, func(eng *nic.Engine, _ time.Duration) (err error) {
			id, err = fn(eng)
			return err
		})
		if err == nil && len(ids) > 0 && id != ids[0] {
			err = fmt.Errorf("forgivedrv: engine %d registered region %d as %d", i, ids[0], id)
			ids = append(ids, id)
		}
		if err != nil {
			for j, id := range ids {
				_ = e.on(j, func(eng *nic.Engine, _ time.Duration) error { return eng.DeregisterMemory(id) })
			}
			return 0, err
		}
		ids = append(ids, id)
	}
	return ids[0], nil
}

func (e engines) RegisterMemory(mem []byte) (nic.RegionID, error) {
	return e.register(func(eng *nic.Engine) (nic.RegionID, error) { return eng.RegisterMemory(mem) })
}

func (e engines) RegisterLength(size int) (nic.RegionID, error) {
	return e.register(func(eng *nic.Engine) (nic.RegionID, error) { return eng.RegisterLength(size) })
}

// DeregisterMemory checks every engine first: work posted on any flow
// keeps the region.
func (e engines) DeregisterMemory(id nic.RegionID) error {
	for i := range e.g.shards {
		if err := e.on(i, func(eng *nic.Engine, _ time.Duration) error { return eng.CheckDeregister(id) }); err != nil {
			return err
		}
	}
	var errs []error
	for i := range e.g.shards {
		errs = append(errs, e.on(i, func(eng *nic.Engine, _ time.Duration) error { return eng.DeregisterMemory(id) }))
	}
	return errors.Join(errs...)
}

func (e engines) CreateFlow(_ time.Duration, spec nic.FlowSpec) error {
	return e.on(Steer(spec.Peer, spec.ID, len(e.g.shards)), func(eng *nic.Engine, now time.Duration) error {
		return eng.CreateFlow(now, spec)
	})
}

func (e engines) DestroyFlow(key nic.FlowKey) error {
	return e.on(e.of(key), func(eng *nic.Engine, _ time.Duration) error { return eng.DestroyFlow(key) })
}

func (e engines) PostSend(_ time.Duration, req nic.SendReq) error {
	return e.on(e.of(req.Key), func(eng *nic.Engine, now time.Duration) error { return eng.PostSend(now, req) })
}

func (e engines) PostRecv(req nic.RecvReq) error {
	return e.on(e.of(req.Key), func(eng *nic.Engine, _ time.Duration) error { return eng.PostRecv(req) })
}

func (e engines) BeginStep(_ time.Duration, req nic.StepReq) (c bool, err error) {
	err = e.on(0, func(eng *nic.Engine, now time.Duration) (err error) {
		c, err = eng.BeginStep(now, req)
		return err
	})
	return c, err
}

func (e engines) EndJobStep(_ time.Duration, job nic.JobID, step budget.StepID) {
	_ = e.on(0, func(eng *nic.Engine, now time.Duration) error { eng.EndJobStep(now, job, step); return nil })
}

func (e engines) JobStepRecord(job nic.JobID, step budget.StepID) (r budget.StepRecord, ok bool) {
	_ = e.on(0, func(eng *nic.Engine, _ time.Duration) error { r, ok = eng.JobStepRecord(job, step); return nil })
	return r, ok
}

func (e engines) JobSteps(job nic.JobID) (out []budget.StepRecord) {
	_ = e.on(0, func(eng *nic.Engine, _ time.Duration) error { out = eng.JobSteps(job); return nil })
	return out
}

func (e engines) ForgetJob(job nic.JobID) {
	_ = e.on(0, func(eng *nic.Engine, _ time.Duration) error { eng.ForgetJob(job); return nil })
}

// Stats are the engines' counters summed, but for the host link's and
// the ledger's, which every engine of a group counts alike: engine 0's.
func (e engines) Stats() nic.Stats {
	var sum nic.Stats
	for i := range e.g.shards {
		_ = e.on(i, func(eng *nic.Engine, _ time.Duration) error {
			addStats(&sum, eng.Stats(), i == 0)
			return nil
		})
	}
	return sum
}

func addStats(sum *nic.Stats, s nic.Stats, first bool) {
	sum.RxPackets += s.RxPackets
	sum.TxPackets += s.TxPackets
	sum.RxBytes += s.RxBytes
	sum.TxBytes += s.TxBytes
	sum.Malformed += s.Malformed
	sum.Misdelivered += s.Misdelivered
	sum.UnknownFlow += s.UnknownFlow
	sum.FlowsFailed += s.FlowsFailed
	sum.WrongTag += s.WrongTag
	sum.StaleIncarnation += s.StaleIncarnation
	sum.StaleConnects += s.StaleConnects
	sum.AcceptsLimited += s.AcceptsLimited
	if first {
		sum.Pauses, sum.PausesIgnored, sum.WatchdogFires = s.Pauses, s.PausesIgnored, s.WatchdogFires
		sum.PausedTime, sum.LongestPause = s.PausedTime, s.LongestPause
		sum.UnbudgetedBytes = s.UnbudgetedBytes
	}
}

func (e engines) Flow(key nic.FlowKey) (r nic.FlowReport, ok bool) {
	_ = e.on(e.of(key), func(eng *nic.Engine, _ time.Duration) error { r, ok = eng.Flow(key); return nil })
	return r, ok
}

func (e engines) Completions() []nic.Completion { return e.g.take() }

// loopStats are every loop's counters summed, with the group's
// completions (under hmu).
func (g *group) loopStats() LoopStats {
	var sum LoopStats
	for _, s := range g.shards {
		_ = s.do(func(time.Duration) error {
			l := s.stats
			sum.Wakeups += l.Wakeups
			sum.Batches += l.Batches
			sum.SendErrors += l.SendErrors
			sum.Truncated += l.Truncated
			sum.ForeignSource += l.ForeignSource
			return nil
		})
	}
	sum.Completions = g.completions
	sum.LostComplete = g.lost + g.host.Unrouted()
	return sum
}
