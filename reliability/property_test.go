package reliability

import (
	"testing"

	"github.com/forgive-emu/forgive/wire"
	"pgregory.net/rapid"
)

// toyBudget is a scripted Decider that keeps a step's counters the way the
// seed's pseudocode does and checks the counts the receiver reports.
type toyBudget struct {
	t                               *rapid.T
	p                               float64 // vesting fraction
	open                            bool    // a step budget is open for the flow
	draw                            func() bool
	received, forgiven, outstanding int64
	charged                         int64 // sum of missing over forgiven trims
	lastForgive, lastCounted        bool
	lastMissing, lastNew            int64
	calls                           int
}

func (b *toyBudget) OnTrim(flow, msg uint32, missing, newlyOutstanding int64) (bool, bool) {
	b.calls++
	b.lastMissing, b.lastNew = missing, newlyOutstanding
	if missing <= 0 || newlyOutstanding < 0 || newlyOutstanding > missing {
		b.t.Fatalf("OnTrim(missing %d, new %d)", missing, newlyOutstanding)
	}
	b.lastForgive, b.lastCounted = false, false
	if !b.open {
		return false, false // "No loss budget is open for this step": Repair
	}
	// entry.outstanding += Count(bytes of missing not marked Requested)
	b.outstanding += newlyOutstanding
	b.lastCounted = true
	// The vesting rule, then Draw(P).
	if float64(b.forgiven+missing) > b.p*float64(b.received+b.forgiven+missing) || !b.draw() {
		return false, true
	}
	b.forgiven += missing
	b.outstanding -= missing
	b.charged += missing
	b.lastForgive = true
	if b.outstanding < 0 {
		b.t.Fatalf("outstanding %d < 0 after forgiving %d", b.outstanding, missing)
	}
	return true, true
}

func (b *toyBudget) OnArrival(flow, msg uint32, newlyReceived, fromOutstanding int64) {
	if newlyReceived <= 0 || fromOutstanding < 0 || fromOutstanding > newlyReceived {
		b.t.Fatalf("OnArrival(new %d, from outstanding %d)", newlyReceived, fromOutstanding)
	}
	b.received += newlyReceived
	b.outstanding -= fromOutstanding
	if b.outstanding < 0 {
		b.t.Fatalf("outstanding %d < 0 after an arrival", b.outstanding)
	}
}

func (b *toyBudget) Flags(flow, msg uint32) (bool, bool) { return b.open, false }

type sbEvent struct {
	trim bool
	h    DataHeader
}

// Property (b): under random arrivals, trims, re-trims, duplicates and
// re-segmented retransmissions (arbitrary byte ranges straddling rcv_nxt),
// with a decider enforcing a toy budget: "A range that reaches Forgiven or
// Received never leaves that state, so none is charged twice". The bytes
// charged by forgiven trims equal the bytes in state Forgiven, the bytes
// reported received equal the distinct bytes Received, and the budget's
// outstanding equals the bytes in state Outstanding.
func TestPropertyScoreboard(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		length := rapid.Uint32Range(1, 1500).Draw(rt, "length")
		b := &toyBudget{t: rt, p: rapid.Float64Range(0, 0.5).Draw(rt, "p")}
		b.draw = func() bool { return rapid.Bool().Draw(rt, "draw") }
		r, err := NewReceiver(testInfo, DefaultReceiverConfig(), b)
		if err != nil {
			rt.Fatal(err)
		}
		ref := make([]State, length) // the model: one state per byte
		settledPSN := map[wire.PSN]bool{}
		var events []sbEvent
		var completion *Completion
		for i := range rapid.IntRange(1, 150).Draw(rt, "events") {
			b.open = rapid.Bool().Draw(rt, "open")
			ev := drawEvent(rt, wire.PSN(i), length, events)
			events = append(events, ev)
			before := append([]State(nil), ref...)
			calls := b.calls
			res, err := r.OnPacket(0, ev.h)
			if err != nil {
				rt.Fatal(err)
			}
			if !settledPSN[ev.h.PSN] {
				settledPSN[ev.h.PSN] = applyModel(rt, ref, ev, b, b.calls > calls)
			} else if b.calls != calls {
				rt.Fatalf("a settled PSN %d reached the decider", ev.h.PSN)
			}
			if res.Completed {
				completion = &r.Out.Completions[len(r.Out.Completions)-1]
			}
			checkBoard(rt, r, ref, before, completion)
			checkCounters(rt, ref, b)
		}
	})
}

// drawEvent draws a data packet or trimmed header with a fresh PSN over an
// arbitrary byte range, or repeats an earlier event under its own PSN.
func drawEvent(rt *rapid.T, psn wire.PSN, length uint32, past []sbEvent) sbEvent {
	if len(past) > 0 && rapid.IntRange(0, 4).Draw(rt, "repeat?") == 0 {
		return past[rapid.IntRange(0, len(past)-1).Draw(rt, "which")]
	}
	start := rapid.Uint32Range(0, length-1).Draw(rt, "start")
	end := rapid.Uint32Range(start+1, length).Draw(rt, "end")
	ev := sbEvent{trim: rapid.Bool().Draw(rt, "trim"), h: data(psn, 1, start, end-start, length)}
	if ev.trim {
		ev.h.Flags |= wire.DataTrimmed
	}
	return ev
}

