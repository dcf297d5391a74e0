package reliability

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/wire"
)

// The subject of the table test: bytes [100,200) of a 300-byte message,
// sent as PSN 1. Bytes [0,100) never arrive, so rcv_nxt stays at 0 and the
// subject stays in the scoreboard's span list.
const (
	tMsg    = 1
	tOff    = 100
	tLen    = 100
	tMsgLen = 300
)

// TestScoreboardTable walks every cell of the seed's table:
//
//	scoreboard value  trimmed header reports the range  data packet arrives
//	absent            run OnTrimmedHeader               Received, ACK
//	Requested         run OnTrimmedHeader               Received, ACK
//	Forgiven          ACK, no charge                    discard the payload, no credit back
//	Received          duplicate ACK, no charge          Received, ACK
//
// with Requested split into Requested (no budget counts it) and
// Outstanding (a budget does). Each event arrives twice over: as a
// retransmission with the original PSN, and re-segmented under a new PSN,
// which bypasses the PSN bitmap and reaches the scoreboard.
func TestScoreboardTable(t *testing.T) {
	setups := map[State]func(*fakeDecider, *Receiver, *testing.T){
		Absent: func(*fakeDecider, *Receiver, *testing.T) {},
		Requested: func(d *fakeDecider, r *Receiver, t *testing.T) {
			d.answer(false, false)
			mustPacket(t, r, trimmed(1, tMsg, tOff, tLen, tMsgLen))
		},
		Outstanding: func(d *fakeDecider, r *Receiver, t *testing.T) {
			d.answer(false, true)
			mustPacket(t, r, trimmed(1, tMsg, tOff, tLen, tMsgLen))
		},
		Forgiven: func(d *fakeDecider, r *Receiver, t *testing.T) {
			d.answer(true, true)
			mustPacket(t, r, trimmed(1, tMsg, tOff, tLen, tMsgLen))
		},
		Received: func(_ *fakeDecider, r *Receiver, t *testing.T) {
			mustPacket(t, r, data(1, tMsg, tOff, tLen, tMsgLen))
		},
	}
	type want struct {
		trim     *trimCall    // the OnTrim call expected, if any
		arrival  *arrivalCall // the OnArrival call expected, if any
		verdict  Verdict      // with a re-segmented PSN
		samePSN  Verdict      // with the original PSN
		state    State        // of the subject afterwards
		acks     int
		nacks    int
		placeLen uint32
	}
	rows := []struct {
		from  State
		trim  bool
		want  want
		quote string
	}{
		{Absent, true, want{trim: &trimCall{tMsg, 100, 100}, verdict: Repaired, samePSN: Repaired, state: Requested, nacks: 1},
			"absent: trimmed header reports the range: run OnTrimmedHeader"},
		{Absent, false, want{arrival: &arrivalCall{tMsg, 100, 0}, verdict: Placed, samePSN: Placed, state: Received, acks: 1, placeLen: 100},
			"absent: data packet arrives: Received, ACK"},
		{Requested, true, want{trim: &trimCall{tMsg, 100, 100}, verdict: Repaired, samePSN: Repaired, state: Requested, nacks: 1},
			"Requested: run OnTrimmedHeader (no budget counted it, so all 100 bytes are new to it)"},
		{Requested, false, want{arrival: &arrivalCall{tMsg, 100, 0}, verdict: Placed, samePSN: Placed, state: Received, acks: 1, placeLen: 100},
			"Requested: data packet arrives: Received, ACK"},
		{Outstanding, true, want{trim: &trimCall{tMsg, 100, 0}, verdict: Repaired, samePSN: Repaired, state: Outstanding, nacks: 1},
			"A range trimmed again is already outstanding. Count only its new bytes."},
		{Outstanding, false, want{arrival: &arrivalCall{tMsg, 100, 100}, verdict: Placed, samePSN: Placed, state: Received, acks: 1, placeLen: 100},
			"outstanding: An arrival or a forgiveness takes them off."},
		{Forgiven, true, want{verdict: Acked, samePSN: Acked, state: Forgiven, acks: 1},
			"Forgiven: trimmed header: ACK, no charge"},
		{Forgiven, false, want{verdict: Discarded, samePSN: Duplicate, state: Forgiven, acks: 1},
			"Forgiven: data packet arrives: discard the payload, no credit back"},
		{Received, true, want{verdict: Acked, samePSN: Acked, state: Received, acks: 1},
			"Received: trimmed header: duplicate ACK, no charge"},
		{Received, false, want{verdict: Duplicate, samePSN: Duplicate, state: Received, acks: 1},
			"Received: data packet arrives: Received, ACK (a duplicate ACK)"},
	}
	for _, row := range rows {
		for _, psn := range []wire.PSN{1, 2} {
			name := row.from.String() + "/data"
			if row.trim {
				name = row.from.String() + "/trimmed"
			}
			if psn == 2 {
				name += "/resegmented"
			}
			t.Run(name, func(t *testing.T) {
				t.Log(row.quote)
				d := &fakeDecider{}
				// Ordering is not the subject here: spraying turns gap inference off.
				r := newReceiver(t, d, func(c *ReceiverConfig) { c.AckEvery, c.SprayPerPacket = 1, true })
				setups[row.from](d, r, t)
				if sb, ok := r.Scoreboard(tMsg); ok != (row.from != Absent) || ok && sb.StateAt(tOff) != row.from {
					t.Fatalf("setup did not leave the subject %v", row.from)
				}
				d.trims, d.arrivals = nil, nil
				takeAcks(r)
				takeNacks(r)
				d.answer(false, row.from == Outstanding)

				h := data(psn, tMsg, tOff, tLen, tMsgLen)
				if row.trim {
					h = trimmed(psn, tMsg, tOff, tLen, tMsgLen)
				}
				res := mustPacket(t, r, h)

				w := row.want
				wantVerdict := w.verdict
				if psn == 1 {
					wantVerdict = w.samePSN
				}
				if res.Verdict != wantVerdict {
					t.Errorf("verdict %v, want %v", res.Verdict, wantVerdict)
				}
				checkCalls(t, d, w.trim, w.arrival)
				sb, _ := r.Scoreboard(tMsg)
				if got := sb.StateAt(tOff + tLen - 1); got != w.state {
					t.Errorf("subject is %v, want %v", got, w.state)
				}
				if acks, nacks := len(takeAcks(r)), len(takeNacks(r)); acks != w.acks || nacks != w.nacks {
					t.Errorf("sent %d ACKs and %d NACKs, want %d and %d", acks, nacks, w.acks, w.nacks)
				}
				var placed uint32
				for _, p := range res.Place {
					placed += p.Len()
				}
				if placed != w.placeLen {
					t.Errorf("placed %d bytes (%v), want %d", placed, res.Place, w.placeLen)
				}
			})
		}
	}
}

