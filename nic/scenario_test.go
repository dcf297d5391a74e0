package nic_test

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/reliability"
	"github.com/forgive-emu/forgive/sim"
	"github.com/forgive-emu/forgive/switchcore"
	"github.com/forgive-emu/forgive/wire"
)

// star is a single switch with one host per port, scaled down so a test
// runs in milliseconds of CPU: 1 Gb/s links, 2 us of propagation, 4 KiB
// packets, a 64 KiB data queue marking from 16 KiB.
type star struct {
	t     *testing.T
	sim   *sim.Sim
	nics  []*nic.Engine
	comps [][]nic.Completion
}

const (
	testRate  = 1e9
	testDelay = 2 * time.Microsecond
)

func starConfig(hosts int, trim switchcore.TrimMode) switchcore.Config {
	cfg := switchcore.Config{Routes: map[uint16][]switchcore.PortID{}, Seed: 7}
	for i := 0; i < hosts; i++ {
		cfg.Ports = append(cfg.Ports, switchcore.PortConfig{
			Rate: testRate, Delay: testDelay, DataCap: 64 << 10, Trim: trim,
			ECN: switchcore.ECNConfig{Enabled: true, KMin: 16 << 10, KMax: 48 << 10, PMax: 0.2},
		})
		cfg.Routes[uint16(i+1)] = []switchcore.PortID{switchcore.PortID(i)}
	}
	return cfg
}

func nicConfig(host uint16) nic.Config {
	cfg := nic.DefaultConfig(host, testRate)
	cfg.Sender.Window = 64 << 10
	// IRN's timeouts assume microsecond queues; a full 64 KiB queue at
	// 1 Gb/s holds 0.5 ms, so both timeouts scale with it.
	cfg.Sender.RTOLow, cfg.Sender.RTOHigh = 400*time.Microsecond, 2*time.Millisecond
	cfg.DCQCN = congestion.DefaultDCQCN(testRate)
	cfg.Seed = 11
	return cfg
}

func newStar(t *testing.T, hosts int, trim switchcore.TrimMode, tweak func(*nic.Config)) *star {
	t.Helper()
	return newStarIn(t, sim.New(reliability.DefaultMTU), hosts, trim, tweak)
}

// newStarIn builds the star in sm: a payload-free simulation
// (sim.NewPayloadFree) makes every NIC payload-free and every region a
// length without memory.
func newStarIn(t *testing.T, sm *sim.Sim, hosts int, trim switchcore.TrimMode, tweak func(*nic.Config)) *star {
	t.Helper()
	sw, err := switchcore.New(starConfig(hosts, trim))
	if err != nil {
		t.Fatal(err)
	}
	s := &star{t: t, sim: sm, comps: make([][]nic.Completion, hosts+1)}
	si := s.sim.AddSwitch(sw)
	s.nics = append(s.nics, nil) // hosts are numbered from 1
	for h := 1; h <= hosts; h++ {
		cfg := nicConfig(uint16(h))
		cfg.NoPayload = sm.PayloadFree()
		if tweak != nil {
			tweak(&cfg)
		}
		n, err := nic.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.sim.AddHost(n, si, switchcore.PortID(h-1), testDelay); err != nil {
			t.Fatal(err)
		}
		s.nics = append(s.nics, n)
	}
	s.sim.OnCompletion = func(host int, c nic.Completion) { s.comps[host+1] = append(s.comps[host+1], c) }
	return s
}

// flow creates a flow between two hosts on both ends.
func (s *star) flow(a, b uint16, id uint32, class nic.Class) {
	s.t.Helper()
	for _, e := range [][2]uint16{{a, b}, {b, a}} {
		if err := s.nics[e[0]].CreateFlow(s.sim.Now(), nic.FlowSpec{Peer: e[1], ID: id, Class: class}); err != nil {
			s.t.Fatal(err)
		}
	}
}

