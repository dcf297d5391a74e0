package reliability

import (
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
