package switchcore

import (
	"math"
	"math/rand/v2"
	"time"

	"github.com/forgive-emu/forgive/internal/splitmix"
	"github.com/forgive-emu/forgive/wire"
)

// never is the deadline of a port with nothing to do.
const never = time.Duration(math.MaxInt64)

// maxSpare bounds the buffers kept for Reclaim; beyond it a dropped buffer
// is left to the garbage collector.
const maxSpare = 4096

// classInfo is what the DSCP of a packet decides: its PFC priority (the
// low three bits) and whether it always takes the strict-priority queue
// (classControl). One byte, so the table of all 64 DSCPs is one cache line.
type classInfo uint8

const classControl classInfo = 0x80

// prio returns the PFC priority.
func (c classInfo) prio() uint8 { return uint8(c & (NumPriorities - 1)) }

// control reports whether the class always takes the strict-priority queue.
func (c classInfo) control() bool { return c&classControl != 0 }

// pfcParams is a compiled PFCConfig.
type pfcParams struct {
	enabled    bool
	xoff, xon  int
	headroom   int // 0: unlimited
	watchdog   bool
	wdLimit    time.Duration
	wdRecovery time.Duration
	wdDrain    time.Duration // the window less the limit: the bucket drains wdLimit in this
}

// Switch is the sans-I/O switch engine. The driver hands it packets with
// Receive, calls Advance when NextDeadline passes, and sends what Drain
// returns; Reclaim returns the buffers of dropped and consumed packets.
// Every method takes the current time; a Switch is not safe for
// concurrent use.
type Switch struct {
	// What every visit reads, in the first lines: the ports and their
	// events, the clocks, the outputs and the masks.
	ports       []port
	ev          events        // every port's earliest pending event, and which port's is the earliest of all
	now         time.Duration // the latest time the driver gave
	clock       time.Duration // the instant being processed (≤ now)
	out         []Output
	pfcMask     uint8 // priorities with PFC: only they can be paused
	wdMask      uint8 // priorities with PFC and its watchdog on
	noFastPaths bool  // Receive takes the general path for every packet: tests compare a switch with it set against one without

	// recv[i] and sent[i] count what port i received and emitted: every
	// hop adds to one of each, and four ports' counters share a line.
	recv, sent []Counter
	// hosts[i] is the host port i faces (PortConfig.Host), 0 for a switch:
	// the source guard reads it for every packet, and a packet need not
	// touch the port it came in on for anything else.
	hosts   []uint16
	cold    []portCold // cold[i]: port i's PFC state and rarely touched counters
	spare   [][]byte
	routes  routeTable
	classes [64]classInfo

	pfc        [NumPriorities]pfcParams
	rng        *rand.Rand
	newBuffer  func(int) []byte
	badIngress Counter
}

// New validates cfg and builds a switch whose clock starts at zero.
func New(cfg Config) (*Switch, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	s := &Switch{
		ports:     make([]port, len(cfg.Ports)),
		cold:      make([]portCold, len(cfg.Ports)),
		recv:      make([]Counter, len(cfg.Ports)),
		sent:      make([]Counter, len(cfg.Ports)),
		hosts:     make([]uint16, len(cfg.Ports)),
		ev:        newEvents(len(cfg.Ports)),
		rng:       rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9E3779B97F4A7C15)),
		newBuffer: cfg.NewBuffer,
		out:       make([]Output, 0, 64),
		spare:     make([][]byte, 0, 64),
	}
	if s.newBuffer == nil {
		s.newBuffer = func(n int) []byte { return make([]byte, 0, n) }
	}
	s.compileClasses(&cfg.Classes)
	s.routes = compileRoutes(cfg.Routes, cfg.DefaultRoute, splitmix.Mix(cfg.Seed^0xD1B54A32D192ED03))
	for i := range cfg.PFC {
		s.pfc[i] = compilePFC(&cfg.PFC[i])
		if s.pfc[i].enabled {
			s.pfcMask |= 1 << i
			if s.pfc[i].watchdog {
				s.wdMask |= 1 << i
			}
		}
	}
	for i := range s.ports {
		s.ports[i].init(&s.cold[i], PortID(i), cfg.Ports[i], &cfg.PFC)
		s.hosts[i] = cfg.Ports[i].Host
	}
	return s, nil
}

