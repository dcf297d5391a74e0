package nic

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/wire"
)

// checkTimers holds the invariant of the engine's timers (due.go): every
// flow not on the stale list has the cached times its state gives now, the
// heaps are heaps of exactly those times, and an idle flow is one whose
// checkProgress would find nothing to do. A touch forgotten in an entry
// point that changes a flow shows here as a wrong time. It changes
// nothing (NextDeadline would refresh the stale flows).
func checkTimers(e *Engine) error {
	t := &e.tm
	dirty, stale := 0, 0
	for _, f := range e.order {
		ft := &t.fs[f.timers]
		if ft.f != f {
			return fmt.Errorf("flow %v: entry %d holds another flow", f.key, f.timers)
		}
		if ft.dirty {
			dirty++
			if ft.idle {
				return fmt.Errorf("flow %v: dirty and idle", f.key)
			}
		}
		if ft.stale {
			stale++
			continue
		}
		var at [numKeys]time.Duration
		var ok [numKeys]bool
		if f.failed == nil {
			e.flowTimes(f, &at, &ok)
		}
		for k := range numKeys {
			if has := ft.pos[k] >= 0; has != ok[k] || ok[k] && ft.at[k] != at[k] {
				return fmt.Errorf("flow %v: time %d cached (%v, %v), its state gives (%v, %v): a touch or a refresh is missing", f.key, k, ft.at[k], has, at[k], ok[k])
			}
		}
		if ft.idle && (f.failed != nil || f.peerTag == 0 || f.tx.InFlight() != 0 || f.tx.Una() != f.lastUna) {
			return fmt.Errorf("flow %v: idle with progress to check", f.key)
		}
	}
	if dirty != len(t.dirty) || stale != len(t.stale) {
		return fmt.Errorf("%d dirty and %d stale flows, %d and %d on the lists", dirty, stale, len(t.dirty), len(t.stale))
	}
	for k := range numKeys {
		h := t.heap[k]
		for p, i := range h {
			if int(t.fs[i].pos[k]) != p {
				return fmt.Errorf("heap %d: entry %d at %d thinks it is at %d", k, i, p, t.fs[i].pos[k])
			}
			if p > 0 && t.fs[i].at[k] < t.fs[h[(p-1)/2]].at[k] {
				return fmt.Errorf("heap %d: not a heap at %d", k, p)
			}
		}
	}
	return nil
}

// scanNextDeadline is NextDeadline as a scan of every flow.
func scanNextDeadline(e *Engine) (time.Duration, bool) {
	if e.ctrl.len() > 0 {
		return e.now, true
	}
	var at time.Duration
	ok := false
	take := func(d time.Duration) {
		if !ok || d < at {
			at, ok = d, true
		}
	}
	port := e.portNext()
	gate := max(port, e.pausedTo)
	if due, ok := e.watchdogDue(); ok {
		gate = max(port, min(due, e.pausedTo))
	}
	for _, f := range e.order {
		if f.failed != nil {
			continue
		}
		if f.peerTag == 0 {
			take(f.connectAt)
			if len(f.sends) > 0 {
				take(f.lastMove + e.failAfter + 1)
			}
			continue
		}
		if !f.txBlocked {
			take(max(f.cc.NextSend(), gate))
		}
		for _, d := range []func() (time.Duration, bool){f.tx.NextDeadline, f.rx.NextDeadline, f.cc.NextDeadline, f.np.NextDeadline} {
			if d, k := d(); k {
				take(d)
			}
		}
		if f.tx.InFlight() > 0 {
			take(f.lastMove + e.failAfter + 1)
		}
	}
	return at, ok
}

// scanAdvance is Advance as a visit of every flow, in e.order's order:
// the same work per flow (runTimers), on every flow rather than the due
// and touched ones.
// It leaves the timers stale: an engine it runs reads NextDeadline from
// scanNextDeadline.
func scanAdvance(e *Engine, now time.Duration) {
	now = e.observe(now)
	e.watchdog(now)
	for _, f := range e.order {
		e.runTimers(now, f)
	}
}

