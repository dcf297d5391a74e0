package sim

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/switchcore"
	"github.com/forgive-emu/forgive/wire"
)

// Errors of a run.
var (
	ErrTimeout  = errors.New("sim: time limit reached")
	ErrIdle     = errors.New("sim: nothing left to do")
	ErrLivelock = errors.New("sim: engines keep asking to run at the same instant")
	ErrPast     = errors.New("sim: callback scheduled in the past")
)

// maxStepsPerInstant bounds the steps at one virtual instant: engines that
// keep asking to run without time moving are a bug, not a workload.
const maxStepsPerInstant = 100000

// never is the key of an engine with nothing to do.
const never = time.Duration(math.MaxInt64)

// wiring of a switch port.
const (
	unwired  = -2 // nothing on the far end: what leaves is dropped
	toSwitch = -1 // the far end is a switch port
)

// endpoint is where a link delivers: a host, or a switch port.
type endpoint struct {
	host int32 // >= 0: that host; toSwitch; unwired
	sw   int32
	port switchcore.PortID
}

// Host is one simulated host.
type Host struct {
	NIC    *nic.Engine
	uplink endpoint      // the switch port its link enters
	delay  time.Duration // propagation delay of its uplink
}

// Stats are the work counters of a run. They depend only on the inputs,
// never on the wall clock.
type Stats struct {
	// Instants is the number of distinct event times processed (one
	// iteration of the main loop each: the times OnInstant ran).
	Instants uint64
	// Events is the work items handled: packet deliveries, engine runs
	// (one due engine advanced and drained) and callbacks.
	Events uint64
	// PacketHops is the packets delivered over one link (host to switch,
	// switch to switch, switch to host).
	PacketHops uint64
	// EngineRuns is the times a due engine was advanced and drained.
	EngineRuns uint64
	// EngineCalls counts calls into the engines (Receive, Advance,
	// Transmit, Outputs, Reclaim, Completions, NextDeadline): the work the
	// scheduler causes, which per event must not grow with the fabric.
	EngineCalls uint64
	// Callbacks is the At callbacks run.
	Callbacks uint64
}

// Sim is a fabric of hosts and switches on a virtual clock.
//
// The scheduler keeps three queues: callbacks (At) by time, packets in
// flight by arrival time, and every engine that has something to do by
// its NextDeadline. At each instant it runs the due callbacks, delivers
// the due packets, then runs the due engines, switches before hosts, each
// in the order it was added; only those are touched, so the work per event
// does not depend on the size of the fabric.
type Sim struct {
	now      time.Duration
	hosts    []*Host
	switches []*switchcore.Switch
	// peer[sw][port] is what switch sw's port is wired to.
	peer [][]endpoint

	delayed delayQueue  // packets due later than the instant they were sent
	ready   arrivalFIFO // packets sent at the instant they are due
	seq     uint64
	timers  timerHeap
	engines engineTree
	// Engines that asked to run again at this instant (or were woken
	// while running) run in the next round at the same instant.
	deferred []engineRef
	isDefer  []bool // by engineRef.id
	woken    []bool // by engineRef.id: woken while being run
	cur      int32  // id of the engine being run, or -1
	inRun    bool   // the engines of this round are being run
	hostRef  []engineRef
	swRef    []engineRef

	free    [][]byte
	spare   [][]byte
	bufSize int
	made    uint64 // packet buffers allocated (BuffersMade)
	// noPayload: packets carry headers and lengths, no payload bytes
	// (NewPayloadFree); buffers are then slots of slotSize bytes apart.
	noPayload bool
	// inspectEveryHop: every switch parses the header from the bytes
	// (Receive) instead of taking the parse the packet carries
	// (ReceiveInspected), as before headers were parsed once per packet;
	// tests compare the two.
	inspectEveryHop bool
	stats           Stats

	// OnCompletion, when set, sees every completion of every host. It may
	// post work to any host's NIC and then call Wake.
	OnCompletion func(host int, c nic.Completion)
	// OnInstant, when set, runs after every event time with the current time.
	OnInstant func(now time.Duration)

	workers int             // SetWorkers
	syncAt  []time.Duration // AtGlobal times before the split
	par     *parallel       // the fabric split across workers, once a run split it
}

// New returns an empty simulation whose packet buffers hold mtu bytes of
// payload.
func New(mtu int) *Sim { return &Sim{bufSize: wire.DataLen + mtu, cur: -1} }