func checkCalls(t *testing.T, d *fakeDecider, trim *trimCall, arrival *arrivalCall) {
	t.Helper()
	switch {
	case trim == nil && len(d.trims) > 0:
		t.Errorf("OnTrim called %v, want no charge", d.trims)
	case trim != nil && (len(d.trims) != 1 || d.trims[0] != *trim):
		t.Errorf("OnTrim calls %v, want [%v]", d.trims, *trim)
	}
	switch {
	case arrival == nil && len(d.arrivals) > 0:
		t.Errorf("OnArrival called %v, want no credit", d.arrivals)
	case arrival != nil && (len(d.arrivals) != 1 || d.arrivals[0] != *arrival):
		t.Errorf("OnArrival calls %v, want [%v]", d.arrivals, *arrival)
	}
}

// "A range that reaches Forgiven or Received never leaves that state, so
// none is charged twice."
func TestSettledBytesNeverChange(t *testing.T) {
	d := &fakeDecider{}
	r := newReceiver(t, d, nil)
	d.answer(true, true)
	mustPacket(t, r, trimmed(1, tMsg, 100, 100, tMsgLen)) // [100,200) Forgiven
	mustPacket(t, r, data(2, tMsg, 200, 50, tMsgLen))     // [200,250) Received
	sb, _ := r.Scoreboard(tMsg)

	t.Log("# a trim refused and counted over both marks only what is unsettled")
	d.answer(false, true)
	mustPacket(t, r, trimmed(3, tMsg, 50, 250, tMsgLen))
	wantStates(t, sb, map[uint32]State{49: Absent, 50: Outstanding, 99: Outstanding, 100: Forgiven,
		199: Forgiven, 200: Received, 249: Received, 250: Outstanding, 299: Outstanding})
	if got := d.trims[1]; got.missing != 100 || got.newlyOS != 100 {
		t.Errorf("re-trim reported %+v, want 100 missing, 100 new", got)
	}

	t.Log("# data over everything places only the Outstanding bytes")
	res := mustPacket(t, r, data(4, tMsg, 0, 300, tMsgLen))
	want := []ByteRange{{0, 100}, {250, 300}}
	if !slices.Equal(res.Place, want) {
		t.Errorf("placed %v, want %v", res.Place, want)
	}
	if got := d.arrivals[len(d.arrivals)-1]; got.newly != 150 || got.fromOSBy != 100 {
		t.Errorf("arrival %+v, want 150 new, 100 from outstanding", got)
	}
	if !res.Completed {
		t.Fatal("message not complete after every byte settled")
	}
	c := r.Out.Completions[0]
	if !slices.Equal(c.Forgiven, []ByteRange{{100, 200}}) {
		t.Errorf("completion lists %v forgiven, want [100,200)", c.Forgiven)
	}
}

