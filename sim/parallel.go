package sim

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/forgive-emu/forgive/switchcore"
)

// ErrParallelInstant is returned by a run on several workers with
// OnInstant set: an instant is global, and the workers do not share one.
var ErrParallelInstant = errors.New("sim: OnInstant needs a run on one worker")

// SetWorkers sets how many goroutines the runs use (n <= 1: one, the
// default, which is the single-threaded scheduler). It takes effect at the
// next RunUntil; once a run has split the fabric, the count is fixed and
// no engine can be added. A fabric whose cut links have no propagation
// delay (no lookahead), or with OnInstant set at the first run, keeps to
// one goroutine.
//
// On several workers the fabric is split into logical processes: every
// host and a first block of switches in one, run on the caller's
// goroutine with the callbacks, and the other switches in n-1 more, each
// on a goroutine of its own. They advance in windows of half the
// smallest delay of a cut link (a host uplink, a switch port toward a
// host or toward another process's switch), in a pipeline: the hosts'
// process runs a window ahead of the others, so they never pass the
// instant at which the run's condition held. Packets cross a cut at a
// window's boundary, read off the sending switch's wire
// (switchcore.Switch.InFlight) or taken from the hosts' process as it
// sends them, and each is handed over in the round and the order the
// single-threaded scheduler hands it in. Every engine sees the same calls with the same arguments
// in the same order, so every output, counter and Stats figure is the
// single-threaded run's (TestParallelMatchesSerial, and the scenario
// tests on every worker count).
//
// What the callbacks may touch is narrower: OnCompletion and At callbacks
// run on the caller's goroutine while the switches run on others, so
// they may read and change the hosts and the caller's own state, never a
// switch; Stats called from a callback reports the counters as of the
// last window boundary (between runs it is exact). A callback that reads
// a switch or Stats is filed with AtGlobal.
func (s *Sim) SetWorkers(n int) { s.workers = n }

// Workers returns the goroutines a run uses: 1 until a run on several has
// split the fabric.
func (s *Sim) Workers() int {
	if s.par == nil {
		return 1
	}
	return len(s.par.lps)
}

// lp is one logical process: a Sim over a part of the fabric's engines,
// with what crosses its cut.
type lp struct {
	s    *Sim
	gord []uint32 // by engine id: its ord in the whole fabric
	// Packets from other processes, by (arrival, sender's ord, port),
	// handed to the engines in the second round of their instant; pending
	// are the ones read at the last boundary, not yet sorted in.
	inj     []crossArrival
	injAt   int
	pending []crossArrival
	// The instant and round of the last step (at -1: none yet).
	at    time.Duration
	round int
	log   []roundLog
	logAt int
	cuts  []cut
	out   [][]crossArrival // by receiving process: read off the cut wires
	err   error
	outOf []switchcore.Output
	// stock is a switch process's buffers for the packets crossing into
	// it: those its own switches freed in the windows before, never one
	// freed in this window, which the process at the cut's far end may
	// still be copying from.
	stock    [][]byte
	injected int // crossing packets handed over in the last window
	crossed  uint64
	diverts  bool // the hosts' process, with switches that send across a cut
	// syncEnd: the hosts' process stops before it, the next AtGlobal
	// callback's time (never for the others, or none).
	syncEnd time.Duration
}

// crossArrival is a packet that crosses a cut: its far end's arrival time,
// the sending switch's ord and port, and where it lands. own: the buffer
// is the receiver's (sent by the hosts' process, which never sees it
// again); otherwise it is still on the sender's wire, and the receiver
// copies it.
type crossArrival struct {
	at   time.Duration
	buf  []byte
	to   endpoint
	src  uint32
	port switchcore.PortID
	tos  uint8
	own  bool
}

// Endpoints of the hosts' process toward other processes.
const (
	cutOut   = -3 // a switch port across a cut: sw is the index in lp.cuts
	remoteUp = -4 // a host uplink into another process: sw is the fabric's index
)

// cut is a switch port whose far end is in another process.
type cut struct {
	sw   int32 // local index
	port switchcore.PortID
	toLP int32
	to   endpoint // in the receiving process
	src  uint32   // the switch's ord in the fabric
}

// roundLog is the last round a process ran at an instant.
type roundLog struct {
	at    time.Duration
	round int32
}