// NewPayloadFree returns an empty simulation in payload-free mode, for
// workloads that never read what they receive: every host's NIC must have
// nic.Config.NoPayload, so a data packet carries its header and its full
// length but no payload bytes are read, copied or written. What the
// engines do, every event, counter and completion time, is the same as
// with payloads (TestPayloadFreeRunsAsWithPayloads); only the receivers'
// memory does not hold the data.
//
// Packet buffers are then slots slotSize bytes apart in shared arenas: a
// buffer's payload overlaps the headers of the next slots, which is safe
// because nothing touches a payload, and it packs the headers of all the
// packets in flight into consecutive cache lines.
func NewPayloadFree(mtu int) *Sim {
	s := New(mtu)
	s.noPayload = true
	return s
}

// PayloadFree reports whether the simulation runs without payload bytes.
func (s *Sim) PayloadFree() bool { return s.noPayload }

// slotSize is the distance between two buffers in payload-free mode: room
// for the longest header any packet has, a cache line.
const slotSize = 64

// slotsPerArena is the buffers one arena allocation holds.
const slotsPerArena = 1024

// Now returns the virtual time.
func (s *Sim) Now() time.Duration {
	if s.par != nil {
		return s.par.lps[0].s.now
	}
	return s.now
}

// Stats returns the work counters so far.
func (s *Sim) Stats() Stats {
	if s.par != nil {
		return s.par.stats()
	}
	return s.stats
}

// errSplit is the panic of an engine added to a fabric already split
// across workers.
var errSplit = errors.New("sim: no engine can be added once a run has split the fabric across workers")

// AddSwitch adds a switch and returns its index.
func (s *Sim) AddSwitch(sw *switchcore.Switch) int {
	if s.par != nil {
		panic(errSplit)
	}
	s.switches = append(s.switches, sw)
	peers := make([]endpoint, sw.NumPorts())
	for i := range peers {
		peers[i] = endpoint{host: unwired}
	}
	s.peer = append(s.peer, peers)
	idx := len(s.switches) - 1
	r := s.newRef(kindSwitch, idx)
	s.swRef = append(s.swRef, r)
	s.rekey(r)
	return idx
}

// AddHost wires a host NIC to port of switch sw; delay is the propagation
// delay of the host's uplink (the switch port's own config gives the
// downlink's). It returns the host's index.
func (s *Sim) AddHost(n *nic.Engine, sw int, port switchcore.PortID, delay time.Duration) (int, error) {
	if err := s.checkPort(sw, port); err != nil {
		return 0, err
	}
	if delay < 0 {
		return 0, fmt.Errorf("sim: negative uplink delay %v", delay)
	}
	if s.par != nil {
		return 0, errSplit
	}
	if n.Config().NoPayload != s.noPayload {
		return 0, fmt.Errorf("sim: a NIC with NoPayload %v in a simulation whose PayloadFree is %v", n.Config().NoPayload, s.noPayload)
	}
	idx := len(s.hosts)
	s.hosts = append(s.hosts, &Host{NIC: n, uplink: endpoint{host: toSwitch, sw: int32(sw), port: port}, delay: delay})
	s.peer[sw][port] = endpoint{host: int32(idx)}
	r := s.newRef(kindHost, idx)
	s.hostRef = append(s.hostRef, r)
	s.rekey(r)
	return idx, nil
}

// Connect wires port pa of switch a to port pb of switch b.
func (s *Sim) Connect(a int, pa switchcore.PortID, b int, pb switchcore.PortID) error {
	if err := s.checkPort(a, pa); err != nil {
		return err
	}
	if err := s.checkPort(b, pb); err != nil {
		return err
	}
	if s.par != nil {
		return errSplit
	}
	if a == b && pa == pb {
		return fmt.Errorf("sim: port %d of switch %d cannot be wired to itself", pa, a)
	}
	s.peer[a][pa] = endpoint{host: toSwitch, sw: int32(b), port: pb}
	s.peer[b][pb] = endpoint{host: toSwitch, sw: int32(a), port: pa}
	return nil
}

func (s *Sim) checkPort(sw int, port switchcore.PortID) error {
	if sw < 0 || sw >= len(s.switches) || int(port) >= s.switches[sw].NumPorts() {
		return fmt.Errorf("sim: no port %d on switch %d", port, sw)
	}
	if s.peer[sw][port].host != unwired {
		return fmt.Errorf("sim: port %d of switch %d is already wired", port, sw)
	}
	return nil
}

// Host returns host i.
func (s *Sim) Host(i int) *Host { return s.hosts[i] }