// "Nothing is missing after all, so acknowledge and charge nothing."
func TestTrimmedHeaderNothingMissing(t *testing.T) {
	d := &fakeDecider{eligible: true}
	r := newReceiver(t, d, nil)
	mustPacket(t, r, data(0, tMsg, 0, 100, tMsgLen))
	mustPacket(t, r, data(1, tMsg, 100, 100, tMsgLen))
	takeAcks(r)
	t.Log("# a re-segmented header for bytes [0,200), all delivered")
	res := mustPacket(t, r, trimmed(9, tMsg, 0, 200, tMsgLen))
	if res.Verdict != Acked || len(d.trims) != 0 {
		t.Fatalf("verdict %v with %d OnTrim calls, want acked and no charge", res.Verdict, len(d.trims))
	}
	acks := takeAcks(r)
	if len(acks) != 1 || acks[0].Flags&wire.FlagEligible == 0 {
		t.Fatalf("ACKs %+v, want one carrying Flags(flow)", acks)
	}
	if len(takeNacks(r)) != 0 {
		t.Error("a NACK was sent for a range with nothing missing")
	}
}

// "Receiver::Unsettled ... return the bytes of range at or above
// flow.rcv_nxt that are marked neither Received nor Forgiven", so "a
// re-segmented retransmission can straddle the cumulative acknowledgement,
// and its full length would charge the loss budget for bytes already
// delivered" does not happen.
func TestTrimStraddlingRcvNxtChargesOnlyMissing(t *testing.T) {
	d := &fakeDecider{}
	r := newReceiver(t, d, nil)
	mustPacket(t, r, data(0, tMsg, 0, 200, tMsgLen))
	sb, _ := r.Scoreboard(tMsg)
	if sb.RcvNxt() != 200 {
		t.Fatalf("rcv_nxt %d, want 200", sb.RcvNxt())
	}
	d.answer(false, true)
	mustPacket(t, r, trimmed(5, tMsg, 150, 100, tMsgLen)) // [150,250) straddles 200
	if want := (trimCall{tMsg, 50, 50}); len(d.trims) != 1 || d.trims[0] != want {
		t.Fatalf("OnTrim calls %v, want [%v]", d.trims, want)
	}
	wantStates(t, sb, map[uint32]State{150: Received, 199: Received, 200: Outstanding, 249: Outstanding, 250: Absent})
}