// window is what a process runs in one phase.
type window struct {
	end          time.Duration // events before end
	stopT        time.Duration // and not past round stopR of stopT (stopT < 0: no stop)
	stopR        int
	hostFrom     time.Duration // after the run: read the wires toward hosts for [hostFrom, hostTo)
	hostTo       time.Duration
	ssFrom, ssTo time.Duration // and toward other switch processes
}

// parallel is a Sim split into processes: lps[0] holds every host and a
// first block of switches, lps[1:] the other switches.
type parallel struct {
	top     *Sim
	lps     []*lp
	swLP    []int32 // by switch: its process
	swLocal []int32 // by switch: its index there
	w       time.Duration

	base     Stats // the counters of the runs before the split
	instants uint64
	lastT    time.Duration // the last instant counted, and its last round
	lastR    int32
	running  bool
	snap     Stats

	work []chan window
	wg   sync.WaitGroup
	ps   ParallelStats
	mark []uint64  // each process's Events when the phase began
	keep []arrival // scratch of exchange
	// remoteUp: some host's uplink enters another process than the
	// hosts'; else the hosts' delay queue holds only its own packets.
	remoteUp bool
	// sync is the times of the AtGlobal callbacks to come, in order;
	// inRun: a run is going on.
	sync  []time.Duration
	inRun bool
}

// ParallelStats counts a split run's windows and how its work fell on the
// processes. Like Stats, they depend only on the inputs.
type ParallelStats struct {
	// Processes is the logical processes: the hosts' and the switches'.
	Processes int
	// Window is the windows' length: half the smallest delay of a cut.
	Window time.Duration
	// Phases is the windows run: each a switch window with the hosts'
	// next one beside it, or the hosts' first window after the pipeline
	// (re)started, alone.
	Phases uint64
	// Restarts counts the pipeline started again after nothing happened
	// for two windows or more, and at each run's start.
	Restarts uint64
	// Events is, by process (0: the hosts), the events it ran.
	Events []uint64
	// Critical is, summed over the phases, the most events any process
	// ran in the phase: what a run with a core per process waits for.
	// Sum(Events)/Critical bounds the speed-up of that run.
	Critical uint64
	// Crossed is the packets handed across a cut.
	Crossed uint64
}

// addSync files an AtGlobal callback's time. Filed by a callback during a
// run (on the hosts' process, which is then at or before t), it also
// stops the hosts' process before t.
func (p *parallel) addSync(t time.Duration) {
	i, _ := slices.BinarySearch(p.sync, t)
	p.sync = slices.Insert(p.sync, i, t)
	if p.inRun {
		h := p.lps[0]
		if t <= h.s.now {
			panic(fmt.Sprintf("sim: AtGlobal at %v, not after now %v, during a run on several workers", t, h.s.now))
		}
		h.syncEnd = min(h.syncEnd, t)
	}
}

// BuffersMade is the packet buffers the simulation has allocated, over
// every process of a run on several workers. Buffers are reused once
// freed, so it follows the packets in flight at the busiest instant, not
// the packets sent; on several workers it stays near one worker's. It is
// not part of Stats, which is the same on any number of workers.
func (s *Sim) BuffersMade() uint64 {
	n := s.made // before the split
	if s.par == nil {
		return n
	}
	for _, l := range s.par.lps {
		n += l.s.made
	}
	return n
}

// ParallelStats returns the counters of the runs on several workers, and
// false when no run split the fabric.
func (s *Sim) ParallelStats() (ParallelStats, bool) {
	if s.par == nil {
		return ParallelStats{}, false
	}
	ps := s.par.ps
	ps.Processes, ps.Window = len(s.par.lps), s.par.w
	ps.Events = make([]uint64, len(s.par.lps))
	for i, l := range s.par.lps {
		ps.Events[i] = l.s.stats.Events
		ps.Crossed += l.crossed
	}
	return ps, true
}

// phaseBegin and phaseEnd count a phase's events.
func (p *parallel) phaseBegin() {
	p.mark = p.mark[:0]
	for _, l := range p.lps {
		p.mark = append(p.mark, l.s.stats.Events)
	}
}

func (p *parallel) phaseEnd() {
	most := uint64(0)
	for i, l := range p.lps {
		most = max(most, l.s.stats.Events-p.mark[i])
	}
	p.ps.Phases++
	p.ps.Critical += most
}