// NumHosts returns the number of hosts.
func (s *Sim) NumHosts() int { return len(s.hosts) }

// Switch returns switch i.
func (s *Sim) Switch(i int) *switchcore.Switch { return s.switches[i] }

// NumSwitches returns the number of switches.
func (s *Sim) NumSwitches() int { return len(s.switches) }

// At runs fn at virtual time t, after the callbacks already scheduled for
// t and before the packets and engines due at t. fn may call any engine
// method (then Wake the host it changed) and At again. A t earlier than
// Now panics: it is a bug in the caller.
func (s *Sim) At(t time.Duration, fn func()) {
	if s.par != nil {
		s.par.lps[0].s.At(t, fn)
		return
	}
	if t < s.now {
		panic(fmt.Errorf("%w: %v < now %v", ErrPast, t, s.now))
	}
	s.seq++
	s.timers.push(timer{at: t, seq: s.seq, fn: fn})
}

// AtGlobal is At for a callback that reads or changes more than the
// hosts: a switch, or Stats. On one worker it is At. On several, every
// process stops at t before the callback runs, so it sees the switches
// as At would; it costs the pipeline a restart. Called from a callback
// during a run on several workers, t must be after Now.
func (s *Sim) AtGlobal(t time.Duration, fn func()) {
	s.At(t, fn)
	switch {
	case s.par != nil:
		s.par.addSync(t)
	case s.workers > 1:
		i, _ := slices.BinarySearch(s.syncAt, t)
		s.syncAt = slices.Insert(s.syncAt, i, t)
	}
}

// Wake tells the simulator that host's NIC was changed outside an event
// (a post, a flow created, a step begun): the host runs at Now, and its
// deadline is read again after. It is safe to call from OnCompletion and
// At callbacks and between runs.
func (s *Sim) Wake(host int) {
	if host < 0 || host >= len(s.hosts) {
		panic(fmt.Sprintf("sim: Wake of host %d, have %d", host, len(s.hosts)))
	}
	if s.par != nil {
		s.par.lps[0].s.Wake(host)
		return
	}
	r := s.hostRef[host]
	switch {
	case s.cur == r.id:
		s.woken[r.id] = true // run it once more when it returns
	case s.isDefer[r.id] || s.dueNow(r):
	case s.inRun:
		s.engines.remove(r)
		s.deferTo(r)
	default:
		s.engines.set(r, s.now)
	}
}

// deferTo files r to run in the next round at this instant.
func (s *Sim) deferTo(r engineRef) {
	s.isDefer[r.id] = true
	s.deferred = append(s.deferred, r)
}

// RunUntil advances virtual time until done returns true (checked after
// every event time) or limit passes, whichever is first. It first reads
// every engine's deadline again, so work posted between runs needs no
// Wake; work posted from inside a run (a callback) does.
func (s *Sim) RunUntil(done func() bool, limit time.Duration) error {
	if s.par != nil || s.workers > 1 && s.split() {
		return s.par.runUntil(done, limit)
	}
	for _, r := range s.swRef {
		s.rekey(r)
	}
	for _, r := range s.hostRef {
		s.rekey(r)
	}
	same := 0
	for !done() {
		next, ok := s.next()
		if !ok {
			return fmt.Errorf("%w at %v before the condition held", ErrIdle, s.now)
		}
		if next > limit {
			s.now = max(s.now, limit)
			return fmt.Errorf("%w: %v", ErrTimeout, limit)
		}
		if next > s.now {
			s.now, same = next, 0
		} else if same++; same > maxStepsPerInstant {
			return fmt.Errorf("%w: %d steps at %v", ErrLivelock, same, s.now)
		}
		s.step()
		s.stats.Instants++
		if s.OnInstant != nil {
			s.OnInstant(s.now)
		}
	}
	return nil
}

// next returns the earliest time anything happens: the heads of the three
// queues.
func (s *Sim) next() (time.Duration, bool) {
	if s.ready.len() > 0 || len(s.deferred) > 0 {
		// Nothing is due before now (what was is done, and At refuses
		// the past), so now is the earliest time.
		return s.now, true
	}
	t := s.delayed.next()
	if len(s.timers) > 0 {
		t = min(t, s.timers[0].at)
	}
	t = min(t, s.engines.topKey())
	return max(t, s.now), t != never
}

// step does everything due at s.now: callbacks, then packets in the order
// they were sent, then the engines that are due or were handed a packet,
// switches first, each in the order it was added.
func (s *Sim) step() {
	s.dueBeforeEngines()
	s.runDueEngines(nil)
}