func (s *star) region(host uint16, size int, fill byte) ([]byte, nic.RegionID) {
	s.t.Helper()
	if s.sim.PayloadFree() {
		id, err := s.nics[host].RegisterLength(size)
		if err != nil {
			s.t.Fatal(err)
		}
		return nil, id
	}
	mem := make([]byte, size)
	if fill != 0 {
		r := rand.New(rand.NewPCG(uint64(host), uint64(fill)))
		for i := range mem {
			mem[i] = byte(r.Uint32()) | 1 // never zero, so forgiven zeros stand out
		}
	}
	id, err := s.nics[host].RegisterMemory(mem)
	if err != nil {
		s.t.Fatal(err)
	}
	return mem, id
}

func (s *star) run(limit time.Duration, done func() bool) {
	s.t.Helper()
	if err := s.sim.RunUntil(done, limit); err != nil {
		s.t.Fatal(err)
	}
}

func (s *star) recvDone(host uint16, n int) func() bool {
	return func() bool {
		c := 0
		for _, x := range s.comps[host] {
			if x.Kind == nic.WorkRecv {
				c++
			}
		}
		return c >= n
	}
}

// incast sends size bytes from each sender to host 1 in one message each,
// on flows of class, and returns the receive buffers and source buffers.
// The receive buffers start with non-zero bytes of their own, as reused
// memory does: a forgiven range reads zero only if the NIC zero-filled it.
func (s *star) incast(senders []uint16, size int, class nic.Class, step budget.StepID) (dst [][]byte, src [][]byte) {
	s.t.Helper()
	for i, h := range senders {
		id := uint32(100 + i)
		s.flow(h, 1, id, class)
		m, r := s.region(1, size, byte(0x80+i))
		if err := s.nics[1].PostRecv(nic.RecvReq{Key: nic.FlowKey{Peer: h, ID: id}, WR: uint64(i), Region: r, Length: size, Step: step}); err != nil {
			s.t.Fatal(err)
		}
		sm, sr := s.region(h, size, byte(i+1))
		if err := s.nics[h].PostSend(s.sim.Now(), nic.SendReq{Key: nic.FlowKey{Peer: 1, ID: id}, WR: uint64(i), Region: sr, Length: size}); err != nil {
			s.t.Fatal(err)
		}
		dst, src = append(dst, m), append(src, sm)
	}
	return dst, src
}

// switchMarks returns how many packets the switch trimmed and ECN-marked.
func switchMarks(s *star) (trimmed, marked uint64) {
	st := s.sim.Switch(0).Stats()
	for _, p := range st.Ports {
		for _, c := range p.Classes {
			trimmed += c.Trimmed.Packets
			marked += c.Marked.Packets
		}
	}
	return trimmed, marked
}

// A transfer of non-gradient data through a bottleneck that trims and marks
// arrives byte-exact: "Only gradients are forgivable. Everything else is
// requested for retransmission."
func TestIncastNonGradientArrivesExact(t *testing.T) {
	s := newStar(t, 4, switchcore.TrimNDP, nil)
	dst, src := s.incast([]uint16{2, 3, 4}, 2<<20, nic.ClassTensor, 0)
	s.run(5*time.Second, s.recvDone(1, 3))
	for i := range dst {
		if !bytes.Equal(dst[i], src[i]) {
			t.Fatalf("message from host %d differs from what was sent", i+2)
		}
	}
	for _, c := range s.comps[1] {
		if c.Err != nil || len(c.Forgiven) != 0 {
			t.Fatalf("completion %+v: want success with nothing forgiven", c)
		}
	}
	if trimmed, marked := switchMarks(s); trimmed == 0 || marked == 0 {
		t.Fatalf("switch trimmed %d and marked %d packets; the 3:1 incast should do both", trimmed, marked)
	}
	var retx uint64
	for h := uint16(2); h <= 4; h++ {
		r, _ := s.nics[h].Flow(nic.FlowKey{Peer: 1, ID: uint32(98 + h)})
		retx += r.Stats.RetxPackets
	}
	if retx == 0 {
		t.Fatal("trimmed packets were never retransmitted")
	}
}