// split divides the fabric into s.workers processes, or reports that it
// cannot: a cut without delay, OnInstant set, or work in flight from a
// run on one goroutine.
func (s *Sim) split() bool {
	if s.OnInstant != nil || len(s.switches) == 0 || len(s.hosts) == 0 ||
		s.ready.len() > 0 || s.delayed.len() > 0 || len(s.deferred) > 0 {
		return false
	}
	n := len(s.switches)
	// A switch a host reaches without delay must share the host's
	// process: that link has no lookahead to cut.
	must := make([]bool, n)
	for _, h := range s.hosts {
		if h.delay/2 < 1 {
			must[h.uplink.sw] = true
		}
	}
	var rest []int // the switches free to go elsewhere, in order
	for i := range n {
		if !must[i] {
			rest = append(rest, i)
		}
	}
	m := min(s.workers-1, len(rest)) // switch processes besides the hosts'
	if m == 0 {
		return false
	}
	p := &parallel{top: s, swLP: make([]int32, n), swLocal: make([]int32, n), lastT: -1}
	// The others in contiguous blocks of about equal work, a host counting
	// as much as a switch port: the hosts' process takes those it must and
	// a first block of the rest (the edge switches, in the generators'
	// order: their host links then cross no cut), as far as its hosts
	// leave room, and every other process at least one switch.
	weight := len(s.hosts)
	acc := len(s.hosts)
	for i, sw := range s.switches {
		weight += sw.NumPorts()
		if must[i] {
			acc += sw.NumPorts()
		}
	}
	part := 0
	for j, i := range rest {
		want := min(max(acc*(m+1)/weight, part), part+1)
		part = min(max(want, m-(len(rest)-1-j)), m)
		p.swLP[i] = int32(part)
		acc += s.switches[i].NumPorts()
	}
	child := func() *lp {
		return &lp{s: &Sim{bufSize: s.bufSize, noPayload: s.noPayload, cur: -1}, at: -1, out: make([][]crossArrival, m+1), syncEnd: never}
	}
	for range m + 1 {
		p.lps = append(p.lps, child())
	}
	count := make([]int32, m+1)
	for i := range s.switches {
		p.swLocal[i] = count[p.swLP[i]]
		count[p.swLP[i]]++
	}
	look := never
	for i, sw := range s.switches {
		li := p.swLP[i]
		l := p.lps[li]
		local := int(p.swLocal[i])
		peers := make([]endpoint, len(s.peer[i]))
		for q, e := range s.peer[i] {
			peers[q] = endpoint{host: unwired}
			c := cut{sw: int32(local), port: switchcore.PortID(q), src: uint32(kindSwitch)<<31 | uint32(i)}
			switch {
			case e.host >= 0 && li == 0:
				peers[q] = e
				continue
			case e.host >= 0:
				c.toLP, c.to = 0, e
			case e.host == toSwitch && p.swLP[e.sw] == li:
				peers[q] = endpoint{host: toSwitch, sw: p.swLocal[e.sw], port: e.port}
				continue
			case e.host == toSwitch:
				c.toLP, c.to = p.swLP[e.sw], endpoint{host: toSwitch, sw: p.swLocal[e.sw], port: e.port}
			default:
				continue // unwired
			}
			look = min(look, sw.PortDelay(switchcore.PortID(q)))
			if li == 0 {
				// The hosts' process runs ahead: what its switches send
				// across is taken off its arrival FIFO as it is sent.
				peers[q] = endpoint{host: cutOut, sw: int32(len(l.cuts))}
			}
			l.cuts = append(l.cuts, c)
		}
		l.s.switches = append(l.s.switches, sw)
		l.s.peer = append(l.s.peer, peers)
		l.s.swRef = append(l.s.swRef, l.s.newRef(kindSwitch, local))
		l.gord = append(l.gord, uint32(kindSwitch)<<31|uint32(i))
	}
	hl := p.lps[0]
	for i, h := range s.hosts {
		up := h.uplink
		if p.swLP[up.sw] == 0 {
			up.sw = p.swLocal[up.sw]
		} else {
			up.host = remoteUp // sw stays the fabric's index
			look = min(look, h.delay)
			p.remoteUp = true
		}
		hl.s.hosts = append(hl.s.hosts, &Host{NIC: h.NIC, uplink: up, delay: h.delay})
		hl.s.hostRef = append(hl.s.hostRef, hl.s.newRef(kindHost, i))
		hl.gord = append(hl.gord, uint32(kindHost)<<31|uint32(i))
	}
	hl.diverts = len(hl.cuts) > 0
	if look == never || look/2 < 1 {
		s.syncAt = slices.DeleteFunc(s.syncAt, func(t time.Duration) bool { return t < s.now })
		return false // no cut, or no lookahead: every window would be empty
	}
	p.w = look / 2
	// What the runs before left: the callbacks (the only queue that can
	// hold anything, checked above), the clock, the counters.
	hl.s.timers, s.timers = s.timers, nil
	hl.s.seq = s.seq
	p.sync, s.syncAt = s.syncAt, nil
	for _, l := range p.lps {
		l.s.now = s.now
	}
	p.base = s.stats
	s.par = p
	return true
}