// dueBeforeEngines does what is due at now before any engine runs: the
// engines deferred to now are filed, the callbacks due run, and the
// packets due are delivered, the delayed ones first.
func (s *Sim) dueBeforeEngines() {
	now := s.now
	if len(s.deferred) > 0 { // rare: an engine due again at its instant
		for _, r := range s.deferred {
			s.isDefer[r.id] = false
			s.engines.set(r, now)
		}
		clear(s.deferred)
		s.deferred = s.deferred[:0]
	}
	for len(s.timers) > 0 && s.timers[0].at <= now {
		tm := s.timers.pop()
		s.stats.Callbacks++
		s.stats.Events++
		tm.fn()
	}
	for s.delayed.next() <= now {
		s.deliver(s.delayed.pop())
	}
	for n := s.ready.len(); n > 0; n-- {
		s.deliver(s.ready.pop())
	}
}

// runDueEngines runs every engine due at now, each refiled under its new
// deadline; before each run, before(r) if before is not nil (a parallel
// process's first round notes the order its engines ran in).
func (s *Sim) runDueEngines(before func(engineRef)) {
	now := s.now
	s.inRun = true
	for {
		r, key := s.engines.top()
		if key > now {
			break
		}
		if before != nil {
			before(r)
		}
		s.stats.EngineRuns++
		s.stats.Events++
		s.cur = r.id
		if r.kind == kindSwitch {
			s.runSwitch(int(r.idx))
		} else {
			s.runHost(int(r.idx))
		}
		s.cur = -1
		s.rekeyRun(r)
	}
	s.inRun = false
}

// rekeyRun files r, just run, under its new deadline; a deadline of now
// (or a Wake while it ran) makes it run again in the next round.
func (s *Sim) rekeyRun(r engineRef) {
	d, ok := s.deadline(r)
	if s.woken[r.id] || (ok && d <= s.now) {
		s.woken[r.id] = false
		s.engines.remove(r)
		s.deferTo(r)
		return
	}
	if !ok {
		s.engines.remove(r)
		return
	}
	s.engines.set(r, d)
}

func (s *Sim) runSwitch(i int) {
	sw := s.switches[i]
	now := s.now
	sw.Advance(now)
	// The outputs stay in the switch's own slice: nothing in the loop
	// calls the switch, which is what keeps that slice valid, and each
	// Buf is cleared once handed on so the switch keeps none alive.
	out := sw.Outputs()
	s.stats.EngineCalls += 3 // Advance, Outputs, Reclaim
	peer := s.peer[i]
	for k := range out {
		o := &out[k]
		to := peer[o.Port]
		if to.host == unwired {
			s.recycle(o.Pkt.Buf)
		} else {
			s.send(max(o.At, now), to, o.Pkt.Buf, o.Pkt.TOS, &o.Hdr)
		}
		o.Pkt.Buf = nil
	}
	s.spare = sw.Reclaim(s.spare[:0])
	for k, b := range s.spare {
		s.recycle(b)
		s.spare[k] = nil
	}
}

func (s *Sim) runHost(i int) {
	h := s.hosts[i]
	now := s.now
	h.NIC.Advance(now)
	s.stats.EngineCalls += 2 // Advance, and the last Transmit
	for {
		buf := s.buffer()
		pkt, tos, ok := h.NIC.Transmit(now, buf)
		if !ok {
			s.recycle(buf)
			break
		}
		s.stats.EngineCalls++
		if s.noPayload {
			checkSlot(pkt)
		}
		// The header is parsed here, once, while the bytes the NIC just
		// wrote are in cache; the switches on the path take the parse.
		hdr, err := wire.Inspect(pkt)
		if err != nil {
			hdr = wire.Summary{} // the first switch reads the bytes, and refuses them
		}
		s.send(now+h.delay, h.uplink, pkt, tos, &hdr)
	}
	s.stats.EngineCalls++
	for _, c := range h.NIC.Completions() {
		if s.OnCompletion != nil {
			s.OnCompletion(i, c)
		}
	}
}

func (s *Sim) newRef(kind uint8, idx int) engineRef {
	r := engineRef{kind: kind, idx: int32(idx), id: int32(len(s.woken))}
	r.ord = uint32(kind)<<31 | uint32(idx)
	s.isDefer = append(s.isDefer, false)
	s.woken = append(s.woken, false)
	s.engines.add(r)
	return r
}

