package reliability

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/wire"
	"pgregory.net/rapid"
)

// A tiny in-test network between one Sender and one Receiver: one FIFO
// lane per subflow for data and probes (a subflow is delivered in order),
// a priority lane for trimmed headers, and a reverse lane for ACKs and
// NACKs. A fate function decides what happens to each forward packet.

type fwd struct {
	probe bool
	h     DataHeader
	pf    wire.ProbeFields
}

type rev struct {
	nack bool
	a    wire.AckFields
	n    wire.NackFields
}

type fate uint8

const (
	pass fate = iota
	drop
	trim
	dup
)

// tb is what both *testing.T and *rapid.T provide.
type tb interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
}

type pair struct {
	t      tb
	now    time.Duration
	s      *Sender
	r      *Receiver
	lanes  [][]fwd
	prio   []fwd
	rev    []rev
	fateOf func(p fwd) fate
	// revDrop decides whether a reverse packet is lost.
	revDrop func() bool

	msgLen   map[uint32]uint32
	placed   map[uint32][]uint8 // times each byte was placed
	recvDone map[uint32]bool
	sendDone map[uint32]bool
}

func newPair(t tb, scfg SenderConfig, rcfg ReceiverConfig, initial wire.PSN) *pair {
	t.Helper()
	s, err := NewSender(FlowInfo{Flow: testFlow, Local: 1, Peer: 2, InitialPSN: initial}, scfg)
	if err != nil {
		t.Fatal(err)
	}
	r, err := NewReceiver(FlowInfo{Flow: testFlow, Local: 2, Peer: 1, InitialPSN: initial}, rcfg, NoForgiveness{})
	if err != nil {
		t.Fatal(err)
	}
	return &pair{t: t, s: s, r: r, lanes: make([][]fwd, scfg.Subflows),
		fateOf: func(fwd) fate { return pass }, revDrop: func() bool { return false },
		msgLen: map[uint32]uint32{}, placed: map[uint32][]uint8{},
		recvDone: map[uint32]bool{}, sendDone: map[uint32]bool{}}
}

func (p *pair) post(msg, n uint32) {
	if err := p.s.Post(msg, n); err != nil {
		p.t.Fatal(err)
	}
	p.msgLen[msg] = n
	p.placed[msg] = make([]uint8, n)
}

// sendOne asks the sender for one segment and puts it (and the probes
// that follow it) on the wire.
func (p *pair) sendOne() bool {
	seg, ok := p.s.Next(p.now)
	if ok {
		h := DataHeader{PSN: seg.PSN, Msg: seg.Msg, Offset: seg.Offset, PayloadLen: seg.Len,
			MsgLen: seg.MsgLen, Flags: seg.Flags, Subflows: seg.Subflows}
		p.emit(fwd{h: h})
	}
	p.collectSender()
	return ok
}

func (p *pair) emit(f fwd) {
	lane := int(uint32(f.h.PSN) % uint32(len(p.lanes)))
	if f.probe {
		lane = int(f.pf.Subflow)
	}
	switch p.fateOf(f) {
	case drop:
		return
	case trim:
		if !f.probe {
			f.h.Flags |= wire.DataTrimmed
			p.prio = append(p.prio, f)
			return
		}
	case dup:
		p.lanes[lane] = append(p.lanes[lane], f)
	}
	p.lanes[lane] = append(p.lanes[lane], f)
}

func (p *pair) collectSender() {
	for _, pf := range p.s.Out.Probes {
		p.emit(fwd{probe: true, pf: pf})
	}
	for _, c := range p.s.Out.Completions {
		if p.sendDone[c.Msg] {
			p.t.Fatalf("sender completed message %d twice", c.Msg)
		}
		p.sendDone[c.Msg] = true
	}
	p.s.Out.Reset()
}

func (p *pair) collectReceiver() {
	for _, a := range p.r.Out.Acks {
		if !p.revDrop() {
			p.rev = append(p.rev, rev{a: a})
		}
	}
	for _, n := range p.r.Out.Nacks {
		if !p.revDrop() {
			p.rev = append(p.rev, rev{nack: true, n: n})
		}
	}
	for _, c := range p.r.Out.Completions {
		if p.recvDone[c.Msg] {
			p.t.Fatalf("receiver completed message %d twice", c.Msg)
		}
		if c.Len != p.msgLen[c.Msg] || c.Forgiven != nil {
			p.t.Fatalf("completion %+v, want length %d and nothing forgiven", c, p.msgLen[c.Msg])
		}
		p.recvDone[c.Msg] = true
	}
	p.r.Out.Reset()
}

