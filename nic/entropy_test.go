package nic_test

import (
	"errors"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/wire"
)

func TestParseEntropyNamesEveryPolicy(t *testing.T) {
	for _, e := range []nic.Entropy{nic.EntropySingle, nic.EntropySpray, nic.EntropySubflows, nic.EntropyMessage} {
		got, err := nic.ParseEntropy(e.String())
		if err != nil || got != e {
			t.Errorf("ParseEntropy(%q) = %v, %v; want %v", e.String(), got, err, e)
		}
	}
	if nic.EntropyMessage != 3 || nic.EntropyMessage.String() != "message" {
		t.Fatalf("message is %d %q: appended after the existing policies, named message", nic.EntropyMessage, nic.EntropyMessage)
	}
	if _, err := nic.ParseEntropy("ecmp"); !errors.Is(err, nic.ErrBadRequest) {
		t.Fatalf("ParseEntropy(ecmp): %v", err)
	}
	e, err := nic.New(nicConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateFlow(0, nic.FlowSpec{Peer: 2, ID: 1, Entropy: nic.EntropyMessage + 1}); !errors.Is(err, nic.ErrBadRequest) {
		t.Fatalf("a policy past message: %v", err)
	}
}

// dataEntropies runs msgs messages of size bytes over flow id of a pair
// with the given policy, dropping the first transmission of every PSN
// drop says to drop (the RTO resends it), and returns the entropy of
// every data packet, by message, first transmissions and retransmissions
// apart.
func dataEntropies(t *testing.T, ent nic.Entropy, id uint32, msgs, size int, drop func(wire.Data) bool) (first, retx map[uint32][]uint16) {
	t.Helper()
	p := newPairWith(t, size, func(c *nic.Config) { c.Sender.Window = 256 << 10 })
	a, b := nic.FlowKey{Peer: 2, ID: id}, nic.FlowKey{Peer: 1, ID: id}
	if err := p.a.CreateFlow(0, nic.FlowSpec{Peer: 2, ID: id, Class: nic.ClassOther, Entropy: ent}); err != nil {
		t.Fatal(err)
	}
	if err := p.b.CreateFlow(0, nic.FlowSpec{Peer: 1, ID: id, Class: nic.ClassOther, Entropy: ent}); err != nil {
		t.Fatal(err)
	}
	p.exchange()
	first, retx = map[uint32][]uint16{}, map[uint32][]uint16{}
	done, posted := 0, 0
	for step := 0; done < msgs; step++ {
		if step > 1e6 {
			t.Fatalf("%d of %d messages done after %d steps", done, msgs, step)
		}
		// Keep 16 messages in flight.
		for ; posted < msgs && posted-done < 16; posted++ {
			if err := p.b.PostRecv(nic.RecvReq{Key: b, WR: uint64(posted), Region: p.region[1], Length: size}); err != nil {
				t.Fatal(err)
			}
			if err := p.a.PostSend(p.now, nic.SendReq{Key: a, WR: uint64(posted), Region: p.region[0], Length: size}); err != nil {
				t.Fatal(err)
			}
		}
		for moved := true; moved; {
			moved = false
			for {
				pkt, tos, ok := p.a.Transmit(p.now, p.buf)
				if !ok {
					break
				}
				moved = true
				if wire.Header(pkt).Type() == wire.TypeData {
					d := wire.Data(pkt)
					if d.Flow() == id {
						if d.Flags()&wire.DataRetx != 0 {
							retx[d.Msg()] = append(retx[d.Msg()], d.Entropy())
						} else {
							first[d.Msg()] = append(first[d.Msg()], d.Entropy())
							if drop != nil && drop(d) {
								continue
							}
						}
					}
				}
				p.b.Receive(p.now, pkt, tos)
			}
			for {
				pkt, tos, ok := p.b.Transmit(p.now, p.buf)
				if !ok {
					break
				}
				moved = true
				p.a.Receive(p.now, pkt, tos)
			}
		}
		for _, c := range p.b.Completions() {
			if c.Err != nil {
				t.Fatal(c.Err)
			}
			done++
		}
		p.a.Completions()
		p.a.Advance(p.now)
		p.b.Advance(p.now)
		next := p.now + time.Microsecond
		for _, e := range []*nic.Engine{p.a, p.b} {
			if d, ok := e.NextDeadline(); ok && d > p.now && d < next {
				next = d
			}
		}
		p.now = next
	}
	return first, retx
}

// A path per message: every packet of a message, and every
// retransmission of it, carries one entropy value; over many messages the
// values cover the entropy space evenly; and the same seed gives the
// same values.
func TestMessageEntropyIsOnePathPerMessage(t *testing.T) {
	const msgs, size = 4096, 3 * 4096 // three packets a message
	dropped := 0
	drop := func(d wire.Data) bool {
		if d.PSN()%97 == 5 {
			dropped++
			return true
		}
		return false
	}
	first, retx := dataEntropies(t, nic.EntropyMessage, 2, msgs, size, drop)
	if len(first) != msgs {
		t.Fatalf("%d messages seen, want %d", len(first), msgs)
	}
	if dropped == 0 || len(retx) == 0 {
		t.Fatalf("%d packets dropped, %d messages retransmitted: the test exercises no retransmission", dropped, len(retx))
	}
	value := make(map[uint32]uint16, msgs)
	for m, es := range first {
		if len(es) != 3 {
			t.Fatalf("message %d: %d first transmissions, want 3", m, len(es))
		}
		for _, e := range es {
			if e != es[0] {
				t.Fatalf("message %d carries entropies %v: want one value", m, es)
			}
		}
		value[m] = es[0]
	}
	for m, es := range retx {
		for _, e := range es {
			if e != value[m] {
				t.Fatalf("message %d: retransmission with entropy %#x, its packets carried %#x", m, e, value[m])
			}
		}
	}
	// Sixteen buckets of the top four bits: 256 messages expected in
	// each. The chi-square of 15 degrees of freedom exceeds 40 with
	// probability 5e-4; a constant, a counter in the low bits or a
	// value shared by runs of messages fails it.
	var buckets [16]int
	distinct := map[uint16]bool{}
	for _, v := range value {
		buckets[v>>12]++
		distinct[v] = true
	}
	var chi2 float64
	for _, n := range buckets {
		d := float64(n) - msgs/16.0
		chi2 += d * d / (msgs / 16.0)
	}
	if chi2 > 40 {
		t.Fatalf("entropy values by top nibble %v: chi-square %.1f over 15 degrees of freedom", buckets, chi2)
	}
	// 4096 draws from 65536 values: about 124 collide; a hash of the
	// message id alone, folded small, would collide far more.
	if len(distinct) < msgs-300 {
		t.Fatalf("%d distinct values among %d messages", len(distinct), msgs)
	}
	// Low bits too: consecutive messages must not walk the space.
	var low [16]int
	for _, v := range value {
		low[v&15]++
	}
	chi2 = 0
	for _, n := range low {
		d := float64(n) - msgs/16.0
		chi2 += d * d / (msgs / 16.0)
	}
	if chi2 > 40 {
		t.Fatalf("entropy values by low nibble %v: chi-square %.1f", low, chi2)
	}
	again, _ := dataEntropies(t, nic.EntropyMessage, 2, 64, size, nil)
	for m, es := range again {
		if es[0] != value[m] {
			t.Fatalf("message %d: entropy %#x in a second run with the same seed, %#x in the first", m, es[0], value[m])
		}
	}
	t.Logf("%d messages, %d distinct values, chi-square %.1f; %d packets dropped, %d messages retransmitted", msgs, len(distinct), chi2, dropped, len(retx))
}

// A single path stays one value for the whole flow: the policy message
// is a new choice beside it, not a change of it.
func TestSingleEntropyIsOnePathPerFlow(t *testing.T) {
	first, _ := dataEntropies(t, nic.EntropySingle, 2, 64, 2*4096, nil)
	v := first[0][0]
	for m, es := range first {
		for _, e := range es {
			if e != v {
				t.Fatalf("single: message %d carries %#x, message 0 %#x", m, e, v)
			}
		}
	}
}