// A gradient transfer inside an open step completes with forgiven bytes
// within the budget, the completion lists the forgiven ranges, and those
// ranges are zero in the receiver's memory ("the application gets a
// completion that lists the byte ranges that were forgiven (zero-filled in
// its memory), so nothing is silently lost").
func TestIncastGradientForgivesWithinBudget(t *testing.T) {
	s := newStar(t, 4, switchcore.TrimNDP, nil)
	const size = 2 << 20
	nonCritical := false
	started := false // the step begins at a nonzero time
	s.sim.At(time.Millisecond, func() { started = true })
	s.run(time.Second, func() bool { return started })
	began := s.sim.Now()
	if _, err := s.nics[1].BeginStep(began, nic.StepReq{Step: 4, Critical: &nonCritical, Expected: 3 * size}); err != nil {
		t.Fatal(err)
	}
	dst, src := s.incast([]uint16{2, 3, 4}, size, nic.ClassGradient, 4)
	s.run(5*time.Second, s.recvDone(1, 3))
	ended := s.sim.Now()
	s.nics[1].EndStep(ended, 4)

	rec, ok := s.nics[1].StepRecord(4)
	if !ok {
		t.Fatal("no record of step 4")
	}
	if err := s.nics[1].CheckStep(4); err != nil {
		t.Fatal(err)
	}
	if rec.Forgiven == 0 {
		t.Fatalf("nothing forgiven on a congested non-critical step: %+v", rec)
	}
	if rec.Forgiven > rec.Budget || rec.Received+rec.Forgiven != rec.Expected {
		t.Fatalf("record breaks the spec: %+v", rec)
	}
	// The trim-level accounting runs on the engine's clock: the span is
	// begin to end, and an incast trims as its queue first fills, in the
	// step's first fifth, where vesting forgives less of it than of the
	// trims of the last fifth.
	if rec.Span != ended-began || rec.Span <= 0 || rec.TrafficSpan <= 0 || rec.TrafficSpan >= rec.Span {
		t.Fatalf("span %v, want %v; traffic span %v, want less (the first byte crosses the fabric)", rec.Span, ended-began, rec.TrafficSpan)
	}
	if rec.FirstFifthTrimmed == 0 || rec.FirstFifthForgiven > rec.FirstFifthTrimmed ||
		rec.LastFifthForgiven > rec.LastFifthTrimmed || rec.FirstFifthForgiven+rec.LastFifthForgiven > rec.Forgiven ||
		rec.LastFifthTrimmed == 0 || rec.FirstFifthTrimmed <= rec.LastFifthTrimmed ||
		float64(rec.FirstFifthForgiven)/float64(rec.FirstFifthTrimmed) >= float64(rec.LastFifthForgiven)/float64(rec.LastFifthTrimmed) {
		t.Fatalf("fifths: %+v", rec)
	}
	var listed int64
	for _, c := range s.comps[1] {
		if c.Err != nil {
			t.Fatal(c.Err)
		}
		m, want := dst[c.WR], src[c.WR]
		forgiven := make([]bool, size)
		for _, r := range c.Forgiven {
			listed += int64(r.Len())
			for i := r.Start; i < r.End; i++ {
				forgiven[i] = true
				if m[i] != 0 {
					t.Fatalf("forgiven byte %d of message %d is %#x, want 0", i, c.WR, m[i])
				}
			}
		}
		for i := range m {
			if !forgiven[i] && m[i] != want[i] {
				t.Fatalf("byte %d of message %d was neither received nor forgiven", i, c.WR)
			}
		}
	}
	if listed != rec.Forgiven {
		t.Fatalf("completions list %d forgiven bytes, the ledger %d", listed, rec.Forgiven)
	}
}