// progress is what checkProgress, run on every bound flow at every
// Advance, would have made of a flow's lastUna and lastMove.
type progress struct {
	peerTag  uint32
	restarts uint64
	una      wire.PSN
	move     time.Duration
}

// lastMove is the flow's lastMove as an Advance of every flow would have
// left it: an idle flow's follows the Advances.
func (e *Engine) lastMove(f *flow) time.Duration {
	if e.tm.fs[f.timers].idle {
		return e.tm.lastAdvance
	}
	return f.lastMove
}

// dueNet is a few engines joined by a network that delays, drops and
// marks packets at random, driven by random work: flows created and
// destroyed, sends and receives posted, PAUSE frames, time moving by
// random steps or to the next deadline.
type dueNet struct {
	t       *testing.T
	rng     *rand.Rand
	now     time.Duration
	hosts   []*Engine
	regions []RegionID
	wire    []duePkt
	buf     []byte
	lossy   bool // drop most packets: flows stop progressing and fail
	// scan runs the engines with scanAdvance and scanNextDeadline, as
	// the reference for the same random work; log records what every
	// host sent and completed, in order.
	scan bool
	log  []string
	// timeouts counts the bound flows failed for their una standing still.
	timeouts int
	// seen is the progress checkProgress would have recorded for each
	// bound flow of each host.
	seen []map[*flow]progress
	// ids is how many flows a host may have to each peer.
	ids int
}

type duePkt struct {
	at  time.Duration
	to  int
	pkt []byte
	tos uint8
}

func newDueNet(t *testing.T, seed uint64, hosts int, scan bool) *dueNet {
	return newDueNetWith(t, seed, hosts, scan, nil)
}

// newDueNetWith is newDueNet with tweak applied to every host's config.
func newDueNetWith(t *testing.T, seed uint64, hosts int, scan bool, tweak func(*Config)) *dueNet {
	n := &dueNet{t: t, rng: rand.New(rand.NewPCG(seed, 7)), buf: make([]byte, wire.DataLen+4096), scan: scan, ids: 6}
	for h := range hosts {
		cfg := DefaultConfig(uint16(h+1), 10e9)
		cfg.NoPayload = true
		cfg.Seed = seed
		cfg.Sender.Window = 32 << 10
		cfg.Sender.RTOLow, cfg.Sender.RTOHigh = 30*time.Microsecond, 60*time.Microsecond
		cfg.FailAfter = 400 * time.Microsecond
		cfg.DCQCN = congestion.DefaultDCQCN(10e9)
		cfg.DCQCN.RateTimer = time.Microsecond
		cfg.DCQCN.AlphaTimer = 4 * time.Microsecond
		if h%2 == 1 {
			if err := cfg.SetDCQCNVariant("mellanox"); err != nil {
				t.Fatal(err)
			}
		}
		if tweak != nil {
			tweak(&cfg)
		}
		e, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		r, err := e.RegisterLength(1 << 20)
		if err != nil {
			t.Fatal(err)
		}
		n.hosts, n.regions = append(n.hosts, e), append(n.regions, r)
		n.seen = append(n.seen, map[*flow]progress{})
	}
	return n
}

// check holds the timers' invariant and the progress of every bound flow
// on host h, after anything but an Advance.
func (n *dueNet) check(h int) {
	n.t.Helper()
	e := n.hosts[h]
	if err := checkTxIndex(e); err != nil {
		n.t.Fatalf("host %d at %v: %v", h+1, n.now, err)
	}
	if n.scan {
		return // its timers are stale; the other net checks its progress
	}
	if err := checkTimers(e); err != nil {
		n.t.Fatalf("host %d at %v: %v", h+1, n.now, err)
	}
	for _, f := range e.order {
		if f.failed != nil || f.peerTag == 0 {
			continue
		}
		p, ok := n.seen[h][f]
		if !ok || p.peerTag != f.peerTag || p.restarts != f.stats.PeerRestarts {
			// Bound just now: bind set lastMove.
			n.seen[h][f] = progress{f.peerTag, f.stats.PeerRestarts, f.lastUna, e.lastMove(f)}
			continue
		}
		if p.una != f.lastUna || p.move != e.lastMove(f) {
			n.t.Fatalf("host %d flow %v at %v: lastUna, lastMove %v, %v; an Advance of every flow leaves %v, %v",
				h+1, f.key, n.now, f.lastUna, e.lastMove(f), p.una, p.move)
		}
	}
}

