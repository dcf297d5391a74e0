package nic_test

import (
	"testing"
	"time"

	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/wire"
)

// onPath wires two engines through a relay that can hold packets, as an
// attacker on the path may: drop and delay are what the threat model
// grants it. With sealed set, every packet carries the order its sender's
// sublayer gives it (start 1, a counter per direction, numbered when the
// packet leaves, as tss.Sealer numbers it), and the receiver gets it
// through ReceiveOrdered, as forgived passes tss.Opened's.
type onPath struct {
	t      *testing.T
	a, b   *nic.Engine
	sealed bool
	now    time.Duration
	buf    []byte
	ctr    map[*nic.Engine]uint64 // the next counter of each sender toward its peer
	// hold, when set, decides for each packet a sends whether the relay
	// keeps it (held) instead of delivering it; drop, whether it loses it.
	hold, drop func(pkt []byte) bool
	held       []heldPkt
}

type heldPkt struct {
	pkt []byte
	ord nic.Order
}

func newOnPath(t *testing.T, sealed bool) *onPath {
	t.Helper()
	r := &onPath{t: t, sealed: sealed, buf: make([]byte, wire.DataLen+4096), ctr: map[*nic.Engine]uint64{}}
	for _, h := range []uint16{1, 2} {
		cfg := nicConfig(h)
		cfg.LineRate = 1e12
		cfg.DCQCN.LineRate = 0
		e, err := nic.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if h == 1 {
			r.a = e
		} else {
			r.b = e
		}
	}
	return r
}

func (r *onPath) deliver(to *nic.Engine, pkt []byte, ord nic.Order) {
	if r.sealed {
		to.ReceiveOrdered(r.now, pkt, 0, ord)
	} else {
		to.Receive(r.now, pkt, 0)
	}
}

// pump moves packets both ways through the relay, then advances time to
// the next deadline, rounds times.
func (r *onPath) pump(rounds int) {
	for range rounds {
		for moved := true; moved; {
			moved = false
			for _, dir := range [2][2]*nic.Engine{{r.a, r.b}, {r.b, r.a}} {
				for {
					pkt, _, ok := dir[0].Transmit(r.now, r.buf)
					if !ok {
						break
					}
					moved = true
					ord := nic.Order{Start: 1, Counter: r.ctr[dir[0]]}
					r.ctr[dir[0]]++
					if dir[0] == r.a && r.hold != nil && r.hold(pkt) {
						r.held = append(r.held, heldPkt{append([]byte(nil), pkt...), ord})
						continue
					}
					if dir[0] == r.a && r.drop != nil && r.drop(pkt) {
						continue
					}
					r.deliver(dir[1], pkt, ord)
				}
			}
		}
		r.a.Advance(r.now)
		r.b.Advance(r.now)
		next := r.now + time.Millisecond
		for _, e := range []*nic.Engine{r.a, r.b} {
			if d, ok := e.NextDeadline(); ok && d > r.now && d < next {
				next = d
			}
		}
		r.now = next
	}
}

// firstTaggedConnect holds the first CONNECT of host 1 that names host
// 2's tag: the packet the attack on the path held.
func (r *onPath) firstTaggedConnect() func([]byte) bool {
	return func(pkt []byte) bool {
		if wire.Header(pkt).Type() != wire.TypeConnect || len(r.held) > 0 {
			return false
		}
		tags, _ := wire.Header(pkt).Tags()
		return tags.Dst != 0
	}
}

// transfer moves one 4 KiB message from host 1 to host 2 on flow 1 and
// requires both ends to complete it without error.
func (r *onPath) transfer(wr uint64) {
	r.t.Helper()
	ra, _ := r.a.RegisterMemory(make([]byte, 4096))
	rb, _ := r.b.RegisterMemory(make([]byte, 4096))
	if err := r.b.PostRecv(nic.RecvReq{Key: keyBA, WR: wr, Region: rb, Length: 4096}); err != nil {
		r.t.Fatal(err)
	}
	if err := r.a.PostSend(r.now, nic.SendReq{Key: keyAB, WR: wr, Region: ra, Length: 4096}); err != nil {
		r.t.Fatal(err)
	}
	done := map[string]bool{}
	for i := 0; i < 2000 && len(done) < 2; i++ {
		r.pump(1)
		for name, e := range map[string]*nic.Engine{"send": r.a, "recv": r.b} {
			for _, c := range e.Completions() {
				if c.WR != wr {
					continue
				}
				if c.Err != nil {
					r.t.Fatalf("%s %d: %v", name, wr, c.Err)
				}
				done[name] = true
			}
		}
	}
	if len(done) < 2 {
		r.t.Fatalf("message %d: completed %v, want send and receive", wr, done)
	}
}