// stats sums the processes' counters; Instants counts every round the
// single-threaded run would have run, which is, at each instant, the most
// any process ran there.
func (p *parallel) stats() Stats {
	if p.running {
		return p.snap
	}
	st := p.base
	st.Instants += p.instants
	for _, l := range p.lps {
		c := l.s.stats
		st.Events += c.Events
		st.PacketHops += c.PacketHops
		st.EngineRuns += c.EngineRuns
		st.EngineCalls += c.EngineCalls
		st.Callbacks += c.Callbacks
	}
	return st
}

// addSat returns a+b, or never when it would overflow.
func addSat(a, b time.Duration) time.Duration {
	if a > never-b {
		return never
	}
	return a + b
}

func (p *parallel) runUntil(done func() bool, limit time.Duration) error {
	top := p.top
	if top.OnInstant != nil {
		return ErrParallelInstant
	}
	h := p.lps[0]
	h.s.OnCompletion = top.OnCompletion
	for _, l := range p.lps {
		for _, r := range l.s.swRef {
			l.s.rekey(r)
		}
		for _, r := range l.s.hostRef {
			l.s.rekey(r)
		}
	}
	if done() {
		return nil
	}
	p.start()
	p.inRun = true
	defer func() {
		p.stop()
		p.inRun = false
		h.syncEnd = never
	}()
	lim := addSat(limit, 1) // events at or before limit run
	w := p.w
	T := h.s.now
	stopT, stopR := time.Duration(-1), 0
	restart := true
	for {
		if restart {
			// Fill the pipeline: what reaches the hosts in two windows
			// and the switches in one is on the wires now; the hosts run
			// their first window alone.
			restart = false
			// The AtGlobal callbacks at T run now, in this first
			// window, while the switches stand at T; the hosts stop
			// before the next.
			p.countRounds(T)
			k := 0
			for k < len(p.sync) && p.sync[k] <= T {
				k++
			}
			p.sync = p.sync[k:]
			h.syncEnd = never
			if len(p.sync) > 0 {
				h.syncEnd = p.sync[0]
			}
			for _, l := range p.lps {
				l.forgetPeeks()
			}
			for _, l := range p.lps[1:] {
				l.peek(T, addSat(T, 2*w), T, addSat(T, w))
			}
			p.deliverPeeks()
			p.ps.Restarts++
			p.phaseBegin()
			if h.run(min(addSat(T, w), lim), -1, 0, done) {
				stopT, stopR = h.s.now, h.round
			}
			p.phaseEnd()
			if h.err != nil {
				return p.finish(h.err, h.s.now)
			}
			p.exchange(T)
			p.deliverPeeks()
		}
		// The switches run [T, T+w) (up to the stop, if the condition
		// held), the hosts [T+w, T+2w) meanwhile.
		ts := never // the next AtGlobal callback: the switches stop there
		if len(p.sync) > 0 {
			ts = p.sync[0]
		}
		sw := window{end: min(addSat(T, w), lim, ts), stopT: stopT, stopR: stopR,
			hostFrom: addSat(T, 2*w), hostTo: addSat(T, 3*w), ssFrom: addSat(T, w), ssTo: addSat(T, 2*w)}
		p.snap = p.runningStats()
		p.running = true
		p.phaseBegin()
		for i := range p.lps[1:] {
			p.wg.Add(1)
			p.work[i] <- sw
		}
		hostEnd := min(addSat(T, 2*w), lim)
		if stopT < 0 && addSat(T, w) < lim {
			if h.run(hostEnd, -1, 0, done) {
				stopT, stopR = h.s.now, h.round
			}
		}
		p.wg.Wait()
		p.running = false
		p.phaseEnd()
		for _, l := range p.lps {
			if l.err != nil {
				return p.finish(l.err, l.s.now)
			}
		}
		if sw.stopT >= 0 {
			return p.finish(nil, sw.stopT)
		}
		T = sw.end
		p.exchange(T)
		p.deliverPeeks()
		if T == ts && T < lim {
			restart = true // every process stands at the callback's time
			continue
		}
		if T >= lim {
			// Every event up to limit ran: the run timed out, or went
			// idle before it.
			if _, ok := p.next(); !ok {
				return p.finish(fmt.Errorf("%w at %v before the condition held", ErrIdle, p.lastNow()), p.lastNow())
			}
			return p.finish(fmt.Errorf("%w: %v", ErrTimeout, limit), max(p.lastNow(), limit))
		}
		next, ok := p.next()
		if !ok {
			return p.finish(fmt.Errorf("%w at %v before the condition held", ErrIdle, p.lastNow()), p.lastNow())
		}
		if stopT < 0 && next >= addSat(T, 2*w) && next < lim {
			// Nothing happens for a while: start the pipeline again there.
			T, restart = next, true
		}
	}
}