// Every refusal takes Receiver::Repair: "Mark only the unsettled
// subranges" and SendRetransmissionRequest(range, kNormal, Flags(flow)).
func TestTrimmedHeaderRepair(t *testing.T) {
	for _, counted := range []bool{false, true} {
		d := &fakeDecider{eligible: true, exhausted: true}
		r := newReceiver(t, d, nil)
		mustPacket(t, r, data(0, tMsg, 100, 100, tMsgLen))
		d.answer(false, counted)
		res := mustPacket(t, r, trimmed(1, tMsg, 0, 300, tMsgLen))
		if res.Verdict != Repaired {
			t.Fatalf("verdict %v, want repaired", res.Verdict)
		}
		want := Requested
		if counted {
			want = Outstanding
		}
		sb, _ := r.Scoreboard(tMsg)
		wantStates(t, sb, map[uint32]State{0: want, 99: want, 100: Received, 199: Received, 200: want, 299: want})
		nacks := takeNacks(r)
		if len(nacks) != 1 {
			t.Fatalf("%d NACKs, want 1", len(nacks))
		}
		n := nacks[0]
		wantN := wire.NackFields{Flags: wire.FlagEligible | wire.FlagExhausted, Reason: wire.NackTrimmed,
			Priority: wire.PriorityNormal, Src: testInfo.Local, Dst: testInfo.Peer, Flow: testFlow,
			PSN: 1, Count: 1, Msg: tMsg, Offset: 0, Length: 300}
		if n != wantN {
			t.Errorf("NACK %+v,\nwant %+v", n, wantN)
		}
		if r.CumPSN() != 1 {
			t.Errorf("cumulative PSN %d: a refused PSN must stay unsettled", r.CumPSN())
		}
	}
}

// "Forgiving charges the loss budget once. Mark(flow.scoreboard, missing,
// Forgiven); flow.rcv_nxt = Advance(...); SendAck(flow.rcv_nxt, ecn_echo,
// Flags(flow))."
func TestTrimmedHeaderForgiven(t *testing.T) {
	d := &fakeDecider{eligible: true}
	r := newReceiver(t, d, nil)
	mustPacket(t, r, data(0, tMsg, 0, 100, tMsgLen))
	mustPacket(t, r, data(2, tMsg, 200, 100, tMsgLen))
	takeAcks(r)
	takeNacks(r) // the gap NACK for PSN 1
	d.answer(true, true)
	res := mustPacket(t, r, trimmed(1, tMsg, 100, 100, tMsgLen))
	if res.Verdict != Forgave || !res.Completed {
		t.Fatalf("verdict %v completed %v, want forgave and completed", res.Verdict, res.Completed)
	}
	if r.CumPSN() != 3 {
		t.Errorf("cumulative PSN %d, want 3: the forgiven PSN is settled", r.CumPSN())
	}
	acks := takeAcks(r)
	if len(acks) != 1 {
		t.Fatalf("%d ACKs, want 1", len(acks))
	}
	if a := acks[0]; a.Flags != wire.FlagECNEcho|wire.FlagEligible || a.CumPSN != 3 || a.EchoPSN != 1 {
		t.Errorf("ACK %+v, want ECN echo, eligible, cumulative 3, echo 1", a)
	}
	if len(takeNacks(r)) != 0 {
		t.Error("a forgiven range was also requested")
	}
	if c := r.Out.Completions; len(c) != 1 || !slices.Equal(c[0].Forgiven, []ByteRange{{100, 200}}) {
		t.Errorf("completions %+v, want one listing [100,200)", c)
	}
}

func TestTrimmedLastHopReason(t *testing.T) {
	r := newReceiver(t, NoForgiveness{}, func(c *ReceiverConfig) { c.TrimmedLastHop = true })
	mustPacket(t, r, trimmed(0, tMsg, 0, 100, tMsgLen))
	if n := takeNacks(r); len(n) != 1 || n[0].Reason != wire.NackTrimmedLastHop {
		t.Fatalf("NACKs %+v, want one with reason trimmed-last-hop", n)
	}
}

