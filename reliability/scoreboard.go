package reliability

import (
	"fmt"
	"sort"
)

// State is what the receiver knows about one byte of a message: the
// seed's scoreboard values, with "Requested" split in two so the budget
// can count each trimmed byte once.
type State uint8

const (
	// Absent: nothing arrived for the byte yet, not even a trimmed header.
	Absent State = iota
	// Requested: a trimmed header reported the byte missing and a
	// retransmission was requested; no step budget counts it.
	Requested
	// Outstanding: Requested, and counted in a step budget's outstanding.
	Outstanding
	// Forgiven: acknowledged without arriving. Final.
	Forgiven
	// Received: the payload arrived and was placed. Final.
	Received
)

var stateNames = [...]string{"absent", "requested", "outstanding", "forgiven", "received"}

func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return fmt.Sprintf("State(%d)", uint8(s))
}

// Settled reports whether the byte was received or forgiven: "A range that
// reaches Forgiven or Received never leaves that state".
func (s State) Settled() bool { return s == Forgiven || s == Received }

// ByteRange is the half-open range [Start, End) of byte offsets within a
// message.
type ByteRange struct{ Start, End uint32 }

// Len returns the number of bytes in r (0 when r is empty or inverted).
func (r ByteRange) Len() uint32 {
	if r.End <= r.Start {
		return 0
	}
	return r.End - r.Start
}

func (r ByteRange) empty() bool { return r.End <= r.Start }

// span is a run of bytes in one state other than Absent.
type span struct {
	ByteRange
	st State
}

// Scoreboard is the byte scoreboard of one message at the receiver. It
// keeps rcv_nxt, "the lowest sequence number not yet settled", as a byte
// offset, and above it a sorted list of non-overlapping spans in the states
// Requested, Outstanding, Forgiven and Received (bytes in no span are
// Absent). Bytes below rcv_nxt are settled; the forgiven ones among them
// are kept in a separate sorted list for the completion report.
//
// Like x/net's quic rangeset the lists are plain slices of intervals, which
// is cheapest when ranges are few, the common case: in-order arrival keeps
// the span list empty. Every change rebuilds the span list into a second
// slice that is then swapped in, so storage is reused and a scoreboard
// allocates only while its lists grow.
type Scoreboard struct {
	length    uint32
	rcvNxt    uint32
	spans     []span
	spare     []span
	forgiven  []ByteRange // forgiven ranges below rcvNxt, sorted, merged
	received  uint64      // bytes that became Received
	forgivenN uint64      // bytes that became Forgiven
}

// Reset empties the scoreboard for a message of the given length, keeping
// its storage.
func (s *Scoreboard) Reset(length uint32) {
	*s = Scoreboard{length: length, spans: s.spans[:0], spare: s.spare[:0], forgiven: s.forgiven[:0]}
}

// Len returns the message length.
func (s *Scoreboard) Len() uint32 { return s.length }

// RcvNxt returns the lowest byte offset not yet settled (Len when the
// message is complete).
func (s *Scoreboard) RcvNxt() uint32 { return s.rcvNxt }

// Complete reports whether every byte is settled.
func (s *Scoreboard) Complete() bool { return s.rcvNxt == s.length }

// ReceivedBytes returns how many bytes became Received.
func (s *Scoreboard) ReceivedBytes() uint64 { return s.received }

// ForgivenBytes returns how many bytes became Forgiven.
func (s *Scoreboard) ForgivenBytes() uint64 { return s.forgivenN }

// Spans returns the number of spans kept above rcv_nxt (a size measure).
func (s *Scoreboard) Spans() int { return len(s.spans) }

// clip returns the part of r at or above rcv_nxt and inside the message.
func (s *Scoreboard) clip(r ByteRange) ByteRange {
	r.Start = max(r.Start, s.rcvNxt)
	r.End = min(r.End, s.length)
	return r
}

// Unsettled appends to dst "the bytes of range at or above flow.rcv_nxt
// that are marked neither Received nor Forgiven", as merged ranges, so a
// re-segmented retransmission that straddles rcv_nxt charges nothing for
// bytes already delivered.
func (s *Scoreboard) Unsettled(r ByteRange, dst []ByteRange) []ByteRange {
	r = s.clip(r)
	pos := r.Start
	for _, sp := range s.spans {
		if pos >= r.End || sp.Start >= r.End {
			break
		}
		if sp.End <= pos || !sp.st.Settled() {
			continue
		}
		if pos < sp.Start {
			dst = appendRange(dst, ByteRange{pos, sp.Start})
		}
		pos = max(pos, sp.End)
	}
	if pos < r.End {
		dst = appendRange(dst, ByteRange{pos, r.End})
	}
	return dst
}

// Tally counts the bytes of r at or above rcv_nxt by state.
type Tally struct {
	Absent, Requested, Outstanding, Forgiven, Received uint64
}

// Missing is the number of unsettled bytes.
func (t Tally) Missing() uint64 { return t.Absent + t.Requested + t.Outstanding }