// deliver hands the receiver the head of a forward lane (-1: priority).
func (p *pair) deliver(lane int) {
	q := &p.prio
	if lane >= 0 {
		q = &p.lanes[lane]
	}
	f := (*q)[0]
	*q = (*q)[1:]
	if f.probe {
		if err := p.r.OnProbe(p.now, f.pf); err != nil {
			p.t.Fatal(err)
		}
	} else {
		res, err := p.r.OnPacket(p.now, f.h)
		if err != nil {
			p.t.Fatal(err)
		}
		for _, rg := range res.Place {
			if rg.Start < f.h.Offset || rg.End > f.h.Offset+f.h.PayloadLen {
				p.t.Fatalf("placed %v outside the packet's bytes", rg)
			}
			for off := rg.Start; off < rg.End; off++ {
				p.placed[f.h.Msg][off]++
			}
		}
	}
	p.collectReceiver()
}

// deliverRev hands the sender reverse packet i.
func (p *pair) deliverRev(i int) {
	c := p.rev[i]
	p.rev = append(p.rev[:i], p.rev[i+1:]...)
	var err error
	if c.nack {
		_, err = p.s.OnNack(p.now, c.n)
	} else {
		_, err = p.s.OnAck(p.now, c.a)
	}
	if err != nil {
		p.t.Fatal(err)
	}
	p.collectSender()
}

func (p *pair) fwdLanes() []int {
	var ls []int
	if len(p.prio) > 0 {
		ls = append(ls, -1)
	}
	for i, l := range p.lanes {
		if len(l) > 0 {
			ls = append(ls, i)
		}
	}
	return ls
}

// timers advances the clock to the earliest deadline and fires it. It
// reports false when nobody waits for anything.
func (p *pair) timers() bool {
	ds, sok := p.s.NextDeadline()
	dr, rok := p.r.NextDeadline()
	switch {
	case sok && rok:
		p.now = max(p.now, min(ds, dr))
	case sok:
		p.now = max(p.now, ds)
	case rok:
		p.now = max(p.now, dr)
	default:
		return false
	}
	p.s.OnTimer(p.now)
	p.r.OnTimer(p.now)
	p.collectSender()
	p.collectReceiver()
	return true
}

// settle runs the network in order until nothing moves, then fires timers,
// until both ends are done or the step bound is reached.
func (p *pair) settle(maxRounds int) {
	for range maxRounds {
		if p.done() {
			return
		}
		moved := false
		for p.sendOne() {
			moved = true
		}
		for ls := p.fwdLanes(); len(ls) > 0; ls = p.fwdLanes() {
			p.deliver(ls[0])
			moved = true
		}
		for len(p.rev) > 0 {
			p.deliverRev(0)
			moved = true
		}
		if !moved && !p.timers() {
			p.t.Fatalf("stuck at %v: nothing to send, deliver or wait for", p.now)
		}
	}
	if !p.done() {
		p.t.Fatalf("not done after %d rounds: sender idle %v, receiver completed %d of %d",
			maxRounds, p.s.Idle(), len(p.recvDone), len(p.msgLen))
	}
}

func (p *pair) done() bool {
	return p.s.Idle() && len(p.recvDone) == len(p.msgLen) && len(p.sendDone) == len(p.msgLen)
}

// checkExactlyOnce asserts every byte of every message was placed once.
func (p *pair) checkExactlyOnce() {
	p.t.Helper()
	for msg, counts := range p.placed {
		for off, c := range counts {
			if c != 1 {
				p.t.Fatalf("message %d byte %d placed %d times", msg, off, c)
			}
		}
	}
}

// IRN's example: "packets 1-10 are sent and packet 3 is lost; go-back-N
// resends 8 packets, IRN resends 1."
func TestIRNExample(t *testing.T) {
	for _, c := range []struct {
		mode Mode
		want uint64
	}{{GoBackN, 8}, {SelectiveRepeat, 1}} {
		t.Run(c.mode.String(), func(t *testing.T) {
			scfg, rcfg := DefaultSenderConfig(), DefaultReceiverConfig()
			scfg.Mode, rcfg.Mode = c.mode, c.mode
			scfg.MTU = 1000
			p := newPair(t, scfg, rcfg, 1) // PSNs 1..10 are packets 1..10
			p.fateOf = func(f fwd) fate {
				if !f.probe && f.h.PSN == 3 && f.h.Flags&wire.DataRetx == 0 {
					return drop
				}
				return pass
			}
			p.post(1, 10*1000)
			p.settle(10)
			if got := p.s.Stats().RetxPackets; got != c.want {
				t.Errorf("%v resent %d packets, want %d", c.mode, got, c.want)
			}
			if rto := p.s.Stats().RTOs; rto != 0 {
				t.Errorf("%d RTOs: the NACK alone should recover packet 3", rto)
			}
			p.checkExactlyOnce()
		})
	}
}