func (s *Switch) compileClasses(cl *Classification) {
	control := cl.Control
	if control == nil {
		control = defaultControlDSCPs
	}
	for d := range s.classes {
		s.classes[d] = classInfo(d >> 3)
	}
	for d, prio := range cl.Priority {
		s.classes[d] = classInfo(prio)
	}
	for _, d := range control {
		s.classes[d] |= classControl
	}
}

func compilePFC(c *PFCConfig) pfcParams {
	p := pfcParams{enabled: c.Enabled, xoff: c.XOff, xon: c.XOn, headroom: c.Headroom}
	var window time.Duration
	p.wdLimit, p.wdRecovery, window, p.watchdog = c.watchdog()
	p.wdDrain = window - p.wdLimit
	return p
}

// NumPorts returns the number of ports.
func (s *Switch) NumPorts() int { return len(s.ports) }

// Occupancy returns the bytes held in a port's data queues and in its
// strict-priority queue.
func (s *Switch) Occupancy(id PortID) (data, header int) {
	if int(id) >= len(s.ports) {
		return 0, 0
	}
	p := &s.ports[id]
	return p.dataBytes, p.hdr.bytes
}

// TrimmedBytes is the payload bytes port id's trimming removed so far,
// over every class: Stats's Ports[id] Trimmed.Bytes summed, without a
// snapshot of every port, for a sampler that reads it often.
func (s *Switch) TrimmedBytes(id PortID) uint64 {
	if int(id) >= len(s.cold) {
		return 0
	}
	var n uint64
	for k := range s.cold[id].stats.Classes {
		n += s.cold[id].stats.Classes[k].Trimmed.Bytes
	}
	return n
}

// Receive hands the switch a packet that arrived at now on port pkt.In. It
// first advances the switch to now. It returns DropNone when the packet was
// queued (possibly trimmed) or, for a PAUSE frame, consumed; otherwise the
// reason it was dropped. Either way the switch now owns pkt.Buf. A now
// earlier than one already given is treated as that time.
func (s *Switch) Receive(now time.Duration, pkt Packet) DropReason {
	// One pass over the header validates it and reads what the guard,
	// the route and the queue need.
	hdr, err := wire.Inspect(pkt.Buf)
	return s.receive(now, pkt, &hdr, err != nil)
}

// ReceiveInspected is Receive for a packet the caller has already checked:
// hdr is what wire.Inspect returned for pkt.Buf, without an error. A driver
// that names the reason a datagram is malformed inspects it once, counts a
// refusal itself and hands a valid packet here, so that the switch checks
// no packet twice.
func (s *Switch) ReceiveInspected(now time.Duration, pkt Packet, hdr *wire.Summary) DropReason {
	return s.receive(now, pkt, hdr, false)
}