// advance runs host h's Advance at now, and applies checkProgress's rule
// to the progress seen of every bound flow, as an Advance that visits
// every flow does: the flows it fails must be the ones the engine failed.
func (n *dueNet) advance(h int) {
	n.t.Helper()
	e := n.hosts[h]
	n.check(h)
	live := map[*flow]bool{}
	for _, f := range e.order {
		live[f] = f.failed == nil
	}
	if n.scan {
		scanAdvance(e, n.now)
	} else {
		e.Advance(n.now)
	}
	for _, f := range e.order {
		p, bound := n.seen[h][f]
		if !live[f] || !bound || f.peerTag == 0 {
			continue
		}
		failed := false
		if una := f.tx.Una(); una != p.una || f.tx.InFlight() == 0 {
			p.una, p.move = una, n.now
		} else if n.now-p.move > e.failAfter {
			failed = true
			n.timeouts++
		}
		n.seen[h][f] = p
		if got := errors.Is(f.failed, ErrPeerTimeout); got != failed {
			n.t.Fatalf("host %d flow %v at %v: failed %v, an Advance of every flow fails it: %v", h+1, f.key, n.now, f.failed, failed)
		}
	}
	n.check(h)
}

// run drives host h as the simulator does: Advance, Transmit until
// nothing leaves, and the completions.
func (n *dueNet) run(h int) {
	n.advance(h)
	e := n.hosts[h]
	for {
		pkt, tos, ok := e.Transmit(n.now, n.buf)
		n.check(h)
		if !ok {
			break
		}
		n.log = append(n.log, fmt.Sprintf("%v host %d sends %x tos %d", n.now, h+1, pkt, tos))
		to := int(wire.Header(pkt).Dst()) - 1
		if to < 0 || to >= len(n.hosts) || n.rng.IntN(100) < n.dropPercent() {
			continue
		}
		if n.rng.IntN(8) == 0 && tos&3 != wire.ECNNotECT {
			tos |= wire.ECNCE
		}
		at := n.now + time.Duration(1+n.rng.IntN(8000))*time.Nanosecond
		n.wire = append(n.wire, duePkt{at, to, append([]byte(nil), pkt...), tos})
	}
	for _, c := range e.Completions() {
		n.log = append(n.log, fmt.Sprintf("%v host %d completes %+v", n.now, h+1, c))
	}
}

// deadline is host e's NextDeadline, checked against a scan of every
// flow; the reference's is the scan.
func (n *dueNet) deadline(e *Engine) (time.Duration, bool) {
	at, ok := scanNextDeadline(e)
	if n.scan {
		return at, ok
	}
	if eat, eok := e.NextDeadline(); eat != at || eok != ok {
		n.t.Fatalf("host %d at %v: NextDeadline (%v, %v), a scan of every flow (%v, %v)", e.host, n.now, eat, eok, at, ok)
	}
	return at, ok
}

func (n *dueNet) dropPercent() int {
	if n.lossy {
		return 90
	}
	return 2
}

