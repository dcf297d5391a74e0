package nic_test

import (
	"testing"

	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/internal/race"
	"github.com/forgive-emu/forgive/nic"
)

// TestHostToHostAllocatesNothing is the NIC's allocation gate: the whole
// per-packet path of two engines back to back (Transmit, Receive, Advance,
// the ACKs and the completions, as BenchmarkHostToHost drives it)
// allocates nothing per packet once the transfer runs.
func TestHostToHostAllocatesNothing(t *testing.T) { hostToHostAllocatesNothing(t, nil) }

// The same gate under NSCC: its window check and its work on every ACK.
func TestHostToHostAllocatesNothingNSCC(t *testing.T) {
	hostToHostAllocatesNothing(t, func(c *nic.Config) { c.CC = congestion.KindNSCC })
}

func hostToHostAllocatesNothing(t *testing.T, tweak func(*nic.Config)) {
	const msg = 1 << 20
	p := newPairWith(t, msg, tweak)
	key := nic.FlowKey{Peer: 2, ID: 1}
	back := nic.FlowKey{Peer: 1, ID: 1}
	var posted, done int
	post := func() {
		if err := p.b.PostRecv(nic.RecvReq{Key: back, Region: p.region[1], Length: msg}); err != nil {
			t.Fatal(err)
		}
		if err := p.a.PostSend(p.now, nic.SendReq{Key: key, Region: p.region[0], Length: msg}); err != nil {
			t.Fatal(err)
		}
		posted++
	}
	var data int
	round := func() {
		data += p.pump()
		if n := len(p.a.Completions()); n > 0 {
			done += n
			post()
		}
		p.b.Completions()
	}
	post()
	for data < 1000 { // past the first messages: tables and queues at their steady size
		round()
	}
	before := data
	allocs := testing.AllocsPerRun(2000, round)
	pkts := data - before
	if pkts < 2000 || done < 3 {
		t.Fatalf("%d data packets in 2000 rounds and %d messages done, want more", pkts, done)
	}
	perPacket := allocs * 2000 / float64(pkts)
	if race.Enabled {
		t.Skipf("the race detector allocates on its own (%v allocations per packet here): this gate holds without -race", perPacket)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per round (%.3f per data packet), want 0", allocs, perPacket)
	}
}