// rekey files r under its engine's NextDeadline (due times in the past are
// due now), or takes it off the queue when it has nothing to do.
func (s *Sim) rekey(r engineRef) {
	d, ok := s.deadline(r)
	if !ok {
		s.engines.remove(r)
		return
	}
	s.engines.set(r, max(d, s.now))
}

func (s *Sim) deadline(r engineRef) (time.Duration, bool) {
	s.stats.EngineCalls++
	if r.kind == kindSwitch {
		return s.switches[r.idx].NextDeadline()
	}
	return s.hosts[r.idx].NIC.NextDeadline()
}

// deliver hands a packet to the engine at the far end of its link. A host
// handed a packet runs at this instant: it may have an acknowledgement to
// send or a completion to report.
func (s *Sim) deliver(a arrival) {
	s.stats.PacketHops++
	s.stats.Events++
	s.stats.EngineCalls++
	if a.to.host >= 0 {
		s.hosts[a.to.host].NIC.Receive(s.now, a.buf, a.tos)
		s.recycle(a.buf)
		s.touch(s.hostRef[a.to.host])
		return
	}
	pkt := switchcore.Packet{Buf: a.buf, TOS: a.tos, In: a.to.port}
	if a.hdr.Type != 0 && !s.inspectEveryHop {
		// a.hdr is wire.Inspect of these bytes (switchcore's
		// TestOutputHeaderIsInspect, and TestHeaderParsedOncePerPacket
		// here): the switch acts as if it had read them.
		s.switches[a.to.sw].ReceiveInspected(s.now, pkt, &a.hdr)
	} else {
		s.switches[a.to.sw].Receive(s.now, pkt)
	}
	// A switch has output to hand over only when something was due by now,
	// and then it is filed under now already; otherwise the packet only
	// moved its deadline (an idle link starts it at once).
	if r := s.swRef[a.to.sw]; !s.dueNow(r) {
		s.rekey(r)
	}
}

// dueNow reports whether r is filed to run at this instant.
func (s *Sim) dueNow(r engineRef) bool {
	return s.engines.key(r) <= s.now
}

// touch makes r due now: it was handed a packet, so it may have something
// to send, a completion to report or a new deadline.
func (s *Sim) touch(r engineRef) {
	if !s.dueNow(r) {
		s.engines.set(r, s.now)
	}
}

// send puts a packet on a link that delivers it at at; hdr is its
// header's parse (wire.Inspect), or zero.
func (s *Sim) send(at time.Duration, to endpoint, buf []byte, tos uint8, hdr *wire.Summary) {
	s.seq++
	a := arrival{at: at, seq: s.seq, to: to, buf: buf, tos: tos, hdr: *hdr}
	if at <= s.now {
		s.ready.push(a)
		return
	}
	s.delayed.push(a)
}

func (s *Sim) buffer() []byte {
	if n := len(s.free); n == 0 && s.noPayload {
		s.newArena()
	}
	if n := len(s.free); n > 0 {
		b := s.free[n-1]
		s.free[n-1] = nil
		s.free = s.free[:n-1]
		return b[:cap(b)]
	}
	s.made++
	return make([]byte, s.bufSize)
}

// newArena adds slotsPerArena payload-free buffers to the free list, the
// lowest address on top.
func (s *Sim) newArena() { s.free = s.appendArena(s.free) }

// appendArena appends to list the slotsPerArena payload-free buffers of a
// new arena, the lowest address last, and counts them made.
func (s *Sim) appendArena(list [][]byte) [][]byte {
	s.made += slotsPerArena
	arena := make([]byte, (slotsPerArena-1)*slotSize+s.bufSize)
	for i := slotsPerArena - 1; i >= 0; i-- {
		o := i * slotSize
		list = append(list, arena[o:o+s.bufSize:o+s.bufSize])
	}
	return list
}

// checkSlot panics when a NIC wrote past its slot in payload-free mode:
// that would overwrite the next buffers' headers. A data packet's payload
// is not written, so only its header counts.
func checkSlot(pkt []byte) {
	n := len(pkt)
	if t, err := wire.Peek(pkt); err == nil && t == wire.TypeData {
		n = wire.DataLen
	}
	if n > slotSize {
		panic(fmt.Sprintf("sim: a %d-byte packet header does not fit a %d-byte payload-free slot", n, slotSize))
	}
}

func (s *Sim) recycle(b []byte) {
	if cap(b) >= s.bufSize {
		s.free = append(s.free, b[:cap(b)])
	}
}
