package reliability

import (
	"math/rand/v2"
	"slices"
	"testing"
)

// In order, the span list stays empty: rcv_nxt alone describes the message.
func TestScoreboardInOrderKeepsNoSpans(t *testing.T) {
	var sb Scoreboard
	sb.Reset(10000)
	for off := uint32(0); off < 10000; off += 1000 {
		placed, _ := sb.MarkReceived(ByteRange{off, off + 1000}, nil)
		if !slices.Equal(placed, []ByteRange{{off, off + 1000}}) || sb.Spans() != 0 {
			t.Fatalf("at %d placed %v with %d spans", off, placed, sb.Spans())
		}
	}
	if !sb.Complete() || sb.ReceivedBytes() != 10000 {
		t.Fatalf("complete %v with %d bytes received", sb.Complete(), sb.ReceivedBytes())
	}
}

// "Receiver::Unsettled(flow, range): The result holds only the bytes the
// receiver still lacks."
func TestScoreboardUnsettled(t *testing.T) {
	var sb Scoreboard
	sb.Reset(1000)
	sb.MarkReceived(ByteRange{0, 100}, nil)     // rcv_nxt = 100
	sb.MarkReceived(ByteRange{300, 400}, nil)   // Received above rcv_nxt
	sb.MarkForgiven(ByteRange{500, 600})        // Forgiven above rcv_nxt
	sb.MarkRequested(ByteRange{600, 700}, true) // Outstanding: still lacking
	got := sb.Unsettled(ByteRange{50, 800}, nil)
	want := []ByteRange{{100, 300}, {400, 500}, {600, 800}}
	if !slices.Equal(got, want) {
		t.Fatalf("Unsettled %v, want %v", got, want)
	}
	tl := sb.Tally(ByteRange{50, 800})
	if tl.Missing() != 500 || tl.Outstanding != 100 || tl.NotCounted() != 400 || tl.Received != 100 || tl.Forgiven != 100 {
		t.Fatalf("tally %+v", tl)
	}
}

// The completion lists forgiven ranges merged and in order, whichever
// order they were forgiven in.
func TestScoreboardForgivenReport(t *testing.T) {
	var sb Scoreboard
	sb.Reset(400)
	sb.MarkForgiven(ByteRange{300, 400})
	sb.MarkForgiven(ByteRange{100, 200})
	sb.MarkForgiven(ByteRange{200, 250})
	sb.MarkReceived(ByteRange{0, 400}, nil)
	if !sb.Complete() {
		t.Fatal("not complete")
	}
	if got := sb.Forgiven(nil); !slices.Equal(got, []ByteRange{{100, 250}, {300, 400}}) {
		t.Fatalf("forgiven %v", got)
	}
	if sb.ForgivenBytes() != 250 || sb.ReceivedBytes() != 150 {
		t.Fatalf("forgiven %d received %d", sb.ForgivenBytes(), sb.ReceivedBytes())
	}
	if sb.StateAt(120) != Forgiven || sb.StateAt(260) != Received || sb.StateAt(400) != Absent {
		t.Fatal("StateAt below rcv_nxt wrong")
	}
}

// MarkReceived's shortcuts give what the general paint gives: random
// marks of every kind are applied to two scoreboards, one marking
// receptions with MarkReceived and the other with paint, and after every
// step both must hold the same state and report the same changes.
func TestScoreboardMarkReceivedShortcutsMatchPaint(t *testing.T) {
	const msgLen = 64
	shortcuts := 0
	for seed := range uint64(200) {
		rng := rand.New(rand.NewPCG(seed, 3))
		var fast, slow Scoreboard
		fast.Reset(msgLen)
		slow.Reset(msgLen)
		for step := range 60 {
			lo := uint32(rng.IntN(msgLen + 4))
			r := ByteRange{lo, lo + uint32(rng.IntN(12))}
			switch rng.IntN(4) {
			case 0: // in order, as most packets are
				r = ByteRange{fast.RcvNxt(), fast.RcvNxt() + uint32(1+rng.IntN(8))}
			case 1: // a hole between spans, whole or touching one side, as a late packet fills it
				if sp := fast.spans; len(sp) > 1 {
					i := 1 + rng.IntN(len(sp)-1)
					r = ByteRange{sp[i-1].End, sp[i].Start}
					if mid := r.Start + uint32(rng.IntN(int(r.Len())+1)); rng.IntN(2) == 0 {
						r.End = max(mid, r.Start+1)
					} else if rng.IntN(2) == 0 {
						r.Start = min(mid, r.End-1)
					}
				}
			}
			switch op := rng.IntN(6); op {
			case 0:
				if a, b := fast.MarkRequested(r, false), slow.MarkRequested(r, false); a != b {
					t.Fatalf("seed %d step %d: MarkRequested %d, %d", seed, step, a, b)
				}
			case 1:
				if a, b := fast.MarkRequested(r, true), slow.MarkRequested(r, true); a != b {
					t.Fatalf("seed %d step %d: MarkRequested counted %d, %d", seed, step, a, b)
				}
			case 2:
				if a, b := fast.MarkForgiven(r), slow.MarkForgiven(r); a != b {
					t.Fatalf("seed %d step %d: MarkForgiven %d, %d", seed, step, a, b)
				}
			default:
				before := fast.Spans()
				placed, fromOut := fast.MarkReceived(r, []ByteRange{{0, 0}})
				ch := slow.paint(r, opReceive, []ByteRange{{0, 0}})
				if !slices.Equal(placed, ch.placed) || fromOut != ch.fromOutstanding {
					t.Fatalf("seed %d step %d: MarkReceived(%v) placed %v from outstanding %d, paint %v %d",
						seed, step, r, placed, fromOut, ch.placed, ch.fromOutstanding)
				}
				if before == fast.Spans() && fromOut == 0 {
					shortcuts++
				}
			}
			if fast.rcvNxt != slow.rcvNxt || fast.received != slow.received || fast.forgivenN != slow.forgivenN ||
				!slices.Equal(fast.spans, slow.spans) || !slices.Equal(fast.forgiven, slow.forgiven) {
				t.Fatalf("seed %d step %d after %v: rcv_nxt %d/%d received %d/%d forgiven %d/%d spans %v/%v forgiven %v/%v",
					seed, step, r, fast.rcvNxt, slow.rcvNxt, fast.received, slow.received, fast.forgivenN, slow.forgivenN,
					fast.spans, slow.spans, fast.forgiven, slow.forgiven)
			}
		}
	}
	if shortcuts == 0 {
		t.Fatal("no step took a shortcut")
	}
}