// Attack (issue 39, item 1): "a relay on the path holds the first sealed
// CONNECT that carries a tag and delivers it after the sender has
// recreated its flow": the receiver restarted to the dead incarnation,
// the live one became stale and the flow failed. Host 1's first CONNECT
// naming host 2's tag is held; host 1's flow then moves a message (so
// host 2 binds its first incarnation from the DATA), is destroyed and
// created again, and the new incarnation binds and restarts host 2's
// flow. The held CONNECT, delivered now, is refused (StaleConnects, no
// restart): plain, by the tag host 2 was restarted away from; sealed, by
// its order. The flow then moves another message.
func TestHeldConnectOfBoundIncarnationRefused(t *testing.T) {
	for _, sealed := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "sealed"}[sealed], func(t *testing.T) {
			r := newOnPath(t, sealed)
			r.hold = r.firstTaggedConnect()
			for _, e := range []*nic.Engine{r.a, r.b} {
				if err := e.CreateFlow(0, nic.FlowSpec{Peer: 3 - e.Config().Host, ID: 1}); err != nil {
					t.Fatal(err)
				}
			}
			r.pump(4)
			r.transfer(1)
			if len(r.held) != 1 {
				t.Fatalf("the relay held %d packets, want host 1's first CONNECT naming host 2's tag", len(r.held))
			}
			dead, _ := r.a.Flow(keyAB)
			if rb, _ := r.b.Flow(keyBA); rb.PeerTag != dead.LocalTag {
				t.Fatalf("host 2 bound %#x, want host 1's first incarnation %#x", rb.PeerTag, dead.LocalTag)
			}
			recreate(t, r)
			expectHeldRefused(t, r)
			r.transfer(2)
		})
	}
}

// The same attack when host 2 never bound the incarnation whose CONNECT
// was held: the relay holds that CONNECT and drops everything else of
// the first incarnation, which is then destroyed and created again.
// Sealed, the held CONNECT left host 1 before the packet that bound the
// live incarnation at host 2, and is refused by its order. Plain, host 2
// has nothing to tell the two incarnations apart by: it restarts to the
// dead one, the limit docs/security.md ("Incarnations") states.
func TestHeldConnectOfUnboundIncarnation(t *testing.T) {
	for _, sealed := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "sealed"}[sealed], func(t *testing.T) {
			r := newOnPath(t, sealed)
			r.hold = r.firstTaggedConnect()
			for _, e := range []*nic.Engine{r.a, r.b} {
				if err := e.CreateFlow(0, nic.FlowSpec{Peer: 3 - e.Config().Host, ID: 1}); err != nil {
					t.Fatal(err)
				}
			}
			// Host 1's first CONNECT (naming no tag) reaches host 2, whose
			// ACCEPT binds host 1; host 1's next CONNECT is held, and the
			// relay drops the rest.
			r.drop = func(pkt []byte) bool {
				tags, _ := wire.Header(pkt).Tags()
				return tags.Dst != 0
			}
			r.pump(4)
			if len(r.held) != 1 {
				t.Fatalf("the relay held %d packets, want host 1's first CONNECT naming host 2's tag", len(r.held))
			}
			if ra, _ := r.a.Flow(keyAB); ra.PeerTag == 0 {
				t.Fatal("host 1 did not bind host 2's tag")
			}
			if rb, _ := r.b.Flow(keyBA); rb.PeerTag != 0 {
				t.Fatalf("host 2 bound %#x; want nothing of host 1's first incarnation", rb.PeerTag)
			}
			r.drop = nil
			recreate(t, r)
			if !sealed {
				deliverHeld(r)
				live, _ := r.a.Flow(keyAB)
				if rb, _ := r.b.Flow(keyBA); rb.PeerTag == live.LocalTag || r.b.Stats().StaleConnects != 0 {
					t.Errorf("plain: host 2 kept peer %#x (%d stale connects); plain has no order to refuse an incarnation it never bound",
						rb.PeerTag, r.b.Stats().StaleConnects)
				}
				return
			}
			expectHeldRefused(t, r)
			r.transfer(1)
		})
	}
}

// recreate destroys host 1's flow and creates it again, and waits for
// host 2 to bind the new incarnation.
func recreate(t *testing.T, r *onPath) {
	t.Helper()
	if err := r.a.DestroyFlow(keyAB); err != nil {
		t.Fatal(err)
	}
	r.a.Completions()
	if err := r.a.CreateFlow(r.now, nic.FlowSpec{Peer: 2, ID: 1}); err != nil {
		t.Fatal(err)
	}
	r.pump(4)
	live, _ := r.a.Flow(keyAB)
	if rb, _ := r.b.Flow(keyBA); rb.PeerTag != live.LocalTag {
		t.Fatalf("host 2 bound %#x, want host 1's new incarnation %#x", rb.PeerTag, live.LocalTag)
	}
}

func deliverHeld(r *onPath) {
	for _, h := range r.held {
		r.deliver(r.b, h.pkt, h.ord)
	}
	r.held = nil
	r.pump(4)
}

// expectHeldRefused delivers the held CONNECT to host 2 and requires it
// refused as a stale CONNECT: host 2 keeps host 1's live incarnation,
// restarts no more, and no flow fails.
func expectHeldRefused(t *testing.T, r *onPath) {
	t.Helper()
	before := r.b.Stats()
	rbBefore, _ := r.b.Flow(keyBA)
	deliverHeld(r)
	live, _ := r.a.Flow(keyAB)
	rb, _ := r.b.Flow(keyBA)
	st := r.b.Stats()
	if st.StaleConnects != before.StaleConnects+1 || rb.PeerTag != live.LocalTag || rb.Stats.PeerRestarts != rbBefore.Stats.PeerRestarts {
		t.Errorf("the held CONNECT: host 2 bound %#x (live %#x), peer restarts %d -> %d, stale connects %d -> %d; want it refused",
			rb.PeerTag, live.LocalTag, rbBefore.Stats.PeerRestarts, rb.Stats.PeerRestarts, before.StaleConnects, st.StaleConnects)
	}
	if r.a.Stats().FlowsFailed+st.FlowsFailed != 0 || rb.Failed != "" {
		t.Errorf("flows failed: host 1 %d, host 2 %d (%q)", r.a.Stats().FlowsFailed, st.FlowsFailed, rb.Failed)
	}
}