// "An exempt sender ignores ECN marks as well as trims": with FORGIVE, the
// gradient senders of an open non-critical step ignore CNPs while the
// budget lasts; without it (the DCQCN baseline) they cut their rate.
func TestExemptSendersIgnoreCNPs(t *testing.T) {
	run := func(forgive bool) (obeyed, ignored uint64) {
		s := newStar(t, 4, switchcore.TrimNDP, func(c *nic.Config) { c.Forgive = forgive })
		const size = 1 << 20
		nc := false
		if _, err := s.nics[1].BeginStep(s.sim.Now(), nic.StepReq{Step: 1, Critical: &nc, Expected: 3 * size}); err != nil {
			t.Fatal(err)
		}
		s.incast([]uint16{2, 3, 4}, size, nic.ClassGradient, 1)
		s.run(5*time.Second, s.recvDone(1, 3))
		for h := uint16(2); h <= 4; h++ {
			r, _ := s.nics[h].Flow(nic.FlowKey{Peer: 1, ID: uint32(98 + h)})
			obeyed += r.CC.CNPsObeyed
			ignored += r.CC.CNPsIgnored
		}
		return obeyed, ignored
	}
	if obeyed, ignored := run(false); obeyed == 0 || ignored != 0 {
		t.Fatalf("DCQCN baseline: %d CNPs obeyed, %d ignored; want >0 and 0", obeyed, ignored)
	}
	if _, ignored := run(true); ignored == 0 {
		t.Fatal("FORGIVE: no CNP was ignored by an exempt sender")
	}
}