// "ACK every 16 KB received, and at once on ECN CE, on an ack-request
// flag, on a retransmission, or on the first packet."
func TestAckCoalescing(t *testing.T) {
	r := newReceiver(t, NoForgiveness{}, nil)
	const n, big = 1024, 1 << 20
	psn := wire.PSN(0)
	next := func(edit func(*DataHeader)) int {
		h := data(psn, 1, uint32(psn)*n, n, big)
		if edit != nil {
			edit(&h)
		}
		psn++
		mustPacket(t, r, h)
		return len(takeAcks(r))
	}
	if got := next(nil); got != 1 {
		t.Fatalf("first packet: %d ACKs, want 1", got)
	}
	for i := 1; i < 16; i++ {
		if got := next(nil); got != 0 {
			t.Fatalf("packet %d: ACKed before 16 KiB", i)
		}
	}
	if got := next(nil); got != 1 {
		t.Fatalf("16 KiB since the last ACK: %d ACKs, want 1", got)
	}
	for _, c := range []struct {
		name string
		edit func(*DataHeader)
		flag uint8
	}{
		{"CE", func(h *DataHeader) { h.CE = true }, wire.FlagECNEcho},
		{"ack request", func(h *DataHeader) { h.Flags |= wire.DataAckReq }, 0},
		{"retransmission", func(h *DataHeader) { h.Flags |= wire.DataRetx }, wire.AckRetx},
	} {
		h := data(psn, 1, uint32(psn)*n, n, big)
		c.edit(&h)
		psn++
		mustPacket(t, r, h)
		acks := takeAcks(r)
		if len(acks) != 1 || acks[0].Flags != c.flag {
			t.Errorf("%s: ACKs %+v, want one at once with flags %#x", c.name, acks, c.flag)
		}
	}
}

// A delayed-ACK timer "so a tail never waits forever".
func TestDelayedAckTimerFires(t *testing.T) {
	r := newReceiver(t, NoForgiveness{}, nil)
	mustPacket(t, r, data(0, 1, 0, 1000, 1<<20))
	takeAcks(r)
	if _, armed := r.NextDeadline(); armed {
		t.Fatal("timer armed with nothing unacknowledged")
	}
	at := 5 * time.Microsecond
	if _, err := r.OnData(at, data(1, 1, 1000, 1000, 1<<20)); err != nil {
		t.Fatal(err)
	}
	deadline, armed := r.NextDeadline()
	if !armed || deadline != at+DefaultAckDelay {
		t.Fatalf("deadline %v armed %v, want %v", deadline, armed, at+DefaultAckDelay)
	}
	r.OnTimer(deadline - 1)
	if len(r.Out.Acks) != 0 {
		t.Fatal("ACK sent before the deadline")
	}
	r.OnTimer(deadline)
	acks := takeAcks(r)
	if len(acks) != 1 || acks[0].CumPSN != 2 || acks[0].EchoPSN != 1 {
		t.Fatalf("ACKs %+v, want one with cumulative PSN 2", acks)
	}
	if _, armed := r.NextDeadline(); armed {
		t.Error("timer still armed after the ACK")
	}
}

// The SACK bitmap's base is the cumulative PSN; bit i is PSN base+i.
func TestSackBitmap(t *testing.T) {
	r := newReceiver(t, NoForgiveness{}, func(c *ReceiverConfig) { c.AckEvery = 1 })
	for _, p := range []wire.PSN{0, 1, 3, 4, 70} {
		mustPacket(t, r, data(p, 1, uint32(p)*10, 10, 1000))
	}
	a := r.Out.Acks[len(r.Out.Acks)-1]
	if a.CumPSN != 2 || a.SackBase != 2 || a.Sack != 1<<1|1<<2 {
		t.Fatalf("ACK cum %d base %d sack %#x, want 2, 2, %#x", a.CumPSN, a.SackBase, a.Sack, 1<<1|1<<2)
	}
	for _, p := range []wire.PSN{0, 1, 3, 4} {
		if !a.Acked(p) {
			t.Errorf("ACK does not cover PSN %d", p)
		}
	}
	if a.Acked(2) || a.Acked(70) {
		t.Error("ACK covers PSN 2 or 70 (70 is beyond its 64 bits)")
	}
}