// "PFLD handles these cases with tail probes": a silent tail drop is
// recovered by the probe's NACK, not by the RTO.
func TestTailProbeRecoversSilentTailDrop(t *testing.T) {
	for _, probe := range []bool{true, false} {
		scfg := DefaultSenderConfig()
		scfg.TailProbe = probe
		p := newPair(t, scfg, DefaultReceiverConfig(), 0)
		p.fateOf = func(f fwd) fate {
			if !f.probe && f.h.PSN == 2 && f.h.Flags&wire.DataRetx == 0 {
				return drop
			}
			return pass
		}
		p.post(1, 3*4096)
		p.settle(10)
		st := p.s.Stats()
		switch {
		case probe && (st.RTOs != 0 || st.Nacks.Probe != 1):
			t.Errorf("with a tail probe: %d RTOs, %d probe NACKs; want 0 and 1", st.RTOs, st.Nacks.Probe)
		case !probe && st.RTOs != 1:
			t.Errorf("without a tail probe: %d RTOs, want 1", st.RTOs)
		}
		p.checkExactlyOnce()
	}
}

// Property (a): selective repeat delivers every byte to the application
// exactly once under random loss, trims, duplication, reordering across
// subflows and loss of ACKs and NACKs. Go-back-N must too, however slowly.
func TestPropertyExactlyOnce(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		mode := rapid.SampledFrom([]Mode{SelectiveRepeat, GoBackN}).Draw(rt, "mode")
		scfg, rcfg := DefaultSenderConfig(), DefaultReceiverConfig()
		scfg.Mode, rcfg.Mode = mode, mode
		scfg.Subflows = rapid.SampledFrom([]int{1, 2, 4, 8}).Draw(rt, "sigma")
		scfg.MTU = rapid.IntRange(100, 2000).Draw(rt, "mtu")
		scfg.Window = rapid.IntRange(1, 64*1024).Draw(rt, "window")
		scfg.RetxProbe = rapid.Bool().Draw(rt, "retxProbe")
		scfg.ProbeEvery = rapid.IntRange(0, 8).Draw(rt, "probeEvery")
		rcfg.AckEvery = rapid.IntRange(1, 32*1024).Draw(rt, "ackEvery")
		initial := wire.PSN(rapid.Uint32().Draw(rt, "initialPSN"))
		lossy := rapid.Float64Range(0, 0.3).Draw(rt, "loss")
		seed := rapid.Uint64().Draw(rt, "seed")

		p := newPair(rt, scfg, rcfg, initial)
		rng := rand.New(rand.NewPCG(seed, 1))
		p.fateOf = func(fwd) fate {
			switch x := rng.Float64(); {
			case x < lossy/2:
				return drop
			case x < lossy:
				return trim
			case x < lossy*1.3:
				return dup
			}
			return pass
		}
		p.revDrop = func() bool { return rng.Float64() < lossy/3 }
		msgs := rapid.IntRange(1, 5).Draw(rt, "messages")
		for i := range msgs {
			p.post(uint32(100+i), uint32(rapid.IntRange(0, 20000).Draw(rt, "len")))
		}
		p.chaos(rng, 3000)
		p.fateOf = func(fwd) fate { return pass }
		p.revDrop = func() bool { return false }
		p.settle(20000)
		p.checkExactlyOnce()
	})
}

// chaos runs bounded random steps: send, deliver from a random lane,
// deliver a random reverse packet, or let time pass.
func (p *pair) chaos(rng *rand.Rand, steps int) {
	for range steps {
		switch rng.IntN(4) {
		case 0:
			p.sendOne()
		case 1:
			if ls := p.fwdLanes(); len(ls) > 0 {
				p.deliver(ls[rng.IntN(len(ls))])
			}
		case 2:
			if len(p.rev) > 0 {
				p.deliverRev(rng.IntN(len(p.rev)))
			}
		case 3:
			p.now += time.Duration(rng.IntN(5000)) * time.Nanosecond
			p.s.OnTimer(p.now)
			p.r.OnTimer(p.now)
			p.collectSender()
			p.collectReceiver()
		}
	}
}
