package nic_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/wire"
)

var (
	keyAB = nic.FlowKey{Peer: 2, ID: 1} // flow 1 at host 1
	keyBA = nic.FlowKey{Peer: 1, ID: 1} // flow 1 at host 2
)

// "Each flow end picks a random non-zero tag at CreateFlow, and its
// initial PSN is derived from its own tag": after one exchange each end
// has bound the other's tag, and data starts at the PSN the sender's tag
// gives, not at 0, carrying both tags.
func TestHandshakeBindsTagsAndStartsPSNsFromThem(t *testing.T) {
	p := newPair(t, 64<<10)
	ra, _ := p.a.Flow(keyAB)
	rb, _ := p.b.Flow(keyBA)
	if ra.LocalTag == 0 || rb.LocalTag == 0 || ra.LocalTag == rb.LocalTag {
		t.Fatalf("tags %#x and %#x: want two distinct non-zero tags", ra.LocalTag, rb.LocalTag)
	}
	if ra.PeerTag != rb.LocalTag || rb.PeerTag != ra.LocalTag {
		t.Fatalf("after the handshake host 1 bound %#x, host 2 bound %#x; want %#x and %#x",
			ra.PeerTag, rb.PeerTag, rb.LocalTag, ra.LocalTag)
	}
	if err := p.a.PostSend(p.now, nic.SendReq{Key: keyAB, WR: 1, Region: p.region[0], Length: 8192}); err != nil {
		t.Fatal(err)
	}
	pkt, _, ok := p.a.Transmit(p.now, p.buf)
	if !ok || wire.Header(pkt).Type() != wire.TypeData {
		t.Fatalf("no DATA after the handshake: %v", ok)
	}
	d := wire.Data(pkt)
	if want := wire.InitialPSN(ra.LocalTag); d.PSN() != want || want == 0 {
		t.Errorf("first PSN %d, want %d (from the sender's tag)", d.PSN(), want)
	}
	if got := d.Tags(); got != (wire.Tags{Dst: rb.LocalTag, Src: ra.LocalTag}) {
		t.Errorf("DATA tags %+v, want the receiver's as destination and the sender's as source", got)
	}
	// A second engine with another seed draws other tags: they are not a
	// function of the host and flow id alone.
	cfg := nicConfig(1)
	cfg.TagSeed[0] = 1
	e, err := nic.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateFlow(0, nic.FlowSpec{Peer: 2, ID: 1}); err != nil {
		t.Fatal(err)
	}
	if r, _ := e.Flow(keyAB); r.LocalTag == ra.LocalTag {
		t.Errorf("another TagSeed drew the same tag %#x", r.LocalTag)
	}
}

// Until the peer's tag is known no DATA leaves, and CONNECT is retried
// with a doubling gap up to a bound; a send waiting for a peer that never
// answers fails after FailAfter, as a send to a dead peer does.
func TestConnectRetriedUntilBoundThenSendsFail(t *testing.T) {
	cfg := nicConfig(1)
	e, err := nic.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateFlow(0, nic.FlowSpec{Peer: 2, ID: 1}); err != nil {
		t.Fatal(err)
	}
	r, _ := e.RegisterMemory(make([]byte, 4096))
	if err := e.PostSend(0, nic.SendReq{Key: keyAB, WR: 1, Region: r, Length: 4096}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, wire.DataLen+4096)
	var at []time.Duration
	var failed error
	for now := time.Duration(0); now < 2*cfg.FailAfter && failed == nil; {
		e.Advance(now)
		for {
			pkt, _, ok := e.Transmit(now, buf)
			if !ok {
				break
			}
			if typ := wire.Header(pkt).Type(); typ != wire.TypeConnect {
				t.Fatalf("%v sent before the peer's tag is known", typ)
			}
			if tags, _ := wire.Header(pkt).Tags(); tags.Dst != 0 {
				t.Fatalf("CONNECT names destination tag %#x before any was learned", tags.Dst)
			}
			at = append(at, now)
		}
		for _, c := range e.Completions() {
			failed = c.Err
		}
		if failed != nil {
			break
		}
		next, ok := e.NextDeadline()
		if !ok {
			t.Fatal("no deadline while the handshake is pending")
		}
		now = max(next, now+time.Microsecond)
	}
	if !errors.Is(failed, nic.ErrPeerTimeout) {
		t.Fatalf("send completed with %v, want ErrPeerTimeout", failed)
	}
	rto := cfg.Sender.RTOHigh
	if len(at) < 5 || at[1]-at[0] != rto || at[2]-at[1] != 2*rto {
		t.Fatalf("CONNECTs at %v: want the first retry one RTO (%v) later, then doubling", at, rto)
	}
	for i := 2; i < len(at); i++ {
		if gap := at[i] - at[i-1]; gap > 64*rto || gap < at[i-1]-at[i-2] && gap != 64*rto {
			t.Fatalf("CONNECT gap %v after %v: want doubling, bounded by 64 RTOs", gap, at[i-1]-at[i-2])
		}
	}
	t.Logf("%d CONNECTs in %v before the send failed", len(at), at[len(at)-1])
}