// applyModel applies an event to the per-byte model and reports whether
// the receiver must now consider its PSN settled.
func applyModel(rt *rapid.T, ref []State, ev sbEvent, b *toyBudget, decided bool) bool {
	rng := ev.h.Range()
	var missing, notCounted int64
	for off := rng.Start; off < rng.End; off++ {
		if !ref[off].Settled() {
			missing++
			if ref[off] != Outstanding {
				notCounted++
			}
		}
	}
	if !ev.trim {
		for off := rng.Start; off < rng.End; off++ {
			if !ref[off].Settled() {
				ref[off] = Received
			}
		}
		return true
	}
	if missing == 0 {
		if decided {
			rt.Fatal("the decider was asked about a range with nothing missing")
		}
		return true
	}
	if !decided || b.lastMissing != missing || b.lastNew != notCounted {
		rt.Fatalf("OnTrim got missing %d new %d, model says %d and %d (called %v)",
			b.lastMissing, b.lastNew, missing, notCounted, decided)
	}
	for off := rng.Start; off < rng.End; off++ {
		switch {
		case ref[off].Settled():
		case b.lastForgive:
			ref[off] = Forgiven
		case b.lastCounted:
			ref[off] = Outstanding
		case ref[off] == Absent:
			ref[off] = Requested
		}
	}
	return b.lastForgive
}

func checkBoard(rt *rapid.T, r *Receiver, ref, before []State, c *Completion) {
	sb, open := r.Scoreboard(1)
	for off := range ref {
		if before[off].Settled() && ref[off] != before[off] {
			rt.Fatalf("model bug: byte %d left %v", off, before[off])
		}
		var got State
		switch {
		case open:
			got = sb.StateAt(uint32(off))
		case c != nil:
			got = Received
			if containsOffset(c.Forgiven, uint32(off)) {
				got = Forgiven
			}
		}
		if got != ref[off] {
			rt.Fatalf("byte %d is %v, model says %v (was %v)", off, got, ref[off], before[off])
		}
	}
	if !open && c == nil && len(ref) > 0 && ref[0] != Absent {
		rt.Fatal("message closed without a completion")
	}
}

func checkCounters(rt *rapid.T, ref []State, b *toyBudget) {
	var n [5]int64
	for _, st := range ref {
		n[st]++
	}
	if b.charged != n[Forgiven] {
		rt.Fatalf("charged %d bytes by forgiving, %d bytes are Forgiven", b.charged, n[Forgiven])
	}
	if b.received != n[Received] {
		rt.Fatalf("reported %d bytes received, %d bytes are Received", b.received, n[Received])
	}
	if b.outstanding != n[Outstanding] {
		rt.Fatalf("budget counts %d outstanding, %d bytes are Outstanding", b.outstanding, n[Outstanding])
	}
}

// The scoreboard alone: painting arbitrary ranges keeps the span list
// sorted, disjoint, merged and above rcv_nxt.
func TestPropertyScoreboardShape(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		var sb Scoreboard
		length := rapid.Uint32Range(0, 400).Draw(rt, "length")
		sb.Reset(length)
		for range rapid.IntRange(0, 60).Draw(rt, "ops") {
			a := rapid.Uint32Range(0, length+10).Draw(rt, "a")
			rg := ByteRange{a, a + rapid.Uint32Range(0, 100).Draw(rt, "n")}
			switch rapid.IntRange(0, 3).Draw(rt, "op") {
			case 0:
				sb.MarkReceived(rg, nil)
			case 1:
				sb.MarkRequested(rg, false)
			case 2:
				sb.MarkRequested(rg, true)
			case 3:
				sb.MarkForgiven(rg)
			}
			prevEnd := sb.RcvNxt()
			for i, sp := range sb.spans {
				if sp.empty() || sp.Start < prevEnd || sp.End > length || sp.st == Absent ||
					i > 0 && sb.spans[i-1].End == sp.Start && sb.spans[i-1].st == sp.st ||
					i == 0 && sp.Start == sb.RcvNxt() && sp.st.Settled() {
					rt.Fatalf("bad span list %v with rcv_nxt %d", sb.spans, sb.RcvNxt())
				}
				prevEnd = sp.End
			}
			var unsettled uint64
			for _, u := range sb.Unsettled(ByteRange{0, length}, nil) {
				unsettled += uint64(u.Len())
			}
			tl := sb.Tally(ByteRange{0, length})
			if unsettled != tl.Missing() || sb.ReceivedBytes()+sb.ForgivenBytes()+unsettled != uint64(length) {
				rt.Fatalf("unsettled %d, tally %+v, received %d, forgiven %d, length %d",
					unsettled, tl, sb.ReceivedBytes(), sb.ForgivenBytes(), length)
			}
		}
	})
}