// "A subflow is delivered in order, so when a packet of subflow s with PSN
// p arrives, any earlier PSN of the same subflow not yet seen was lost
// without trim."
func TestGapNackOnOrderedSubflow(t *testing.T) {
	r := newReceiver(t, NoForgiveness{}, nil)
	const sigma = 4
	send := func(p wire.PSN) {
		h := data(p, 1, uint32(p)*100, 100, 10000)
		h.Subflows = sigma
		mustPacket(t, r, h)
	}
	t.Log("# PSNs 0, 2, 3 and 6 arrive; 1 and 5 were lost on subflow 1, 4 is late on subflow 0")
	for _, p := range []wire.PSN{0, 2, 3, 6} {
		send(p)
	}
	if n := takeNacks(r); len(n) != 0 {
		t.Fatalf("NACKs %+v before subflow 1 showed any order", n)
	}
	send(9) // subflow 1: 1 and 5 were sent before 9
	nacks := takeNacks(r)
	var got []wire.PSN
	for _, n := range nacks {
		if n.Reason != wire.NackGap || n.Count != 1 {
			t.Errorf("NACK %+v, want reason gap, count 1", n)
		}
		got = append(got, n.PSN)
	}
	if !slices.Equal(got, []wire.PSN{1, 5}) {
		t.Fatalf("gap NACKs for %v, want [1 5] (not 4, 7 or 8 of other subflows)", got)
	}
	t.Log("# a later packet on subflow 1 does not ask again")
	send(13)
	if n := takeNacks(r); len(n) != 0 {
		t.Errorf("NACKs %+v, want none: 1 and 5 were already requested", n)
	}
	t.Log("# the retransmission of 5 neither asks nor moves subflow 1's order")
	h := data(5, 1, 500, 100, 10000)
	h.Subflows, h.Flags = sigma, wire.DataRetx
	mustPacket(t, r, h)
	if n := takeNacks(r); len(n) != 0 {
		t.Errorf("NACKs %+v after a retransmission", n)
	}
}

// On one ordered path consecutive losses share one NACK.
func TestGapNackSinglePathCoalesces(t *testing.T) {
	r := newReceiver(t, NoForgiveness{}, nil)
	mustPacket(t, r, data(0, 1, 0, 10, 1000))
	mustPacket(t, r, data(4, 1, 40, 10, 1000))
	n := takeNacks(r)
	if len(n) != 1 || n[0].PSN != 1 || n[0].Count != 3 || n[0].Reason != wire.NackGap {
		t.Fatalf("NACKs %+v, want one for PSNs 1..3", n)
	}
	t.Log("# a trimmed header overtakes data, so it proves no gap")
	mustPacket(t, r, trimmed(9, 1, 90, 10, 1000))
	if n := takeNacks(r); len(n) != 1 || n[0].Reason != wire.NackTrimmed {
		t.Fatalf("NACKs %+v, want only the trimmed header's", n)
	}
	mustPacket(t, r, data(10, 1, 100, 10, 1000))
	if n := takeNacks(r); len(n) != 1 || n[0].PSN != 5 || n[0].Count != 4 {
		t.Fatalf("NACKs %+v, want one for 5..8 (9 was already requested)", n)
	}
}

// "A probe ... for subflow s with PSN p says everything the sender put on
// s up to p has arrived or was lost", so a silent tail drop is found.
func TestProbeFindsSilentTailDrop(t *testing.T) {
	r := newReceiver(t, NoForgiveness{}, nil)
	mustPacket(t, r, data(0, 1, 0, 10, 30))
	mustPacket(t, r, data(1, 1, 10, 10, 30))
	takeAcks(r)
	// PSN 2, the tail, vanished without a trim; the tail probe names it.
	if err := r.OnProbe(0, wire.ProbeFields{Kind: wire.ProbeTail, Flow: testFlow, PSN: 2}); err != nil {
		t.Fatal(err)
	}
	n := takeNacks(r)
	if len(n) != 1 || n[0].PSN != 2 || n[0].Reason != wire.NackProbe {
		t.Fatalf("NACKs %+v, want one for PSN 2 with reason probe", n)
	}
	a := takeAcks(r)
	if len(a) != 1 || a[0].Flags&wire.AckProbe == 0 || a[0].CumPSN != 2 {
		t.Fatalf("ACKs %+v, want one with the probe flag", a)
	}
	t.Log("# a second probe does not request it again; a retransmission probe does")
	_ = r.OnProbe(0, wire.ProbeFields{Kind: wire.ProbeTail, Flow: testFlow, PSN: 2})
	if n := takeNacks(r); len(n) != 0 {
		t.Errorf("NACKs %+v after a repeated tail probe", n)
	}
	_ = r.OnProbe(0, wire.ProbeFields{Kind: wire.ProbeRetx, Flow: testFlow, PSN: 2})
	if n := takeNacks(r); len(n) != 1 || n[0].PSN != 2 {
		t.Errorf("NACKs %+v, want the retransmission probe to request PSN 2", n)
	}
	if err := r.OnProbe(0, wire.ProbeFields{Kind: wire.ProbeTail, Flow: testFlow, PSN: 3, Subflow: 0, Subflows: 2}); !errors.Is(err, ErrBadProbe) {
		t.Errorf("probe naming PSN 3 on subflow 0 of 2: err %v, want ErrBadProbe", err)
	}
}