// start starts a goroutine per switch process.
func (p *parallel) start() {
	p.work = make([]chan window, len(p.lps)-1)
	for i, l := range p.lps[1:] {
		ch := make(chan window)
		p.work[i] = ch
		go func() {
			for w := range ch {
				l.run(w.end, w.stopT, w.stopR, nil)
				if w.stopT < 0 {
					l.peek(w.hostFrom, w.hostTo, w.ssFrom, w.ssTo)
				}
				p.wg.Done()
			}
		}()
	}
}

func (p *parallel) stop() {
	for _, ch := range p.work {
		close(ch)
	}
	p.work = nil
}

// runningStats is what Stats reports while a window runs.
func (p *parallel) runningStats() Stats {
	p.running = false
	return p.stats()
}

// lastNow is the last instant any process ran.
func (p *parallel) lastNow() time.Duration {
	t := time.Duration(0)
	for _, l := range p.lps {
		t = max(t, l.s.now)
	}
	return t
}

// next is the earliest time anything is due in any process.
func (p *parallel) next() (time.Duration, bool) {
	t, any := never, false
	for _, l := range p.lps {
		if n, ok := l.next(); ok {
			t, any = min(t, n), true
		}
		for i := range l.pending {
			t, any = min(t, l.pending[i].at), true
		}
	}
	return t, any
}

// exchange does a window boundary's traffic: the hosts' packets go to
// their switches' processes, the buffers the switch processes freed go
// back to the hosts', and the rounds run before bound are counted.
func (p *parallel) exchange(bound time.Duration) {
	h := p.lps[0].s
	if p.remoteUp && h.delayed.len() > 0 {
		// The hosts' packets into other processes go there; those into
		// the hosts' process's own switches stay, in their order.
		keep := p.keep[:0]
		for h.delayed.len() > 0 {
			a := h.delayed.pop()
			if a.to.host != remoteUp {
				keep = append(keep, a)
				continue
			}
			l := p.lps[p.swLP[a.to.sw]]
			a.to = endpoint{host: toSwitch, sw: p.swLocal[a.to.sw], port: a.to.port}
			l.s.delayed.push(a)
		}
		for _, a := range keep {
			h.delayed.push(a)
		}
		clear(keep)
		p.keep = keep[:0]
	}
	for _, l := range p.lps[1:] {
		free := l.s.free
		want := max(64, 2*l.injected)
		keep := min(len(free), max(0, want-len(l.stock)))
		l.stock = append(l.stock, free[len(free)-keep:]...)
		h.free = append(h.free, free[:len(free)-keep]...)
		clear(free)
		l.s.free = free[:0]
		// A switch process short of its stock takes the rest from the
		// hosts' free list, to which the buffers it made go back: made
		// anew instead, every window that crossed more packets than the
		// stock held would add to that list for good. Every buffer
		// there is done with: the hosts' process, a window ahead, has
		// copied what it received, and the switch processes have run
		// the windows in which they freed theirs.
		if short := min(want-len(l.stock), len(h.free)); short > 0 {
			l.stock = append(l.stock, h.free[len(h.free)-short:]...)
			clear(h.free[len(h.free)-short:])
			h.free = h.free[:len(h.free)-short]
		}
		l.injected = 0
	}
	p.countRounds(bound)
}