// deliver hands every packet due by now to its host, in order of arrival,
// and runs the host.
func (n *dueNet) deliver() {
	for {
		best := -1
		for i, p := range n.wire {
			if p.at <= n.now && (best < 0 || p.at < n.wire[best].at) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		p := n.wire[best]
		n.wire = append(n.wire[:best], n.wire[best+1:]...)
		n.hosts[p.to].Receive(n.now, p.pkt, p.tos)
		n.check(p.to)
		if n.rng.IntN(3) == 0 {
			n.deadline(n.hosts[p.to]) // the flow's times fresh before the Advance visits it
		}
		n.run(p.to)
	}
}

// step does one random thing.
func (n *dueNet) step() {
	h := n.rng.IntN(len(n.hosts))
	e := n.hosts[h]
	peer := n.rng.IntN(len(n.hosts) - 1)
	if peer >= h {
		peer++
	}
	key := FlowKey{Peer: uint16(peer + 1), ID: uint32(n.rng.IntN(n.ids))}
	back := FlowKey{Peer: uint16(h + 1), ID: key.ID}
	switch r := n.rng.IntN(100); {
	case r < 8: // a flow at both ends, or at one (its peer's comes later)
		spec := FlowSpec{Peer: key.Peer, ID: key.ID, Class: ClassGradient, Entropy: Entropy(n.rng.IntN(4))}
		_ = e.CreateFlow(n.now, spec)
		n.check(h)
		if n.rng.IntN(4) > 0 {
			spec.Peer = back.Peer
			_ = n.hosts[peer].CreateFlow(n.now, spec)
			n.check(peer)
		}
	case r < 11:
		_ = e.DestroyFlow(key)
		n.check(h)
	case r < 30:
		size := 1 + n.rng.IntN(48<<10)
		_ = n.hosts[peer].PostRecv(RecvReq{Key: back, WR: 1, Region: n.regions[peer], Length: size, Step: 0})
		n.check(peer)
		_ = e.PostSend(n.now, SendReq{Key: key, WR: 1, Region: n.regions[h], Length: size})
		n.check(h)
		n.run(h)
	case r < 32:
		e.Receive(n.now, wire.AppendPause(nil, 0xff, uint16(1+n.rng.IntN(50))), 0)
		n.check(h)
	case r < 34:
		n.lossy = !n.lossy
	case r < 60: // time to the earliest deadline or packet
		next, ok := time.Duration(0), false
		for _, e := range n.hosts {
			if d, k := n.deadline(e); k && (!ok || d < next) {
				next, ok = d, true
			}
		}
		for _, p := range n.wire {
			if !ok || p.at < next {
				next, ok = p.at, true
			}
		}
		if ok && next > n.now {
			n.now = next
		}
		n.tick()
	default: // time moves by a random step
		n.now += time.Duration(n.rng.IntN(20000)) * time.Nanosecond
		n.tick()
	}
}

// tick delivers what is due and runs every host whose deadline came; some
// hosts run early, as a driver may call Advance at any time.
func (n *dueNet) tick() {
	n.deliver()
	for h, e := range n.hosts {
		if n.rng.IntN(4) == 0 {
			n.run(h) // whether or not it is due, and with its timers stale
		} else if d, ok := n.deadline(e); ok && d <= n.now {
			n.run(h)
		}
	}
}

// The engine's cached deadlines stay what its flows' state gives, through
// random work on a lossy network with flows coming and going, and
// Advance, visiting only the flows due or changed, does what a visit of
// every flow does: the same packets in the same order, the same
// completions, and the same flows failed at the same times. A forgotten
// touch, a visit out of e.order's order, or an idle flow's lastMove
// brought up wrongly fails it.
func TestTimersMatchEveryFlowScan(t *testing.T) {
	timeouts, bound := 0, 0
	for seed := range uint64(12) {
		n, ref := newDueNet(t, seed+1, 3, false), newDueNet(t, seed+1, 3, true)
		for range 3000 {
			n.step()
			ref.step()
		}
		for i := range max(len(n.log), len(ref.log)) {
			if i >= len(n.log) || i >= len(ref.log) || n.log[i] != ref.log[i] {
				t.Fatalf("seed %d: event %d differs from a visit of every flow's (%d and %d events)", seed+1, i, len(n.log), len(ref.log))
			}
		}
		for h, e := range n.hosts {
			if e.Stats() != ref.hosts[h].Stats() {
				t.Fatalf("seed %d host %d: stats %+v, a visit of every flow's %+v", seed+1, h+1, e.Stats(), ref.hosts[h].Stats())
			}
			for _, f := range e.order {
				if f.peerTag != 0 {
					bound++
				}
			}
		}
		timeouts += n.timeouts
	}
	// The test must have exercised what it checks.
	if timeouts == 0 || bound == 0 {
		t.Fatalf("%d bound flows timed out, %d bound at the end: the random work exercised too little", timeouts, bound)
	}
	t.Logf("%d bound flows timed out, %d bound at the end", timeouts, bound)
}