// With per-packet spraying nothing is ordered: "only RTO recovers silent drops".
func TestSprayInfersNothing(t *testing.T) {
	r := newReceiver(t, NoForgiveness{}, func(c *ReceiverConfig) { c.SprayPerPacket = true })
	mustPacket(t, r, data(0, 1, 0, 10, 1000))
	mustPacket(t, r, data(5, 1, 50, 10, 1000))
	_ = r.OnProbe(0, wire.ProbeFields{Kind: wire.ProbeTail, Flow: testFlow, PSN: 9})
	if n := takeNacks(r); len(n) != 0 {
		t.Fatalf("NACKs %+v under per-packet spraying", n)
	}
}

// "late packets for completed messages get duplicate ACKs and never
// recreate state".
func TestLatePacketOfCompletedMessage(t *testing.T) {
	d := &fakeDecider{}
	r := newReceiver(t, d, nil)
	mustPacket(t, r, data(0, 1, 0, 100, 200))
	res := mustPacket(t, r, data(1, 1, 100, 100, 200))
	if !res.Completed || len(r.Out.Completions) != 1 || r.Out.Completions[0].Forgiven != nil {
		t.Fatalf("completion %+v, want one with nothing forgiven", r.Out.Completions)
	}
	takeAcks(r)
	for _, h := range []DataHeader{data(1, 1, 100, 100, 200), data(9, 1, 0, 100, 200), trimmed(10, 1, 0, 100, 200)} {
		res := mustPacket(t, r, h)
		if res.Verdict == Placed || len(res.Place) != 0 {
			t.Errorf("PSN %d: %v placing %v", h.PSN, res.Verdict, res.Place)
		}
		if r.OpenMessages() != 0 {
			t.Fatalf("PSN %d reopened message 1", h.PSN)
		}
		if len(takeAcks(r)) != 1 {
			t.Errorf("PSN %d: want a duplicate ACK", h.PSN)
		}
	}
	if len(d.trims) != 0 || len(d.arrivals) != 2 {
		t.Errorf("decider saw %d trims, %d arrivals; want 0 and 2", len(d.trims), len(d.arrivals))
	}
}

func TestZeroLengthMessage(t *testing.T) {
	r := newReceiver(t, NoForgiveness{}, nil)
	res := mustPacket(t, r, data(0, 3, 0, 0, 0))
	if res.Verdict != Placed || !res.Completed || r.CumPSN() != 1 {
		t.Fatalf("%+v, cumulative %d: want a completed empty message", res, r.CumPSN())
	}
	t.Log("# a trimmed header is all an empty message carries: nothing is missing, so it completes")
	res = mustPacket(t, r, trimmed(1, 4, 0, 0, 0))
	if res.Verdict != Acked || !res.Completed || len(r.Out.Completions) != 2 {
		t.Fatalf("%+v with %d completions: want the trimmed empty message completed", res, len(r.Out.Completions))
	}
}

