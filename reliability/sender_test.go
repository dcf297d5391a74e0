package reliability

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/wire"
)

func ackOf(cum wire.PSN, sack uint64, echo wire.PSN) wire.AckFields {
	return wire.AckFields{Flow: testFlow, CumPSN: cum, SackBase: cum, Sack: sack, EchoPSN: echo}
}

// drain hands out every segment the sender will send now.
func drain(s *Sender, now time.Duration) []Segment {
	var segs []Segment
	for {
		seg, ok := s.Next(now)
		if !ok {
			return segs
		}
		segs = append(segs, seg)
	}
}

// "Post(msg, length) segmentation into MTU-sized segments with
// consecutive PSNs; flags First/Last; AckReq on the last segment."
func TestSenderSegmentation(t *testing.T) {
	s := newSender(t, func(c *SenderConfig) { c.TailProbe = false })
	if err := s.Post(1, 10000); err != nil {
		t.Fatal(err)
	}
	if err := s.Post(2, 0); err != nil {
		t.Fatal(err)
	}
	segs := drain(s, 0)
	want := []Segment{
		{PSN: 0, Msg: 1, Offset: 0, Len: 4096, MsgLen: 10000, Flags: wire.DataFirst, Subflows: 1},
		{PSN: 1, Msg: 1, Offset: 4096, Len: 4096, MsgLen: 10000, Subflows: 1},
		{PSN: 2, Msg: 1, Offset: 8192, Len: 1808, MsgLen: 10000, Flags: wire.DataLast | wire.DataAckReq, Subflows: 1},
		{PSN: 3, Msg: 2, Offset: 0, Len: 0, MsgLen: 0, Flags: wire.DataFirst | wire.DataLast | wire.DataAckReq, Subflows: 1},
	}
	if len(segs) != len(want) {
		t.Fatalf("%d segments, want %d: %+v", len(segs), len(want), segs)
	}
	for i := range want {
		if segs[i] != want[i] {
			t.Errorf("segment %d: %+v, want %+v", i, segs[i], want[i])
		}
	}
	if err := s.Post(2, 10); !errors.Is(err, ErrMsgOrder) {
		t.Errorf("reposting id 2: %v, want ErrMsgOrder", err)
	}
}