// receive is Receive once the header is inspected; malformed says the
// inspection failed.
func (s *Switch) receive(now time.Duration, pkt Packet, hdr *wire.Summary, malformed bool) DropReason {
	s.run(now)
	if int(pkt.In) >= len(s.ports) {
		s.badIngress.add(len(pkt.Buf))
		s.reclaim(pkt.Buf)
		return DropMalformed
	}
	in := &s.ports[pkt.In]
	s.recv[pkt.In].add(len(pkt.Buf))
	if malformed {
		return s.rxDrop(in, pkt, DropMalformed)
	}
	if h := s.hosts[pkt.In]; h != 0 {
		if src := hdr.Src; src != h && (hdr.Type != wire.TypePause || src != 0) {
			return s.rxDrop(in, pkt, DropSourceGuard)
		}
	}
	if hdr.Type == wire.TypePause {
		s.onPause(in, pkt)
		return DropNone
	}
	outID, ok := s.routes.lookup(hdr)
	if !ok {
		return s.rxDrop(in, pkt, DropNoRoute)
	}
	out := &s.ports[outID]
	if !s.noFastPaths && s.forward(out, pkt, hdr) {
		if s.ev.min() <= s.now { // the packet reached the far end at once
			s.runDue()
		}
		return DropNone
	}
	reason := s.admit(in, out, pkt, hdr)
	// An idle link starts the packet at once. The run above left no port
	// due by now, so when admit made none due either (a PAUSE it owes the
	// ingress port would be), out is the only port a run would step now:
	// step it without filing it first. The run after it then has nothing
	// due, unless the step made another port due (a RESUME).
	if t := s.due(out); t > s.now || s.ev.min() <= s.now || s.noFastPaths {
		s.ev.set(int(out.id), t)
	} else {
		s.step(out, s.now)
	}
	if s.ev.min() <= s.now { // the step made another port due now (a RESUME)
		s.runDue()
	}
	return reason
}

// Advance moves the switch to now: packets start serializing when their
// link is free, reach the far end of the link, pauses expire, the PFC
// watchdog fires.
func (s *Switch) Advance(now time.Duration) { s.run(now) }

// NextDeadline returns when the switch next has something to do, if ever.
func (s *Switch) NextDeadline() (time.Duration, bool) {
	t := s.ev.min()
	return t, t != never
}

// Drain appends the packets whose time on the wire has elapsed to dst, in
// the order they reached the far end, and returns it. Ownership of each
// Buf passes to the caller.
func (s *Switch) Drain(dst []Output) []Output {
	// A drain usually finds none or one or two outputs: element by
	// element is cheaper then than the runtime's bulk copy and clear.
	for i := range s.out {
		dst = append(dst, s.out[i])
		s.out[i].Pkt.Buf = nil // the caller owns it now; do not keep it alive
	}
	s.out = s.out[:0]
	return dst
}

// Outputs is Drain without the copy, for a driver that handles the
// packets at once: it returns the packets whose time on the wire has
// elapsed, in the order they reached the far end, in the switch's own
// slice. Ownership of each Buf passes to the caller; the slice does not:
// it is valid only until the next call of any method of this switch,
// which may overwrite it, and the caller must neither keep nor append to
// it. The switch does not clear the Bufs it handed over until it
// overwrites them, so a caller that does not want them kept alive sets
// each Pkt.Buf to nil when done with it.
func (s *Switch) Outputs() []Output {
	out := s.out
	s.out = s.out[:0]
	return out
}

// Reclaim appends the buffers of packets the switch dropped or consumed
// since the last call to dst and returns it, so a driver can reuse them.
// Ownership passes to the caller.
func (s *Switch) Reclaim(dst [][]byte) [][]byte {
	if len(s.spare) == 0 {
		return dst
	}
	dst = append(dst, s.spare...)
	clear(s.spare)
	s.spare = s.spare[:0]
	return dst
}

// run processes every event up to now, earliest first across all ports
// (the lowest-numbered port first among equals), so a PFC frame one port
// generates is seen by another in time order.
func (s *Switch) run(now time.Duration) {
	s.now = max(s.now, now)
	if s.ev.min() <= s.now {
		s.runDue()
	}
	s.clock = s.now
}

func (s *Switch) runDue() {
	for s.ev.min() <= s.now {
		i, t := s.ev.first()
		p := &s.ports[i]
		s.work(p, t)
		s.ev.refile(i, s.due(p)) // schedule(p), for the earliest port
	}
	s.clock = s.now
}

// step does what is due on port p at t. The PFC work is looked at only
// when a priority of p has it (PFC with a watchdog and data queued, or a
// pause to refresh): its loops are over exactly those priorities.
func (s *Switch) step(p *port, t time.Duration) {
	s.work(p, t)
	s.schedule(p)
}