// "An end binds the peer's tag only from a packet whose destination tag
// equals its own tag, so a forged CONNECT can bind nothing": a CONNECT is
// answered statelessly, an ACCEPT or DATA with a wrong destination tag is
// refused and counted, and only a packet carrying the flow's own tag binds.
func TestForgedHandshakeBindsNothing(t *testing.T) {
	e, err := nic.New(nicConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateFlow(0, nic.FlowSpec{Peer: 2, ID: 1}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, wire.DataLen+4096)
	drain := func() (out []wire.Connect) {
		for {
			pkt, _, ok := e.Transmit(0, buf)
			if !ok {
				return out
			}
			if typ := wire.Header(pkt).Type(); typ == wire.TypeAccept {
				out = append(out, wire.Connect(append([]byte(nil), pkt...)))
			}
		}
	}
	drain() // the flow's own CONNECT
	mine, _ := e.Flow(keyAB)
	forged := uint32(0xF0F0F0F0)
	send := func(pkt []byte) { e.Receive(0, pkt, 0) }
	send(wire.AppendConnect(nil, wire.ConnectFields{Src: 2, Dst: 1, Flow: 1, Tags: wire.Tags{Src: forged}}))
	acc := drain()
	if len(acc) != 1 || acc[0].Tags() != (wire.Tags{Dst: forged, Src: mine.LocalTag}) {
		t.Fatalf("a CONNECT was answered with %d ACCEPTs, want one to its source tag", len(acc))
	}
	send(wire.AppendConnect(nil, wire.ConnectFields{Accept: true, Src: 2, Dst: 1, Flow: 1,
		Tags: wire.Tags{Dst: mine.LocalTag ^ 1, Src: forged}}))
	send(wire.AppendConnect(nil, wire.ConnectFields{Src: 2, Dst: 1, Flow: 1,
		Tags: wire.Tags{Dst: mine.LocalTag ^ 2, Src: forged}}))
	data, err := wire.AppendData(nil, wire.DataFields{Src: 2, Dst: 1, Flow: 1, Tags: wire.Tags{Dst: 12345, Src: forged},
		PSN: wire.InitialPSN(forged), MsgLen: 4}, []byte("evil"))
	if err != nil {
		t.Fatal(err)
	}
	send(data)
	r, _ := e.Flow(keyAB)
	st := e.Stats()
	if r.PeerTag != 0 {
		t.Fatalf("forged handshake bound peer tag %#x", r.PeerTag)
	}
	if r.Stats.WrongTag != 3 || st.WrongTag != 3 || len(drain()) != 0 {
		t.Errorf("wrong tags counted %d (host %d), want 3, and no ACCEPT for a CONNECT with a wrong tag",
			r.Stats.WrongTag, st.WrongTag)
	}
	// A packet naming another source host is not this flow's, whatever
	// tags it carries: the flow key holds the peer's host id.
	other, _ := wire.AppendData(nil, wire.DataFields{Src: 3, Dst: 1, Flow: 1, Tags: wire.Tags{Dst: mine.LocalTag, Src: forged},
		PSN: wire.InitialPSN(forged), MsgLen: 4}, []byte("evil"))
	send(other)
	if r, _ = e.Flow(keyAB); r.PeerTag != 0 || e.Stats().UnknownFlow != 1 {
		t.Errorf("DATA from host 3 on host 2's flow: peer tag %#x, unknown flow %d", r.PeerTag, e.Stats().UnknownFlow)
	}
	// The real ACCEPT binds.
	bindAlone(t, e, keyAB, 0x1234)
}

// "A packet with the right destination tag but a source tag different
// from the bound peer tag means the peer's flow was recreated": the
// recreated end refuses the old incarnation's packets at the tag; its
// CONNECT, naming the old end's tag, restarts the old end's flow: the send
// the old incarnation was moving fails with ErrPeerRestarted, a receive no
// packet touched stays posted, and the next transfers complete both ways.
func TestRecreatedPeerRestartsFlow(t *testing.T) {
	p := newPair(t, 64<<10)
	if err := p.a.PostSend(p.now, nic.SendReq{Key: keyAB, WR: 1, Region: p.region[0], Length: 32 << 10}); err != nil {
		t.Fatal(err)
	}
	if err := p.a.PostRecv(nic.RecvReq{Key: keyAB, WR: 2, Region: p.region[0], Off: 32 << 10, Length: 32 << 10}); err != nil {
		t.Fatal(err)
	}
	// Host 1's data leaves; host 2 is "restarted": its flow is recreated
	// before the data arrives.
	var stale [][]byte
	for {
		pkt, _, ok := p.a.Transmit(p.now, p.buf)
		if !ok {
			break
		}
		stale = append(stale, append([]byte(nil), pkt...))
	}
	if err := p.b.DestroyFlow(keyBA); err != nil {
		t.Fatal(err)
	}
	if err := p.b.CreateFlow(p.now, nic.FlowSpec{Peer: 1, ID: 1}); err != nil {
		t.Fatal(err)
	}
	for _, pkt := range stale {
		p.b.Receive(p.now, pkt, 0)
	}
	if st := p.b.Stats(); st.WrongTag != uint64(len(stale)) || len(stale) == 0 {
		t.Fatalf("new incarnation: %d stale packets, %d refused as wrong tag", len(stale), st.WrongTag)
	}
	p.exchange() // the new CONNECT, host 1's ACCEPT, host 2's CONNECT naming host 1's tag
	ra, _ := p.a.Flow(keyAB)
	rb, _ := p.b.Flow(keyBA)
	if p.a.Stats().StaleIncarnation != 1 || ra.Stats.PeerRestarts != 1 || ra.Failed != "" {
		t.Errorf("host 1: %d stale incarnations, %d restarts, failed %q; want 1, 1, not failed",
			p.a.Stats().StaleIncarnation, ra.Stats.PeerRestarts, ra.Failed)
	}
	if ra.PeerTag != rb.LocalTag || rb.PeerTag != ra.LocalTag {
		t.Fatalf("after the restart host 1 bound %#x, host 2 %#x; want %#x, %#x", ra.PeerTag, rb.PeerTag, rb.LocalTag, ra.LocalTag)
	}
	comps := p.a.Completions()
	if len(comps) != 1 || comps[0].WR != 1 || !errors.Is(comps[0].Err, nic.ErrPeerRestarted) {
		t.Fatalf("host 1's completions %+v: want the moving send (WR 1) failed with ErrPeerRestarted, the receive kept", comps)
	}
	// A stale packet of the old incarnation naming host 1's tag is refused.
	old := wire.AppendAck(nil, wire.AckFields{Src: 2, Dst: 1, Flow: 1, Tags: wire.Tags{Dst: ra.LocalTag, Src: rb.LocalTag ^ 0x55}})
	p.a.Receive(p.now, old, 0)
	if p.a.Stats().StaleIncarnation != 2 {
		t.Errorf("an ACK of another incarnation was not counted stale: %d", p.a.Stats().StaleIncarnation)
	}
	if err := p.b.PostRecv(nic.RecvReq{Key: keyBA, WR: 3, Region: p.region[1], Length: 32 << 10}); err != nil {
		t.Fatal(err)
	}
	if err := p.b.PostSend(p.now, nic.SendReq{Key: keyBA, WR: 4, Region: p.region[1], Off: 32 << 10, Length: 32 << 10}); err != nil {
		t.Fatal(err)
	}
	if err := p.a.PostSend(p.now, nic.SendReq{Key: keyAB, WR: 5, Region: p.region[0], Length: 32 << 10}); err != nil {
		t.Fatal(err)
	}
	done := map[uint64]bool{}
	for i := 0; i < 20000 && len(done) < 4; i++ {
		p.pump()
		for _, e := range []*nic.Engine{p.a, p.b} {
			for _, c := range e.Completions() {
				if c.Err != nil {
					t.Fatalf("after the restart: %+v", c)
				}
				done[c.WR] = true
			}
		}
	}
	if !done[2] || !done[3] || !done[4] || !done[5] {
		t.Fatalf("completions after the restart %v: want the kept receive 2 and the new work 3, 4, 5", done)
	}
}

// "200k CONNECTs on a live flow reflected 147,891 ACCEPTs one for one."
// A flood of CONNECTs (forged source tags, spread over a second of
// virtual time) on a bound flow draws at most the rate limit's burst and
// one ACCEPT per interval; every other CONNECT is counted as
// AcceptsLimited, and the flow stays bound and usable. Without the limit
// (acceptPace always true) every CONNECT is answered and the test fails.
func TestConnectFloodAcceptsRateLimited(t *testing.T) {
	cfg := nicConfig(1)
	e, err := nic.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateFlow(0, nic.FlowSpec{Peer: 2, ID: 1}); err != nil {
		t.Fatal(err)
	}
	bindAlone(t, e, keyAB, 0x2222)
	buf := make([]byte, wire.DataLen+4096)
	const n, span = 20000, time.Second
	accepts := 0
	for i := range n {
		now := time.Duration(i) * span / n
		e.Receive(now, wire.AppendConnect(nil, wire.ConnectFields{Src: 2, Dst: 1, Flow: 1,
			Tags: wire.Tags{Src: uint32(i) | 1<<31}}), 0)
		for {
			pkt, _, ok := e.Transmit(now, buf)
			if !ok {
				break
			}
			if wire.Header(pkt).Type() == wire.TypeAccept {
				accepts++
			}
		}
	}
	interval := 64 * cfg.Sender.RTOHigh // connectBackoff high RTOs
	bound := 4 + int(span/interval) + 1
	r, _ := e.Flow(keyAB)
	st := e.Stats()
	t.Logf("%d CONNECTs in %v: %d ACCEPTs (bound %d), %d limited", n, span, accepts, bound, st.AcceptsLimited)
	if accepts > bound || accepts < 4 {
		t.Errorf("%d CONNECTs drew %d ACCEPTs: want 4 to %d", n, accepts, bound)
	}
	if int(st.AcceptsLimited) != n-accepts || r.Stats.AcceptsLimited != st.AcceptsLimited || int(r.Stats.AcceptsSent) != accepts {
		t.Errorf("accepts_limited %d (flow %d), accepts_sent %d: want %d limited and %d sent", st.AcceptsLimited, r.Stats.AcceptsLimited, r.Stats.AcceptsSent, n-accepts, accepts)
	}
	if r.PeerTag != 0x2222 || r.Failed != "" {
		t.Errorf("after the flood the flow is bound to %#x, failed %q; want 0x2222, not failed", r.PeerTag, r.Failed)
	}
}

// "All 4 untouched receives failed on a legitimate restart." Host 1 has
// received a message on the flow, then posts four receives; host 2 is
// restarted (its flow recreated) before sending anything for them. The
// restart keeps the four: nothing of theirs arrived, whatever the flow
// moved before. Host 2's new incarnation fills them in order, byte-exact.
// Failing all work of a flow that ever
// moved a packet (a flow-wide "anything since bind") fails the test.
func TestPeerRestartKeepsUntouchedWork(t *testing.T) {
	const part = 8 << 10
	p := newPair(t, 64<<10)
	// Message 0, host 2 -> host 1, completes before the restart.
	if err := p.a.PostRecv(nic.RecvReq{Key: keyAB, WR: 1, Region: p.region[0], Length: part}); err != nil {
		t.Fatal(err)
	}
	if err := p.b.PostSend(p.now, nic.SendReq{Key: keyBA, WR: 2, Region: p.region[1], Length: part}); err != nil {
		t.Fatal(err)
	}
	done := map[uint64]error{}
	collect := func() {
		for _, e := range []*nic.Engine{p.a, p.b} {
			for _, c := range e.Completions() {
				done[c.WR] = c.Err
			}
		}
	}
	for i := 0; i < 20000 && len(done) < 2; i++ {
		p.pump()
		collect()
	}
	if done[1] != nil || done[2] != nil || len(done) != 2 {
		t.Fatalf("before the restart: %v, want WR 1 and 2 done", done)
	}
	// Four receives on host 1 that no packet touches yet.
	dst := make([]byte, 4*part)
	dstRegion, err := p.a.RegisterMemory(dst)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := p.a.PostRecv(nic.RecvReq{Key: keyAB, WR: uint64(10 + i), Region: dstRegion, Off: i * part, Length: part}); err != nil {
			t.Fatal(err)
		}
	}
	// Host 2 restarts.
	if err := p.b.DestroyFlow(keyBA); err != nil {
		t.Fatal(err)
	}
	collect()
	if err := p.b.CreateFlow(p.now, nic.FlowSpec{Peer: 1, ID: 1, Class: nic.ClassGradient}); err != nil {
		t.Fatal(err)
	}
	p.exchange()
	if ra, _ := p.a.Flow(keyAB); ra.Stats.PeerRestarts != 1 || ra.Failed != "" {
		t.Fatalf("host 1: %d restarts, failed %q; want 1 restart, not failed", ra.Stats.PeerRestarts, ra.Failed)
	}
	for _, c := range p.a.Completions() {
		t.Errorf("host 1 completed %+v at the restart: want its untouched receives kept", c)
	}
	// The new incarnation sends four messages; the kept receives take them.
	src := make([]byte, 64<<10)
	for i := range src {
		src[i] = byte(i*13 + 5)
	}
	srcRegion, err := p.b.RegisterMemory(src)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := p.b.PostSend(p.now, nic.SendReq{Key: keyBA, WR: uint64(20 + i), Region: srcRegion, Off: i * part, Length: part}); err != nil {
			t.Fatal(err)
		}
	}
	clear(done)
	for i := 0; i < 20000 && len(done) < 8; i++ {
		p.pump()
		collect()
	}
	for _, wr := range []uint64{10, 11, 12, 13, 20, 21, 22, 23} {
		if err, ok := done[wr]; !ok || err != nil {
			t.Errorf("WR %d after the restart: done %v, error %v; want done", wr, ok, err)
		}
	}
	if !bytes.Equal(dst, src[:4*part]) {
		t.Error("the kept receives do not hold the new incarnation's four messages")
	}
}