// IRN's BDP-FC: "A QP may have at most one BDP of unacknowledged packets
// in flight, so packets 14-16 wait until the window has room."
func TestSenderWindow(t *testing.T) {
	s := newSender(t, func(c *SenderConfig) { c.Window = 3 * 4096; c.TailProbe = false })
	_ = s.Post(1, 10*4096)
	if got := len(drain(s, 0)); got != 3 {
		t.Fatalf("%d segments in a 3-packet window, want 3", got)
	}
	t.Log("# a SACK of PSN 1 opens nothing: the window spans from the lowest unacknowledged PSN")
	if _, err := s.OnAck(0, ackOf(0, 1<<1, 1)); err != nil {
		t.Fatal(err)
	}
	if got := len(drain(s, 0)); got != 0 {
		t.Fatalf("%d segments after a SACK behind a hole, want 0", got)
	}
	t.Log("# acknowledging PSN 0 slides the window past PSN 1 too")
	if _, err := s.OnAck(0, ackOf(2, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if segs := drain(s, 0); len(segs) != 2 || segs[0].PSN != 3 {
		t.Fatalf("segments %+v after the window slid by two, want PSNs 3 and 4", segs)
	}
	if s.OutstandingBytes() != 3*4096 {
		t.Errorf("outstanding %d bytes, want %d", s.OutstandingBytes(), 3*4096)
	}
}

// A congestion window bounds the bytes sent and not acknowledged for new
// data: unlike the BDP-FC window a SACK opens it; a retransmission is not
// held back; one segment may go with nothing unacknowledged.
func TestSenderCongestionWindow(t *testing.T) {
	s := newSender(t, func(c *SenderConfig) { c.TailProbe = false })
	s.SetCongestionWindow(3 * 4096)
	_ = s.Post(1, 10*4096)
	if got := len(drain(s, 0)); got != 3 || s.UnackedBytes() != 3*4096 {
		t.Fatalf("%d segments, %d bytes unacknowledged in a 3-packet window; want 3, %d", got, s.UnackedBytes(), 3*4096)
	}
	t.Log("# a SACK of PSN 1 takes its bytes out of flight: one more segment")
	if _, err := s.OnAck(0, ackOf(0, 1<<1, 1)); err != nil {
		t.Fatal(err)
	}
	if segs := drain(s, 0); len(segs) != 1 || segs[0].PSN != 3 || s.UnackedBytes() != 3*4096 {
		t.Fatalf("segments %+v, %d unacknowledged after the SACK; want PSN 3, %d", segs, s.UnackedBytes(), 3*4096)
	}
	t.Log("# a trim of PSN 0: its retransmission goes although the window is full")
	res, err := s.OnNack(0, wire.NackFields{Flow: testFlow, PSN: 0, Count: 1, Reason: wire.NackTrimmed})
	if err != nil || res.Queued != 1 || res.QueuedBytes != 4096 {
		t.Fatalf("OnNack: %+v, %v; want one PSN, 4096 bytes queued", res, err)
	}
	if segs := drain(s, 0); len(segs) != 1 || !segs[0].Retx || segs[0].PSN != 0 {
		t.Fatalf("segments %+v, want the retransmission of PSN 0 alone", segs)
	}
	t.Log("# a window below one segment still lets one go once everything is acknowledged")
	s.SetCongestionWindow(1)
	if _, err := s.OnAck(0, ackOf(4, 0, 0)); err != nil {
		t.Fatal(err)
	}
	if got := len(drain(s, 0)); got != 1 || s.UnackedBytes() != 4096 {
		t.Fatalf("%d segments with nothing in flight and a 1-byte window, want 1", got)
	}
	if st := s.Stats(); st.CwndBlocked != 4 {
		t.Errorf("CwndBlocked %d, want 4 (one per refused Next)", st.CwndBlocked)
	}
	s.SetCongestionWindow(0)
	if got := len(drain(s, 0)); got != 5 || s.UnackedBytes() != 6*4096 {
		t.Fatalf("window off: %d segments, %d unacknowledged; want 5, %d", got, s.UnackedBytes(), 6*4096)
	}

	t.Log("# an RTO that un-acknowledges a falsely SACKed head counts its bytes again")
	r := newSender(t, func(c *SenderConfig) { c.TailProbe = false })
	_ = r.Post(1, 2*4096)
	drain(r, 0)
	if _, err := r.OnAck(0, ackOf(0, 1, 0)); err != nil || r.UnackedBytes() != 4096 {
		t.Fatalf("after a SACK of the head: %d unacknowledged (%v), want 4096", r.UnackedBytes(), err)
	}
	at, _ := r.NextDeadline()
	r.OnTimer(at)
	if r.UnackedBytes() != 2*4096 {
		t.Errorf("after the RTO: %d unacknowledged, want %d", r.UnackedBytes(), 2*4096)
	}
}

func TestSenderMaxInFlight(t *testing.T) {
	s := newSender(t, func(c *SenderConfig) { c.MaxInFlight = 4; c.MTU = 10; c.TailProbe = false })
	_ = s.Post(1, 1000)
	if got := len(drain(s, 0)); got != 4 {
		t.Fatalf("%d segments with MaxInFlight 4", got)
	}
}

// "a trimmed-header NACK is answered within the same call, no timer".
func TestTrimmedNackAnsweredWithinTheCall(t *testing.T) {
	s := newSender(t, nil)
	r := newReceiver(t, NoForgiveness{}, nil)
	_ = s.Post(1, 3*4096)
	segs := drain(s, 0)
	deadline, _ := s.NextDeadline()

	// The switch trims the second packet; its header reaches the receiver.
	h := trimmed(segs[1].PSN, segs[1].Msg, segs[1].Offset, segs[1].Len, segs[1].MsgLen)
	mustPacket(t, r, h)
	nacks := takeNacks(r)
	if len(nacks) != 1 || nacks[0].Reason != wire.NackTrimmed {
		t.Fatalf("receiver NACKs %+v, want one trimmed", nacks)
	}
	now := 3 * time.Microsecond
	res, err := s.OnNack(now, nacks[0])
	if err != nil || res.Queued != 1 {
		t.Fatalf("OnNack queued %d (%v), want 1", res.Queued, err)
	}
	seg, ok := s.Next(now)
	if !ok || seg.PSN != segs[1].PSN || !seg.Retx || seg.Flags&wire.DataRetx == 0 {
		t.Fatalf("Next after the NACK: %+v %v, want the retransmission of PSN %d", seg, ok, segs[1].PSN)
	}
	if now >= deadline {
		t.Fatal("test broken: the RTO would have fired anyway")
	}
	if st := s.Stats(); st.RTOs != 0 || st.RetxPackets != 1 || st.Nacks.Trimmed != 1 {
		t.Errorf("stats %+v, want 1 retransmission by a trimmed NACK and no RTO", st)
	}
}

// "RTO_low (100 us) when <= N (3) packets in flight, RTO_high (320 us)
// otherwise."
func TestRTOLowAndHigh(t *testing.T) {
	s := newSender(t, func(c *SenderConfig) { c.TailProbe = false })
	if _, armed := s.NextDeadline(); armed {
		t.Fatal("timer armed with nothing in flight")
	}
	_ = s.Post(1, 10*4096)
	for i := 1; i <= 5; i++ {
		now := time.Duration(i) * time.Microsecond
		if _, ok := s.Next(now); !ok {
			t.Fatal("window closed")
		}
		want := now + DefaultRTOLow
		if i > DefaultRTOLowPackets {
			want = now + DefaultRTOHigh
		}
		if got, _ := s.NextDeadline(); got != want {
			t.Errorf("%d in flight: deadline %v, want %v", i, got, want)
		}
	}
	t.Log("# acknowledging down to 2 in flight brings RTO_low back")
	now := 10 * time.Microsecond
	_, _ = s.OnAck(now, ackOf(3, 0, 2))
	if got, _ := s.NextDeadline(); got != now+DefaultRTOLow {
		t.Errorf("2 in flight: deadline %v, want %v", got, now+DefaultRTOLow)
	}
	_, _ = s.OnAck(now, ackOf(5, 0, 4))
	if _, armed := s.NextDeadline(); armed {
		t.Error("timer armed after everything was acknowledged")
	}
}

// On a timeout selective repeat resends what is not acknowledged, skipping
// what a SACK covered; go-back-N rewinds to the lowest unacknowledged PSN.
func TestRTORetransmits(t *testing.T) {
	for _, mode := range []Mode{SelectiveRepeat, GoBackN} {
		s := newSender(t, func(c *SenderConfig) { c.Mode = mode; c.TailProbe = false })
		_ = s.Post(1, 5*4096)
		drain(s, 0)
		_, _ = s.OnAck(0, ackOf(1, 1<<2, 3)) // 0 and 3 arrived
		deadline, _ := s.NextDeadline()
		s.OnTimer(deadline - 1)
		if s.Stats().RTOs != 0 {
			t.Fatalf("%v: RTO before the deadline", mode)
		}
		s.OnTimer(deadline)
		var got []wire.PSN
		for _, seg := range drain(s, deadline) {
			got = append(got, seg.PSN)
		}
		// PSN 3 is acknowledged, so even go-back-N's rewind skips it.
		want := []wire.PSN{1, 2, 4}
		if s.Stats().RTOs != 1 || !equalPSNs(got, want) {
			t.Errorf("%v: RTO resent %v, want %v", mode, got, want)
		}
	}
}

func equalPSNs(a, b []wire.PSN) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// Karn's rule: an ACK of a retransmitted packet gives no RTT sample.
func TestKarnRule(t *testing.T) {
	s := newSender(t, func(c *SenderConfig) { c.TailProbe = false })
	_ = s.Post(1, 2*4096)
	drain(s, 0)
	res, _ := s.OnAck(30*time.Microsecond, ackOf(1, 0, 0))
	if res.RTT != 30*time.Microsecond || s.RTT().Min != 30*time.Microsecond {
		t.Fatalf("RTT %v (min %v), want 30us", res.RTT, s.RTT().Min)
	}
	_, _ = s.OnNack(40*time.Microsecond, wire.NackFields{Flow: testFlow, Reason: wire.NackGap, PSN: 1, Count: 1})
	drain(s, 40*time.Microsecond)
	res, _ = s.OnAck(50*time.Microsecond, ackOf(2, 0, 1))
	if res.RTT != 0 || s.Stats().RTTSamples != 1 {
		t.Errorf("sampled %v from a retransmitted packet", res.RTT)
	}
}

// "message completions (all segments acked) appended to an outbox": a
// message completes once a cumulative ACK covers its segments. A SACK
// only stops their retransmission: it may be false (forged, or reneged),
// and the sender must never report bytes the receiver lacks.
func TestSenderCompletions(t *testing.T) {
	s := newSender(t, func(c *SenderConfig) { c.TailProbe = false })
	_ = s.Post(1, 4096+1)
	_ = s.Post(2, 10)
	drain(s, 0)
	res, _ := s.OnAck(0, ackOf(0, 1<<1|1<<2, 2)) // PSNs 1 and 2: message 2 and half of 1
	if len(s.Out.Completions) != 0 || res.NewlyAcked != 2 || s.InFlight() != 1 || s.Una() != 0 {
		t.Fatalf("completions %+v, newly %d, in flight %d, una %d; want no completion on a SACK, 1 in flight",
			s.Out.Completions, res.NewlyAcked, s.InFlight(), s.Una())
	}
	res, _ = s.OnAck(0, ackOf(3, 0, 0))
	want := []SendCompletion{{1, 4097}, {2, 10}}
	if len(s.Out.Completions) != 2 || s.Out.Completions[0] != want[0] || s.Out.Completions[1] != want[1] ||
		!s.Idle() || res.NewlyAcked != 1 {
		t.Fatalf("completions %+v idle %v newly %d; want %v on the cumulative ACK, an idle sender",
			s.Out.Completions, s.Idle(), res.NewlyAcked, want)
	}
}

// A SACK that names a PSN never sent is refused whole: nothing changes.
func TestSenderRefusesSackBeyondSent(t *testing.T) {
	s := newSender(t, func(c *SenderConfig) { c.TailProbe = false })
	_ = s.Post(1, 3*4096)
	drain(s, 0)
	for _, a := range []wire.AckFields{
		ackOf(0, 1<<1|1<<3, 0),                                           // PSN 3 was never sent
		{Flow: testFlow, CumPSN: 0, SackBase: 3, Sack: 1},                // base beyond
		{Flow: testFlow, CumPSN: 0, SackBase: 0xFFFFFFF0, Sack: 1 << 63}, // wraps past nextPSN
	} {
		before := s.Stats()
		res, err := s.OnAck(0, a)
		if !errors.Is(err, ErrBadAck) || res.NewlyAcked != 0 || s.InFlight() != 3 || s.Una() != 0 {
			t.Errorf("ACK %+v: %v, newly %d, in flight %d; want refused with no change", a, err, res.NewlyAcked, s.InFlight())
		}
		if after := s.Stats(); after.Acks != before.Acks || after.Malformed != before.Malformed+1 {
			t.Errorf("ACK %+v: stats %+v -> %+v", a, before, after)
		}
	}
}

// A false SACK of the PSN the receiver waits for is undone by the RTO:
// the cumulative PSN says the receiver lacks it.
func TestRTOResendsFalselySackedHead(t *testing.T) {
	s := newSender(t, func(c *SenderConfig) { c.TailProbe = false })
	_ = s.Post(1, 2*4096)
	drain(s, 0)
	if _, err := s.OnAck(0, ackOf(0, 1<<0|1<<1, 0)); err != nil { // claims both, cumulative 0
		t.Fatal(err)
	}
	if len(s.Out.Completions) != 0 {
		t.Fatalf("a SACK completed %+v", s.Out.Completions)
	}
	at, ok := s.NextDeadline()
	if !ok {
		t.Fatal("no retransmission timer with the head unsettled")
	}
	s.OnTimer(at)
	seg, ok := s.Next(at)
	if !ok || seg.PSN != 0 || !seg.Retx {
		t.Fatalf("after the RTO: %+v, %v; want PSN 0 resent", seg, ok)
	}
}

// Go-back-N: "rewinds to the PSN and resends everything from there".
func TestSenderGoBackN(t *testing.T) {
	s := newSender(t, func(c *SenderConfig) { c.Mode = GoBackN; c.TailProbe = false })
	_ = s.Post(1, 6*4096)
	drain(s, 0)
	res, err := s.OnNack(0, wire.NackFields{Flow: testFlow, Reason: wire.NackGap, PSN: 2, Count: 1})
	if err != nil || res.Queued != 4 {
		t.Fatalf("queued %d (%v), want 4", res.Queued, err)
	}
	if s.Una() != 2 {
		t.Errorf("una %d: the NACK names the expected PSN, so 0 and 1 arrived", s.Una())
	}
	var got []wire.PSN
	for _, seg := range drain(s, 0) {
		got = append(got, seg.PSN)
	}
	if !equalPSNs(got, []wire.PSN{2, 3, 4, 5}) {
		t.Errorf("resent %v, want [2 3 4 5]", got)
	}
	if res, _ := s.OnNack(0, wire.NackFields{Flow: testFlow, Reason: wire.NackGap, PSN: 1, Count: 1}); res.Queued != 0 {
		t.Errorf("a stale NACK queued %d", res.Queued)
	}
}

// A NACK with PSN count 0 names its request by bytes.
func TestSenderNackByByteRange(t *testing.T) {
	s := newSender(t, func(c *SenderConfig) { c.MTU = 100; c.TailProbe = false })
	_ = s.Post(1, 500)
	drain(s, 0)
	res, _ := s.OnNack(0, wire.NackFields{Flow: testFlow, Reason: wire.NackTrimmed, Msg: 1, Offset: 150, Length: 100})
	var got []wire.PSN
	for _, seg := range drain(s, 0) {
		got = append(got, seg.PSN)
	}
	if res.Queued != 2 || !equalPSNs(got, []wire.PSN{1, 2}) {
		t.Errorf("queued %d, resent %v; want PSNs 1 and 2 (bytes 100-299)", res.Queued, got)
	}
}

// A byte-range NACK (PSN count 0) resends exactly the segments holding a
// byte of [Offset, Offset+Length) of its message: a range that ends or
// starts on a segment boundary takes no neighbour, one past the message's
// end takes its last segment only or nothing, and an empty range (length
// 0) names no byte and resends nothing, wherever it lies. Message 1 is 500
// bytes at MTU 100 (PSNs 0-4, segment i holding bytes [100i, 100i+100));
// message 2 is 250 bytes (PSNs 5-7).
func TestSenderNackByteRangeBoundaries(t *testing.T) {
	cases := []struct {
		name        string
		msg         uint32
		off, length uint32
		want        []wire.PSN
	}{
		{"one segment, both ends on boundaries", 1, 100, 100, []wire.PSN{1}},
		{"two segments on boundaries", 1, 100, 200, []wire.PSN{1, 2}},
		{"the first segment", 1, 0, 100, []wire.PSN{0}},
		{"ends one byte past a boundary", 1, 100, 101, []wire.PSN{1, 2}},
		{"starts one byte before a boundary", 1, 199, 1, []wire.PSN{1}},
		{"starts on a boundary", 1, 200, 1, []wire.PSN{2}},
		{"straddles a boundary", 1, 199, 2, []wire.PSN{1, 2}},
		{"the last segment, to the message's end", 1, 400, 100, []wire.PSN{4}},
		{"the last segment and past the message's end", 1, 450, 1000, []wire.PSN{4}},
		{"from the message's end on", 1, 500, 100, nil},
		{"the whole message", 1, 0, 500, []wire.PSN{0, 1, 2, 3, 4}},
		{"the short last segment of message 2", 2, 200, 50, []wire.PSN{7}},
		{"message 2 to its end, on a boundary", 2, 100, 150, []wire.PSN{6, 7}},
		{"length 0 on a boundary", 1, 200, 0, nil},
		{"length 0 inside a segment", 1, 150, 0, nil},
		{"length 0 at the message's start", 1, 0, 0, nil},
		{"length 0 at the message's end", 1, 500, 0, nil},
		{"a range that wraps past 2^32", 1, 300, ^uint32(0), nil},
	}
	for _, c := range cases {
		s := newSender(t, func(c *SenderConfig) { c.MTU = 100; c.TailProbe = false })
		_ = s.Post(1, 500)
		_ = s.Post(2, 250)
		if sent := drain(s, 0); len(sent) != 8 {
			t.Fatalf("%d segments sent, want 8", len(sent))
		}
		res, err := s.OnNack(0, wire.NackFields{Flow: testFlow, Reason: wire.NackTrimmed, Msg: c.msg, Offset: c.off, Length: c.length})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		var got []wire.PSN
		for _, seg := range drain(s, 0) {
			got = append(got, seg.PSN)
		}
		wantBytes := 0
		for _, p := range c.want {
			wantBytes += 100
			if p == 7 {
				wantBytes -= 50
			}
		}
		if !equalPSNs(got, c.want) || res.Queued != len(c.want) || res.QueuedBytes != wantBytes {
			t.Errorf("%s (message %d, bytes [%d, %d+%d)): queued %d (%d bytes), resent %v; want %v (%d bytes)",
				c.name, c.msg, c.off, c.off, c.length, res.Queued, res.QueuedBytes, got, c.want, wantBytes)
		}
	}
}

// PFLD: a tail probe on every subflow after its last packet, a periodic
// probe every K packets of a subflow, a retransmission probe with each
// retransmission.
func TestSenderProbes(t *testing.T) {
	s := newSender(t, func(c *SenderConfig) {
		c.MTU, c.Subflows, c.ProbeEvery, c.RetxProbe = 10, 4, 2, true
	})
	_ = s.Post(1, 100) // PSNs 0..9 over 4 subflows
	drain(s, 0)
	type pr struct {
		k   wire.ProbeKind
		psn wire.PSN
	}
	var got []pr
	for _, p := range s.Out.Probes {
		if p.Subflow != uint8(uint32(p.PSN)%4) || p.Subflows != 4 || p.Flow != testFlow {
			t.Errorf("probe %+v on the wrong subflow", p)
		}
		got = append(got, pr{p.Kind, p.PSN})
	}
	// Periodic after the 2nd packet of each subflow (PSNs 4..7); at the end
	// tail probes on subflows whose last packet no probe covered yet.
	want := []pr{{wire.ProbePeriodic, 4}, {wire.ProbePeriodic, 5}, {wire.ProbePeriodic, 6}, {wire.ProbePeriodic, 7},
		{wire.ProbeTail, 8}, {wire.ProbeTail, 9}}
	if len(got) != len(want) {
		t.Fatalf("probes %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("probe %d: %v, want %v", i, got[i], want[i])
		}
	}
	s.Out.Reset()
	_, _ = s.OnNack(0, wire.NackFields{Flow: testFlow, Reason: wire.NackGap, PSN: 3, Count: 1})
	drain(s, 0)
	if p := s.Out.Probes; len(p) != 1 || p[0].Kind != wire.ProbeRetx || p[0].PSN != 3 || p[0].Subflow != 3 {
		t.Errorf("probes %+v, want one retransmission probe for PSN 3", p)
	}
}

func TestSenderRejectsBadInput(t *testing.T) {
	s := newSender(t, nil)
	_ = s.Post(1, 4096)
	drain(s, 0)
	if _, err := s.OnAck(0, ackOf(5, 0, 0)); !errors.Is(err, ErrBadAck) {
		t.Errorf("ACK of unsent PSNs: %v", err)
	}
	if _, err := s.OnNack(0, wire.NackFields{Flow: testFlow, PSN: 1, Count: 1}); !errors.Is(err, ErrBadNack) {
		t.Errorf("NACK of an unsent PSN: %v", err)
	}
	a := ackOf(1, 0, 0)
	a.Flow++
	if _, err := s.OnAck(0, a); !errors.Is(err, ErrWrongFlow) {
		t.Errorf("ACK of another flow: %v", err)
	}
	if s.Idle() || s.Stats().Malformed != 3 {
		t.Errorf("bad input changed state or went uncounted: %+v", s.Stats())
	}
}

func TestSenderConfigValidateNamesField(t *testing.T) {
	for field, edit := range map[string]func(*SenderConfig){
		"Mode":          func(c *SenderConfig) { c.Mode = 5 },
		"MTU":           func(c *SenderConfig) { c.MTU = 0 },
		"Window":        func(c *SenderConfig) { c.Window = 0 },
		"MaxInFlight":   func(c *SenderConfig) { c.MaxInFlight = 0 },
		"RTOLow":        func(c *SenderConfig) { c.RTOLow = 0 },
		"RTOHigh":       func(c *SenderConfig) { c.RTOHigh = c.RTOLow - 1 },
		"RTOLowPackets": func(c *SenderConfig) { c.RTOLowPackets = -1 },
		"Subflows":      func(c *SenderConfig) { c.Subflows = 3 },
		"ProbeEvery":    func(c *SenderConfig) { c.ProbeEvery = -1 },
	} {
		c := DefaultSenderConfig()
		edit(&c)
		err := c.Validate()
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "SenderConfig."+field) {
			t.Errorf("%s: %v", field, err)
		}
	}
	if err := DefaultSenderConfig().Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}

// An ACK whose cumulative PSN is exactly 2^31 from una cannot be ordered by
// serial arithmetic; it must be refused, not walked (found by fuzzing the
// NIC with a forged ACK on an idle flow).
func TestAckHalfSpaceAwayIsRefused(t *testing.T) {
	s, err := NewSender(FlowInfo{Flow: 1, Local: 1, Peer: 2}, DefaultSenderConfig())
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.OnAck(0, wire.AckFields{Flow: 1, CumPSN: 1 << 31})
	if !errors.Is(err, ErrBadAck) {
		t.Fatalf("OnAck(CumPSN 2^31 on an idle flow) = %v, want ErrBadAck", err)
	}
}