// A peer that stops answering fails the flow with a clear error instead of
// hanging.
func TestSilentPeerFailsFlow(t *testing.T) {
	s := newStar(t, 2, switchcore.TrimNDP, func(c *nic.Config) { c.FailAfter = 50 * time.Millisecond })
	// Only host 2 knows the flow: host 1 drops everything as unknown.
	if err := s.nics[2].CreateFlow(0, nic.FlowSpec{Peer: 1, ID: 9, Class: nic.ClassOther}); err != nil {
		t.Fatal(err)
	}
	_, r := s.region(2, 64<<10, 1)
	if err := s.nics[2].PostSend(0, nic.SendReq{Key: nic.FlowKey{Peer: 1, ID: 9}, WR: 77, Region: r, Length: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	s.run(time.Second, func() bool { return len(s.comps[2]) > 0 })
	c := s.comps[2][0]
	if c.WR != 77 || !errors.Is(c.Err, nic.ErrPeerTimeout) {
		t.Fatalf("completion %+v, want WR 77 failed with ErrPeerTimeout", c)
	}
	if err := s.nics[2].PostSend(s.sim.Now(), nic.SendReq{Key: nic.FlowKey{Peer: 1, ID: 9}, WR: 78, Region: r, Length: 1}); !errors.Is(err, nic.ErrFlowFailed) {
		t.Fatalf("posting on a failed flow: %v, want ErrFlowFailed", err)
	}
}

// The seed's control: "a control run with selective repeat cut the same
// burst's completion time from 1.8 s to 29 ms". Go-back-N resends every
// packet after a loss, so the same incast costs it far more retransmitted
// bytes and time than selective repeat.
func TestGoBackNAmplifiesRetransmissions(t *testing.T) {
	run := func(mode reliability.Mode) (retx uint64, took time.Duration) {
		// Without congestion control the incast trims heavily, as in the
		// seed's burst.
		s := newStar(t, 4, switchcore.TrimNDP, func(c *nic.Config) {
			c.Sender.Mode, c.Receiver.Mode = mode, mode
			c.CC = congestion.KindNone
		})
		dst, src := s.incast([]uint16{2, 3, 4}, 1<<20, nic.ClassOther, 0)
		s.run(20*time.Second, s.recvDone(1, 3))
		for i := range dst {
			if !bytes.Equal(dst[i], src[i]) {
				t.Fatalf("%v: message %d corrupted", mode, i)
			}
		}
		for h := uint16(2); h <= 4; h++ {
			r, _ := s.nics[h].Flow(nic.FlowKey{Peer: 1, ID: uint32(98 + h)})
			retx += r.Stats.RetxBytes
		}
		return retx, s.sim.Now()
	}
	srRetx, srTime := run(reliability.SelectiveRepeat)
	gbnRetx, gbnTime := run(reliability.GoBackN)
	t.Logf("selective repeat: %d bytes retransmitted, %v; go-back-N: %d bytes, %v", srRetx, srTime, gbnRetx, gbnTime)
	if gbnRetx <= 2*srRetx || gbnTime <= srTime {
		t.Fatalf("go-back-N retransmitted %d bytes in %v, selective repeat %d in %v: want go-back-N far worse",
			gbnRetx, gbnTime, srRetx, srTime)
	}
}

// A bound flow whose peer goes silent mid-transfer fails FailAfter after
// the last acknowledgement moved its oldest PSN (checkProgress on a
// bound flow), not earlier and not later, however many timeouts resend
// in between.
func TestBoundFlowFailsWhenPeerGoesSilent(t *testing.T) {
	const msg = 1 << 20
	p := newPair(t, msg)
	key := nic.FlowKey{Peer: 2, ID: 1}
	if err := p.b.PostRecv(nic.RecvReq{Key: nic.FlowKey{Peer: 1, ID: 1}, WR: 1, Region: p.region[1], Length: msg}); err != nil {
		t.Fatal(err)
	}
	if err := p.a.PostSend(p.now, nic.SendReq{Key: key, WR: 2, Region: p.region[0], Length: msg}); err != nil {
		t.Fatal(err)
	}
	failAfter := p.a.Config().FailAfter
	// Run the pair for a while, noting when the last ACK reached a.
	var lastAck time.Duration
	for range 50 {
		p.exchangeSeen(func(to *nic.Engine, pkt []byte) {
			if to == p.a && wire.Type(pkt[0]&0x0F) == wire.TypeAck {
				lastAck = p.now
			}
		})
		p.a.Advance(p.now)
		p.b.Advance(p.now)
		p.now += time.Microsecond
	}
	if lastAck < 40*time.Microsecond {
		t.Fatalf("last ACK at %v: the transfer did not run", lastAck)
	}
	if c := p.a.Completions(); len(c) != 0 {
		t.Fatalf("completions before the peer went silent: %+v", c)
	}
	// b is gone: a runs alone, woken at its deadlines, its packets lost.
	for now, steps := p.now, 0; now < 3*failAfter; steps++ {
		if steps == 1e6 {
			t.Fatalf("stuck at %v: a's deadline does not move", now)
		}
		for {
			if _, _, ok := p.a.Transmit(now, p.buf); !ok {
				break
			}
		}
		p.a.Advance(now)
		if c := p.a.Completions(); len(c) > 0 {
			if c[0].WR != 2 || !errors.Is(c[0].Err, nic.ErrPeerTimeout) {
				t.Fatalf("completion %+v, want WR 2 failed with ErrPeerTimeout", c[0])
			}
			if now <= lastAck-10*time.Microsecond+failAfter || now > lastAck+failAfter+1 {
				t.Fatalf("failed at %v, last ACK at %v: want FailAfter (%v) after the last progress", now, lastAck, failAfter)
			}
			r, _ := p.a.Flow(key)
			if r.Sender.RTOs == 0 {
				t.Fatal("no retransmission timeout fired while the peer was silent")
			}
			return
		}
		d, ok := p.a.NextDeadline()
		if !ok {
			t.Fatal("no deadline while a send is outstanding")
		}
		now = max(d, now)
	}
	t.Fatalf("the flow did not fail within %v of silence", 3*failAfter)
}