// NotCounted is the number of unsettled bytes no budget counts yet: "A
// range trimmed again is already outstanding. Count only its new bytes."
func (t Tally) NotCounted() uint64 { return t.Absent + t.Requested }

func (t *Tally) add(st State, n uint64) {
	switch st {
	case Absent:
		t.Absent += n
	case Requested:
		t.Requested += n
	case Outstanding:
		t.Outstanding += n
	case Forgiven:
		t.Forgiven += n
	case Received:
		t.Received += n
	}
}

// Tally returns the states of the bytes of r at or above rcv_nxt.
func (s *Scoreboard) Tally(r ByteRange) Tally {
	var t Tally
	r = s.clip(r)
	pos := r.Start
	for _, sp := range s.spans {
		if pos >= r.End || sp.Start >= r.End {
			break
		}
		if sp.End <= pos {
			continue
		}
		if pos < sp.Start {
			t.add(Absent, uint64(sp.Start-pos))
			pos = sp.Start
		}
		end := min(sp.End, r.End)
		t.add(sp.st, uint64(end-pos))
		pos = end
	}
	if pos < r.End {
		t.add(Absent, uint64(r.End-pos))
	}
	return t
}

// StateAt returns the state of the byte at off.
func (s *Scoreboard) StateAt(off uint32) State {
	if off >= s.length {
		return Absent
	}
	if off < s.rcvNxt {
		if containsOffset(s.forgiven, off) {
			return Forgiven
		}
		return Received
	}
	i := sort.Search(len(s.spans), func(i int) bool { return s.spans[i].End > off })
	if i < len(s.spans) && s.spans[i].Start <= off {
		return s.spans[i].st
	}
	return Absent
}

// HasForgiven reports whether any byte of r is Forgiven.
func (s *Scoreboard) HasForgiven(r ByteRange) bool {
	for _, f := range s.forgiven {
		if f.Start < r.End && r.Start < f.End {
			return true
		}
	}
	for _, sp := range s.spans {
		if sp.st == Forgiven && sp.Start < r.End && r.Start < sp.End {
			return true
		}
	}
	return false
}

// Forgiven appends every forgiven range of the message to dst, merged and
// in order. Once the message is complete this is its completion report.
func (s *Scoreboard) Forgiven(dst []ByteRange) []ByteRange {
	for _, r := range s.forgiven {
		dst = appendRange(dst, r)
	}
	for _, sp := range s.spans {
		if sp.st == Forgiven {
			dst = appendRange(dst, sp.ByteRange)
		}
	}
	return dst
}

// MarkReceived marks the unsettled bytes of r Received. It appends the
// bytes that changed, the ones the NIC must copy into memory, to placed,
// and reports how many of them had been Outstanding. Settled bytes keep
// their state: a Forgiven byte's payload is discarded.
//
// Two cases take a shortcut that gives what paint gives, the ones a
// sprayed flow's reordering makes common: the range starts at rcv_nxt and
// ends before the first span (in order, or filling the hole in front of
// the spans), and the range lies in a hole between spans or beyond the
// last one. Either way every byte of it is Absent, so all of it becomes
// Received and none of it was Outstanding.
func (s *Scoreboard) MarkReceived(r ByteRange, placed []ByteRange) (_ []ByteRange, fromOutstanding uint64) {
	c := s.clip(r)
	if c.empty() {
		return placed, 0 // paint changes nothing
	}
	n := len(s.spans)
	if c.Start == s.rcvNxt && (n == 0 || c.End <= s.spans[0].Start) {
		// rcv_nxt moves to the end of the range and on over the settled
		// spans that now start at it, as paint's advance does.
		s.rcvNxt = c.End
		s.received += uint64(c.Len())
		if n > 0 {
			s.spans = s.advance(s.spans)
		}
		return appendRange(placed, c), 0
	}
	// k is the first span at or after the range's end.
	k := n
	for k > 0 && s.spans[k-1].Start >= c.End {
		k--
	}
	if k == 0 || s.spans[k-1].End <= c.Start {
		// In the hole before span k, beyond rcv_nxt (the case above took
		// a range at rcv_nxt before the first span): no settled span can
		// come to start at rcv_nxt (none did, as after every change), so
		// rcv_nxt stays. The new span merges with its neighbours as
		// appendSpan merges touching spans of one state.
		s.received += uint64(c.Len())
		left := k > 0 && s.spans[k-1].End == c.Start && s.spans[k-1].st == Received
		right := k < n && s.spans[k].Start == c.End && s.spans[k].st == Received
		switch {
		case left && right:
			s.spans[k-1].End = s.spans[k].End
			s.spans = append(s.spans[:k], s.spans[k+1:]...)
		case left:
			s.spans[k-1].End = c.End
		case right:
			s.spans[k].Start = c.Start
		default:
			s.spans = append(s.spans, span{})
			copy(s.spans[k+1:], s.spans[k:])
			s.spans[k] = span{c, Received}
		}
		return appendRange(placed, c), 0
	}
	ch := s.paint(r, opReceive, placed)
	return ch.placed, ch.fromOutstanding
}