func TestReceiverRejectsBadInput(t *testing.T) {
	r := newReceiver(t, NoForgiveness{}, nil)
	if _, err := r.OnData(0, data(0, 1, 90, 20, 100)); !errors.Is(err, ErrBadHeader) {
		t.Errorf("bytes beyond the message: %v, want ErrBadHeader", err)
	}
	mustPacket(t, r, data(0, 1, 0, 10, 100))
	if _, err := r.OnData(0, data(1, 1, 10, 10, 200)); !errors.Is(err, ErrBadHeader) {
		t.Errorf("message length changed: %v, want ErrBadHeader", err)
	}
	if _, err := r.OnData(0, data(wire.PSN(r.Window())+1, 1, 10, 10, 100)); !errors.Is(err, ErrOutOfWindow) {
		t.Errorf("beyond the window: %v, want ErrOutOfWindow", err)
	}
	small := newReceiver(t, NoForgiveness{}, func(c *ReceiverConfig) { c.MaxMessages = 1 })
	mustPacket(t, small, data(0, 1, 0, 10, 100))
	if _, err := small.OnData(0, data(1, 2, 0, 10, 100)); !errors.Is(err, ErrTooManyMessages) {
		t.Errorf("second open message: %v, want ErrTooManyMessages", err)
	}
}

// Go-back-N receiver: "accept only the expected PSN; anything else is
// dropped and a NACK (sequence error) sent at most once per NACK interval".
func TestGoBackNReceiver(t *testing.T) {
	d := &fakeDecider{}
	r := newReceiver(t, d, func(c *ReceiverConfig) { c.Mode = GoBackN })
	mustPacket(t, r, data(0, 1, 0, 10, 100))
	for i, p := range []wire.PSN{2, 3, 4} {
		res, _ := r.OnData(time.Duration(i)*time.Microsecond, data(p, 1, uint32(p)*10, 10, 100))
		if res.Verdict != Dropped {
			t.Fatalf("PSN %d: %v, want dropped", p, res.Verdict)
		}
	}
	n := takeNacks(r)
	if len(n) != 1 || n[0].PSN != 1 || n[0].Reason != wire.NackGap {
		t.Fatalf("NACKs %+v, want exactly one naming expected PSN 1", n)
	}
	if _, err := r.OnData(DefaultNackInterval, data(5, 1, 50, 10, 100)); err != nil {
		t.Fatal(err)
	}
	if n := takeNacks(r); len(n) != 1 {
		t.Fatalf("after the NACK interval: %d NACKs, want 1", len(n))
	}
	t.Log("# a trimmed header of the expected PSN just NACKs: no forgiveness in go-back-N")
	d.answer(true, true)
	res, _ := r.OnTrimmedHeader(DefaultNackInterval, trimmed(1, 1, 10, 10, 100))
	if n := takeNacks(r); res.Verdict != Repaired || len(n) != 1 || n[0].Reason != wire.NackTrimmed || len(d.trims) != 0 {
		t.Fatalf("verdict %v, NACKs %+v, %d OnTrim calls; want a trimmed NACK and no decision", res.Verdict, n, len(d.trims))
	}
	h := data(1, 1, 10, 10, 100)
	h.Flags = wire.DataRetx
	mustPacket(t, r, h)
	if a := r.Out.Acks[len(r.Out.Acks)-1]; a.CumPSN != 2 || a.Sack != 0 {
		t.Errorf("ACK %+v, want cumulative 2 and no SACK", a)
	}
}

func TestReceiverConfigValidateNamesField(t *testing.T) {
	for field, edit := range map[string]func(*ReceiverConfig){
		"Mode":         func(c *ReceiverConfig) { c.Mode = 9 },
		"BitmapPSNs":   func(c *ReceiverConfig) { c.BitmapPSNs = 10 },
		"AckEvery":     func(c *ReceiverConfig) { c.AckEvery = 0 },
		"AckDelay":     func(c *ReceiverConfig) { c.AckDelay = 0 },
		"NackInterval": func(c *ReceiverConfig) { c.NackInterval = -1 },
		"MaxMessages":  func(c *ReceiverConfig) { c.MaxMessages = 0 },
	} {
		c := DefaultReceiverConfig()
		edit(&c)
		err := c.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "ReceiverConfig."+field) {
			t.Errorf("%s: %v", field, err)
		}
	}
	if err := DefaultReceiverConfig().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