// deliverPeeks hands every process what the others read off their wires
// for it.
func (p *parallel) deliverPeeks() {
	for _, src := range p.lps {
		for d, out := range src.out {
			p.lps[d].pending = append(p.lps[d].pending, out...)
			clear(out)
			src.out[d] = out[:0]
		}
	}
}

// countRounds counts the instants the processes logged before bound: at
// each, as many rounds as the process that ran the most.
func (p *parallel) countRounds(bound time.Duration) {
	for {
		t := bound
		for _, l := range p.lps {
			if l.logAt < len(l.log) {
				t = min(t, l.log[l.logAt].at)
			}
		}
		if t >= bound {
			break
		}
		r := int32(-1)
		for _, l := range p.lps {
			if l.logAt < len(l.log) && l.log[l.logAt].at == t {
				r = max(r, l.log[l.logAt].round)
				l.logAt++
			}
		}
		if t == p.lastT {
			if r > p.lastR {
				p.instants += uint64(r - p.lastR)
				p.lastR = r
			}
		} else {
			p.instants += uint64(r) + 1
			p.lastT, p.lastR = t, r
		}
	}
	for _, l := range p.lps {
		if l.logAt > 0 && l.logAt >= len(l.log)/2 {
			n := copy(l.log, l.log[l.logAt:])
			l.log, l.logAt = l.log[:n], 0
		}
	}
}

// finish ends a run at now: every process's clock is set to it, the
// packets read ahead and not yet handed over are dropped (they are still
// on their wires, and the next run reads them again), and the rounds are
// counted.
func (p *parallel) finish(err error, now time.Duration) error {
	p.exchange(never)
	for _, l := range p.lps {
		l.s.now = now
		if p.lastT == now {
			l.at, l.round = now, int(p.lastR)
		}
		l.forgetPeeks()
		for d := range l.out {
			clear(l.out[d])
			l.out[d] = l.out[d][:0]
		}
	}
	return err
}

// forgetPeeks drops the packets read off other processes' wires and not
// handed over yet (they are still there, to be read again), keeping those
// the hosts' process sent, which exist nowhere else.
func (l *lp) forgetPeeks() {
	keep := func(q []crossArrival) []crossArrival {
		n := 0
		for _, c := range q {
			if c.own {
				q[n] = c
				n++
			}
		}
		clear(q[n:])
		return q[:n]
	}
	l.inj = keep(l.inj[l.injAt:])
	l.injAt = 0
	l.pending = keep(l.pending)
}

// next is the earliest time anything is due in l.
func (l *lp) next() (time.Duration, bool) {
	t, ok := l.s.next()
	if l.injAt < len(l.inj) {
		if a := l.inj[l.injAt].at; !ok || a < t {
			return a, true
		}
	}
	return t, ok
}

// run runs l's rounds before end and, when stopT >= 0, none after round
// stopR of instant stopT. With done (the hosts' process), it checks done
// after every round and reports whether it held.
func (l *lp) run(end, stopT time.Duration, stopR int, done func() bool) bool {
	if len(l.pending) > 0 {
		slices.SortStableFunc(l.pending, func(a, b crossArrival) int {
			if c := cmp.Compare(a.at, b.at); c != 0 {
				return c
			}
			if c := cmp.Compare(a.src, b.src); c != 0 {
				return c
			}
			return cmp.Compare(a.port, b.port)
		})
		n := copy(l.inj, l.inj[l.injAt:])
		clear(l.inj[n:])
		l.inj = append(l.inj[:n], l.pending...)
		l.injAt = 0
		clear(l.pending)
		l.pending = l.pending[:0]
	}
	s := l.s
	for {
		next, ok := l.next()
		if !ok || next >= end || next >= l.syncEnd {
			return false
		}
		round := 0
		if next == l.at {
			round = l.round + 1
		}
		if stopT >= 0 && (next > stopT || next == stopT && round > stopR) {
			return false
		}
		if round > maxStepsPerInstant {
			l.err = fmt.Errorf("%w: %d steps at %v", ErrLivelock, round, next)
			return false
		}
		s.now, l.at, l.round = next, next, round
		l.step(round == 0)
		if n := len(l.log); n > 0 && l.log[n-1].at == next {
			l.log[n-1].round = int32(round)
		} else {
			l.log = append(l.log, roundLog{at: next, round: int32(round)})
		}
		if done != nil && done() {
			return true
		}
	}
}