// work is step without refiling p.
func (s *Switch) work(p *port, t time.Duration) {
	s.clock = t
	if p.wireAt <= t {
		s.emit(p, t)
	}
	if p.dataMask&s.wdMask|p.refreshMask() != 0 {
		s.stepPFC(p, t)
	}
	// startNext has nothing to start without a PFC frame owed or a packet
	// queued: a step that only hands over arrivals skips the call.
	if p.linkFree <= t && (p.pfcPending|p.dataMask != 0 || p.hdr.n != 0) {
		s.startNext(p, t)
	}
}

// stepPFC fires the watchdogs of p and repeats its pauses that are due.
func (s *Switch) stepPFC(p *port, t time.Duration) {
	if p.dataMask&s.wdMask != 0 {
		s.fireWatchdogs(p, t)
	}
	if p.refreshMask() != 0 {
		s.refreshPauses(p, t)
	}
}

// schedule refiles p under its next event after its state changed.
func (s *Switch) schedule(p *port) { s.ev.set(int(p.id), s.due(p)) }

// due returns the next event of p. Events already due (a watchdog that
// became due while its queue was empty) are due now, never in the past.
func (s *Switch) due(p *port) time.Duration {
	t := p.wireAt
	// When the link can start its next packet: at once when it is free
	// if a PFC frame, the strict-priority queue or a priority that cannot
	// be paused has one; when the pauses allow if only priorities that
	// can be paused have data; never with nothing to send.
	switch {
	case p.pfcPending != 0 || p.hdr.n != 0 || p.dataMask&^s.pfcMask != 0:
		t = min(t, p.linkFree)
	case p.dataMask != 0:
		t = min(t, s.pausedStart(p))
	}
	if p.dataMask&s.wdMask|p.refreshMask() != 0 {
		t = min(t, s.pfcDue(p))
	}
	return max(t, s.clock) // clock < never: a port with nothing to do stays never
}

// pfcDue is the earliest PFC event of p: a watchdog, a PAUSE refresh.
func (s *Switch) pfcDue(p *port) time.Duration {
	t := never
	if p.dataMask&s.wdMask != 0 {
		t = s.watchdogDue(p)
	}
	if p.refreshMask() != 0 {
		t = min(t, p.refreshDue())
	}
	return t
}

// rxDrop drops a packet that never reached an egress queue.
func (s *Switch) rxDrop(in *port, pkt Packet, r DropReason) DropReason {
	s.coldOf(in).stats.RxDrops[r].add(len(pkt.Buf))
	s.reclaim(pkt.Buf)
	return r
}

// drop drops a packet of class c of egress port p.
func (s *Switch) drop(p *port, c int, pkt Packet, r DropReason) DropReason {
	s.coldOf(p).stats.Classes[c].Drops[r].add(len(pkt.Buf))
	s.reclaim(pkt.Buf)
	return r
}

// coldOf returns the cold state of port p.
func (s *Switch) coldOf(p *port) *portCold { return &s.cold[p.id] }

func (s *Switch) reclaim(b []byte) {
	if b != nil && len(s.spare) < maxSpare {
		s.spare = append(s.spare, b)
	}
}

// Stats returns a snapshot of the counters.
func (s *Switch) Stats() Stats {
	st := Stats{Now: s.now, Ports: make([]PortStats, len(s.ports)), BadIngress: s.badIngress}
	for i := range s.ports {
		p, c, ps := &s.ports[i], &s.cold[i], &st.Ports[i]
		*ps = c.stats
		ps.Received, ps.Sent = s.recv[i], s.sent[i]
		for k := range p.cls {
			cs := &ps.Classes[k]
			h := &p.cls[k]
			cs.Enqueued, cs.Dequeued, cs.MaxOccupancy = h.enqueues, h.dequeued, h.maxOccupancy
			for b, n := range h.occupancy {
				cs.Occupancy[b] += uint64(n)
			}
		}
		for k := range c.pause {
			ps.Paused[k] = c.pause[k].total(s.now)
		}
	}
	return st
}