// MarkRequested marks the unsettled bytes of r as requested again. With
// counted, the budget now counts them, so they become Outstanding;
// otherwise Absent bytes become Requested and Outstanding bytes stay
// Outstanding, because the budget still counts them. It returns the number
// of bytes that changed state.
func (s *Scoreboard) MarkRequested(r ByteRange, counted bool) uint64 {
	o := opRequest
	if counted {
		o = opCount
	}
	return s.paint(r, o, nil).changed
}

// MarkForgiven marks the unsettled bytes of r Forgiven and returns how
// many there were. Received bytes stay Received.
func (s *Scoreboard) MarkForgiven(r ByteRange) uint64 {
	return s.paint(r, opForgive, nil).changed
}

// op is a change applied to every byte of a range.
type op uint8

const (
	opReceive op = iota
	opRequest
	opCount
	opForgive
)

// apply returns the new state of a byte in state old. Settled bytes never
// change: this is the one place that rule is enforced.
func (o op) apply(old State) State {
	if old.Settled() {
		return old
	}
	switch o {
	case opReceive:
		return Received
	case opForgive:
		return Forgiven
	case opCount:
		return Outstanding
	}
	if old == Absent {
		return Requested
	}
	return old
}

type changes struct {
	changed, fromOutstanding uint64
	placed                   []ByteRange
}

// paint applies o to the bytes of r at or above rcv_nxt, rebuilding the span
// list, and then advances rcv_nxt over the settled spans it reaches.
func (s *Scoreboard) paint(r ByteRange, o op, placed []ByteRange) changes {
	ch := changes{placed: placed}
	r = s.clip(r)
	if r.empty() {
		return ch
	}
	out := s.spare[:0]
	pos := r.Start // the next byte of r not yet painted
	for _, sp := range s.spans {
		if sp.End <= r.Start || sp.Start >= r.End {
			if sp.Start >= r.End && pos < r.End {
				out = s.piece(out, &ch, ByteRange{pos, r.End}, Absent, o)
				pos = r.End
			}
			out = appendSpan(out, sp)
			continue
		}
		if sp.Start < r.Start {
			out = appendSpan(out, span{ByteRange{sp.Start, r.Start}, sp.st})
		}
		if pos < sp.Start {
			out = s.piece(out, &ch, ByteRange{pos, sp.Start}, Absent, o)
		}
		end := min(sp.End, r.End)
		out = s.piece(out, &ch, ByteRange{max(sp.Start, r.Start), end}, sp.st, o)
		pos = end
		if sp.End > r.End {
			out = appendSpan(out, span{ByteRange{r.End, sp.End}, sp.st})
		}
	}
	if pos < r.End {
		out = s.piece(out, &ch, ByteRange{pos, r.End}, Absent, o)
	}
	s.spare = s.spans
	s.spans = s.advance(out)
	return ch
}

// piece paints one run of bytes that were all in state old.
func (s *Scoreboard) piece(out []span, ch *changes, r ByteRange, old State, o op) []span {
	st := o.apply(old)
	if st != old {
		n := uint64(r.Len())
		ch.changed += n
		if old == Outstanding {
			ch.fromOutstanding += n
		}
		switch st {
		case Received:
			s.received += n
			ch.placed = appendRange(ch.placed, r)
		case Forgiven:
			s.forgivenN += n
		}
	}
	if st == Absent {
		return out
	}
	return appendSpan(out, span{r, st})
}

// advance moves rcv_nxt over the settled spans that start at it, keeping
// the forgiven ones for the completion report, and returns the rest.
func (s *Scoreboard) advance(out []span) []span {
	i := 0
	for ; i < len(out) && out[i].Start == s.rcvNxt && out[i].st.Settled(); i++ {
		if out[i].st == Forgiven {
			s.forgiven = appendRange(s.forgiven, out[i].ByteRange)
		}
		s.rcvNxt = out[i].End
	}
	n := copy(out, out[i:])
	return out[:n]
}

// appendSpan appends sp, merging it into the last span when they touch and
// share a state.
func appendSpan(out []span, sp span) []span {
	if sp.empty() {
		return out
	}
	if n := len(out); n > 0 && out[n-1].End == sp.Start && out[n-1].st == sp.st {
		out[n-1].End = sp.End
		return out
	}
	return append(out, sp)
}

// appendRange appends r to a sorted list, merging it into the last range
// when they touch.
func appendRange(dst []ByteRange, r ByteRange) []ByteRange {
	if r.empty() {
		return dst
	}
	if n := len(dst); n > 0 && dst[n-1].End >= r.Start {
		dst[n-1].End = max(dst[n-1].End, r.End)
		return dst
	}
	return append(dst, r)
}

func containsOffset(rs []ByteRange, off uint32) bool {
	i := sort.Search(len(rs), func(i int) bool { return rs[i].End > off })
	return i < len(rs) && rs[i].Start <= off
}