// step is Sim.step for a process: in the first round of an instant, the
// packets that cross the cut to arrive then go into the arrival FIFO
// among the process's own sends, in the order of their senders, so the
// second round hands them over in the single-threaded order.
func (l *lp) step(first bool) {
	s := l.s
	s.dueBeforeEngines()
	if first {
		s.runDueEngines(func(r engineRef) { l.inject(l.gord[r.id]) })
		l.inject(math.MaxUint32)
	} else {
		s.runDueEngines(nil)
	}
	if l.diverts {
		l.divert()
	}
}

// divert takes the packets the hosts' process's switches sent across a
// cut off its arrival FIFO, for the process at the far end, which runs a
// window behind.
func (l *lp) divert() {
	s := l.s
	for n := s.ready.len(); n > 0; n-- {
		a := s.ready.pop()
		if a.to.host != cutOut {
			s.ready.push(a)
			continue
		}
		c := &l.cuts[a.to.sw]
		l.out[c.toLP] = append(l.out[c.toLP], crossArrival{at: a.at, buf: a.buf, to: c.to, src: c.src, port: c.port, tos: a.tos, own: true})
	}
}

// inject puts the packets crossing the cut that arrive now from a sender
// before ord into the arrival FIFO, each in a buffer of l's own.
func (l *lp) inject(ord uint32) {
	s := l.s
	for l.injAt < len(l.inj) {
		c := &l.inj[l.injAt]
		if c.at > s.now || c.src >= ord {
			return
		}
		if c.at < s.now {
			panic(fmt.Sprintf("sim: a packet crossing to arrive at %v handed over at %v", c.at, s.now))
		}
		buf := c.buf
		if !c.own {
			buf = l.buffer()[:len(c.buf)]
			n := len(c.buf)
			if s.noPayload {
				n = min(n, slotSize) // nothing reads past the header
			}
			copy(buf[:n], c.buf[:n])
		}
		s.seq++
		s.ready.push(arrival{at: s.now, seq: s.seq, to: c.to, buf: buf, tos: c.tos})
		c.buf = nil
		l.injAt++
		l.crossed++
	}
}

// buffer returns a buffer for a packet crossing into l: the hosts'
// process takes its own (it frees only copies of its own), a switch
// process one from its stock. The hosts' process is the one with hosts:
// it may hold switches too, and a stock of its own would never be
// refilled (its buffers come back to its free list), so every arena it
// made would end on that list for good.
func (l *lp) buffer() []byte {
	s := l.s
	if len(s.hosts) > 0 {
		return s.buffer()
	}
	l.injected++
	if len(l.stock) == 0 {
		if s.noPayload {
			l.stock = s.appendArena(l.stock)
		} else {
			s.made++
			return make([]byte, s.bufSize)
		}
	}
	n := len(l.stock)
	b := l.stock[n-1]
	l.stock[n-1] = nil
	l.stock = l.stock[:n-1]
	return b[:cap(b)]
}

// peek reads off l's cut wires what arrives at the hosts in [hostFrom,
// hostTo) and at other switch processes in [ssFrom, ssTo).
func (l *lp) peek(hostFrom, hostTo, ssFrom, ssTo time.Duration) {
	for _, c := range l.cuts {
		from, to := ssFrom, ssTo
		if c.toLP == 0 {
			from, to = hostFrom, hostTo
		}
		l.outOf = l.s.switches[c.sw].InFlight(c.port, from, to, l.outOf[:0])
		for _, o := range l.outOf {
			l.out[c.toLP] = append(l.out[c.toLP], crossArrival{at: o.At, buf: o.Pkt.Buf, to: c.to, src: c.src, port: c.port, tos: o.Pkt.TOS})
		}
	}
	clear(l.outOf)
}
