package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/wire"
)

// captured returns the FORGIVE packets of flow that the switch's capture
// holds from address from, in capture order, with what validates only.
func captured(t *testing.T, s *star, from string, flow uint32) [][]byte {
	t.Helper()
	f, err := os.Open(filepath.Join(s.dir, "capture.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		return nil // the switch has not written the file's header yet
	}
	src := net.ParseIP(strings.Split(from, ":")[0]).To4()
	var out [][]byte
	for {
		b, _, err := r.ReadPacketData()
		if err != nil {
			break
		}
		p := gopacket.NewPacket(b, layers.LayerTypeEthernet, gopacket.NoCopy)
		ip, _ := p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		udp, _ := p.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if ip == nil || udp == nil || !ip.SrcIP.Equal(src) {
			continue
		}
		pl := udp.Payload
		if typ, err := wire.Validate(pl); err == nil && typ != wire.TypePause {
			if fl, _ := wire.Header(pl).Flow(); fl == flow {
				out = append(out, bytes.Clone(pl))
			}
		}
	}
	return out
}

// messages moves n messages of size random bytes from c1 to c2 on flow
// id, which both ends have, and checks that each arrives byte-exact and
// that both sides complete successfully.
func messages(t *testing.T, c1, c2 *hostapi.Client, id hostapi.FlowID, n, size int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type msg struct{ src, dst []byte }
	var ms []msg
	for i := range n {
		sr, err := c1.RegisterMemory(ctx, size)
		if err != nil {
			t.Fatal(err)
		}
		rr, err := c2.RegisterMemory(ctx, size)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = rand.Read(sr.Bytes())
		clear(rr.Bytes())
		if err := c2.PostRecv(ctx, hostapi.RecvReq{Flow: id, Region: rr.ID(), Length: uint64(size), WRID: uint64(100 + i)}); err != nil {
			t.Fatal(err)
		}
		if err := c1.PostSend(ctx, hostapi.SendReq{Flow: id, Region: sr.ID(), Length: uint64(size), WRID: uint64(100 + i)}); err != nil {
			t.Fatal(err)
		}
		ms = append(ms, msg{sr.Bytes(), rr.Bytes()})
	}
	for range n {
		if c := awaitKind(t, c2, hostapi.KindRecv, 30*time.Second); c.Status != hostapi.StatusOK {
			t.Fatalf("receive %+v: want success", c)
		}
		if c := awaitKind(t, c1, hostapi.KindSend, 30*time.Second); c.Status != hostapi.StatusOK {
			t.Fatalf("send %+v: want success", c)
		}
	}
	for i, m := range ms {
		if !bytes.Equal(m.src, m.dst) {
			t.Fatalf("message %d arrived with other bytes than were sent", i)
		}
	}
}

// Attack: "a dead incarnation's CONNECT and 32 DATA packets, captured 7 s
// earlier and replayed, all authenticated: the host rebound to the dead
// incarnation, delivered the two old messages as new successful
// completions, and the live peer's next send failed". Two sealed daemons;
// host 1's switch port is captured. Host 1 sends two 64 KiB messages on
// flow 51 (32 DATA packets), then its flow end dies twice: first it is
// destroyed and created again in the same daemon (the counter window
// refuses the old nonces), then host 1 is killed with -9 and started again
// (its new start refuses every nonce of the earlier one). Each time, after
// the live incarnation has bound and moved a message, the dead
// incarnations' captured packets, CONNECT first, are replayed with host
// 1's address forged into its switch port while host 2 holds two posted
// receives. Every replay is refused as refused_replayed; host 2's flow
// keeps its peer (no restart, the same peer tag), takes no packet and
// completes nothing; then the live flow moves two more messages
// byte-exact.
func TestSealedReplayRebindsNothing(t *testing.T) {
	dir := t.TempDir()
	sec := security(1, keyFile(t, dir, "domain1.key"))
	s := newStarPorts(t, 2, "200Mbps", map[uint16]hostOpts{1: {extra: sec}, 2: {extra: sec}},
		map[uint16]portOpts{1: {capture: true}})
	c1, c2 := s.client(1), s.client(2)
	sp := newSpoofer(t, s.addr(1, 4793))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const flow = 51
	for _, e := range []struct {
		c    *hostapi.Client
		peer hostapi.HostID
	}{{c1, 2}, {c2, 1}} {
		if err := e.c.CreateFlow(ctx, hostapi.FlowSpec{Flow: flow, Peer: e.peer, Class: hostapi.ClassTensor}); err != nil {
			t.Fatal(err)
		}
	}
	messages(t, c1, c2, flow, 2, 64<<10)
	_, dead := flowTags(t, c2, flow)

	// replay sends host 2 every packet of host 1's capture on the flow
	// that a dead incarnation (a source tag in deadTags) sent, and checks
	// that nothing changed at host 2 but refused_replayed.
	replay := func(phase string, filler hostapi.FlowID, deadTags map[uint32]bool) {
		t.Helper()
		// The switch writes its capture a MiB at a time: 2 MiB on
		// another flow push the dead incarnations' packets into the file.
		timedTransfer(t, c1, c2, filler, 2<<20, nil)
		_, live := flowTags(t, c2, flow)
		before, hostBefore := flowValues(t, c2, flow), hostValues(t, c2)
		// The bait: two receives an accepted replay would complete.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var baits []*hostapi.Region
		for i := range 2 {
			rr, err := c2.RegisterMemory(ctx, 64<<10)
			if err != nil {
				t.Fatal(err)
			}
			clear(rr.Bytes())
			if err := c2.PostRecv(ctx, hostapi.RecvReq{Flow: flow, Region: rr.ID(), Length: 64 << 10, WRID: uint64(200 + i)}); err != nil {
				t.Fatal(err)
			}
			baits = append(baits, rr)
		}
		var pkts [][]byte
		settle(func() bool {
			pkts = pkts[:0]
			for _, p := range captured(t, s, s.addr(1, 4793), flow) {
				if tags, _ := wire.Header(p).Tags(); deadTags[tags.Src] {
					pkts = append(pkts, p)
				}
			}
			return len(pkts) >= 33
		})
		types := map[wire.Type]int{}
		for _, p := range pkts {
			if !wire.Sealed(p) {
				t.Fatalf("%s: a plain %v in the capture of a sealed fabric", phase, wire.Header(p).Type())
			}
			types[wire.Header(p).Type()]++
		}
		if types[wire.TypeConnect] == 0 || types[wire.TypeData] < 32 {
			t.Fatalf("%s: captured %v of the dead incarnations: want their CONNECT and 32 DATA", phase, types)
		}
		sent := 0
		for _, p := range pkts {
			if err := sp.send(s.addr(101, 4793), p); err != nil {
				t.Fatal(err)
			}
			sent++
		}
		var h map[string]uint64
		settle(func() bool {
			h = hostValues(t, c2)
			return h["refused_replayed"]-hostBefore["refused_replayed"] >= uint64(sent)
		})
		after := flowValues(t, c2, flow)
		_, peer := flowTags(t, c2, flow)
		t.Logf("%s: replayed %d sealed packets %v of source tags %v; host 2 refused %d as replayed, opened %d more; flow: %d peer restarts, %d packets received, %d receives done (before: %d, %d, %d)",
			phase, sent, types, deadTags, h["refused_replayed"]-hostBefore["refused_replayed"], h["opened"]-hostBefore["opened"],
			after["peer_restarts"], after["recv_packets"], after["recvs_done"], before["peer_restarts"], before["recv_packets"], before["recvs_done"])
		if got := h["refused_replayed"] - hostBefore["refused_replayed"]; got < uint64(sent) {
			t.Errorf("%s: %d replays sent, %d refused as replayed", phase, sent, got)
		}
		if peer != live || after["peer_restarts"] != before["peer_restarts"] {
			t.Errorf("%s: host 2's flow rebound: peer tag %#x (live %#x), peer restarts %d -> %d",
				phase, peer, live, before["peer_restarts"], after["peer_restarts"])
		}
		if after["recv_packets"] != before["recv_packets"] || after["recvs_done"] != before["recvs_done"] {
			t.Errorf("%s: the replay was received: %d -> %d packets, %d -> %d receives done", phase,
				before["recv_packets"], after["recv_packets"], before["recvs_done"], after["recvs_done"])
		}
		// The live flow: two messages into the bait receives, in order.
		sctx, scancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer scancel()
		var srcs [][]byte
		for i := range 2 {
			sr, err := c1.RegisterMemory(sctx, 64<<10)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = rand.Read(sr.Bytes())
			if err := c1.PostSend(sctx, hostapi.SendReq{Flow: flow, Region: sr.ID(), Length: 64 << 10, WRID: uint64(300 + i)}); err != nil {
				t.Fatal(err)
			}
			srcs = append(srcs, sr.Bytes())
		}
		for range 2 {
			if c := awaitKind(t, c2, hostapi.KindRecv, 30*time.Second); c.Status != hostapi.StatusOK {
				t.Fatalf("%s: the live flow's receive after the replay: %+v", phase, c)
			}
			if c := awaitKind(t, c1, hostapi.KindSend, 30*time.Second); c.Status != hostapi.StatusOK {
				t.Fatalf("%s: the live peer's send after the replay: %+v", phase, c)
			}
		}
		for i, rr := range baits {
			if !bytes.Equal(rr.Bytes(), srcs[i]) {
				t.Errorf("%s: receive %d holds other bytes than the live peer sent", phase, i)
			}
		}
	}

	// rebound waits for host 2's flow to bind host 1's new incarnation,
	// whose CONNECT restarts it: a receive posted before that would fail
	// with the old incarnation's work (nic.ErrPeerRestarted).
	rebound := func(old uint32) uint32 {
		t.Helper()
		var peer uint32
		settle(func() bool { _, peer = flowTags(t, c2, flow); return peer != old })
		if peer == old {
			t.Fatalf("host 2's flow did not bind host 1's new incarnation (peer tag still %#x)", old)
		}
		return peer
	}

	// The flow end dies in a live daemon: destroyed and created again.
	if err := c1.DestroyFlow(ctx, flow); err != nil {
		t.Fatal(err)
	}
	if err := c1.CreateFlow(ctx, hostapi.FlowSpec{Flow: flow, Peer: 2, Class: hostapi.ClassTensor}); err != nil {
		t.Fatal(err)
	}
	second := rebound(dead)
	messages(t, c1, c2, flow, 1, 64<<10)
	replay("same daemon", 61, map[uint32]bool{dead: true})

	// The daemon dies: kill -9 and a new start.
	s.kill("host1")
	if err := s.group.Add(ctx, s.hostSpec(1), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	c1 = s.client(1)
	if err := c1.CreateFlow(ctx, hostapi.FlowSpec{Flow: flow, Peer: 2, Class: hostapi.ClassTensor}); err != nil {
		t.Fatal(err)
	}
	rebound(second)
	messages(t, c1, c2, flow, 1, 64<<10)
	if h := hostValues(t, c2); h["sender_starts"] < 2 {
		t.Errorf("host 2 heard %d sender starts, want host 1's two", h["sender_starts"])
	}
	replay("restarted daemon", 62, map[uint32]bool{dead: true, second: true})
}

// Attack: "a receiver that has just started takes the first authentic
// packet from each sender as the current start, so a captured CONNECT of
// a flow end the sender has since recreated can bind the receiver's new
// flow". Two sealed daemons; host 1's switch port is captured. Host 1
// moves two 64 KiB messages on flow 52 to host 2, then its flow end is
// destroyed in its live daemon, and host 2 is killed with -9, started
// again and creates flow 52 afresh, unbound (host 1 has no flow 52 to
// answer its CONNECT). Host 2 knows nothing of host 1's start but what
// live packets of another flow tell it, so the dead flow end's captured
// CONNECT and 32 DATA, replayed with host 1's address forged, open at
// the sublayer (host 1's start is the current one, their counters unseen)
// and reach host 2's new flow, whose two posted receives are the bait.
// The handshake's challenge refuses them: host 2's new flow end drew a
// random tag at its creation, which the peer must echo before anything
// binds, and no capture from before its start carries it. So nothing
// binds, no packet is received, no receive completes, and every replayed
// packet but the CONNECT that named no tag is counted as wrong_tag. Then
// host 1 creates flow 52 again and the live flow fills the bait
// byte-exact.
func TestCaptureBeforeReceiverRestartBindsNothing(t *testing.T) {
	dir := t.TempDir()
	sec := security(1, keyFile(t, dir, "domain1.key"))
	s := newStarPorts(t, 2, "200Mbps", map[uint16]hostOpts{1: {extra: sec}, 2: {extra: sec}},
		map[uint16]portOpts{1: {capture: true}})
	c1, c2 := s.client(1), s.client(2)
	sp := newSpoofer(t, s.addr(1, 4793))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const flow = 52
	createFlow(ctx, t, c1, flow, 2)
	createFlow(ctx, t, c2, flow, 1)
	messages(t, c1, c2, flow, 2, 64<<10)
	dead, _ := flowTags(t, c1, flow)
	if err := c1.DestroyFlow(ctx, flow); err != nil {
		t.Fatal(err)
	}

	// Host 2 starts again and creates the flow: a new tag, unbound.
	c2 = s.restartHost(ctx, 2)
	createFlow(ctx, t, c2, flow, 1)
	// Another flow's live packets tell host 2 host 1's start, and push
	// the capture (written a MiB at a time) into the file.
	timedTransfer(t, c1, c2, 63, 2<<20, nil)
	baits := postRecvs(ctx, t, c2, flow, 2, 64<<10, 200)
	var pkts [][]byte
	settle(func() bool {
		pkts = pkts[:0]
		for _, p := range captured(t, s, s.addr(1, 4793), flow) {
			if tags, _ := wire.Header(p).Tags(); tags.Src == dead {
				pkts = append(pkts, p)
			}
		}
		return len(pkts) >= 33
	})
	types, named := map[wire.Type]int{}, 0
	for _, p := range pkts {
		if !wire.Sealed(p) {
			t.Fatalf("a plain %v in the capture of a sealed fabric", wire.Header(p).Type())
		}
		types[wire.Header(p).Type()]++
		if tags, _ := wire.Header(p).Tags(); tags.Dst != 0 {
			named++
		}
	}
	if types[wire.TypeConnect] == 0 || types[wire.TypeData] < 32 {
		t.Fatalf("captured %v of the dead flow end: want its CONNECT and 32 DATA", types)
	}
	local, _ := currentTags(t, c2, flow)
	before, hostBefore := flowValues(t, c2, flow), hostValues(t, c2)
	for _, p := range pkts {
		if err := sp.send(s.addr(101, 4793), p); err != nil {
			t.Fatal(err)
		}
	}
	var h map[string]uint64
	settle(func() bool {
		h = hostValues(t, c2)
		return h["wrong_tag"]-hostBefore["wrong_tag"] >= uint64(named)
	})
	after := flowValues(t, c2, flow)
	_, peer := currentTags(t, c2, flow)
	t.Logf("replayed %d sealed packets %v of the dead tag %#x into host 2's new flow (tag %#x): host 2 opened %d, refused %d as replayed, %d as wrong_tag (%d named a tag); flow: peer tag %#x, %d packets received, %d receives done",
		len(pkts), types, dead, local, h["opened"]-hostBefore["opened"], h["refused_replayed"]-hostBefore["refused_replayed"],
		h["wrong_tag"]-hostBefore["wrong_tag"], named, peer, after["recv_packets"], after["recvs_done"])
	if got := h["wrong_tag"] - hostBefore["wrong_tag"]; got < uint64(named) {
		t.Errorf("%d replayed packets named a tag, %d refused as wrong_tag", named, got)
	}
	if peer != 0 {
		t.Errorf("a capture from before host 2's start bound its new flow to %#x (the dead tag %#x)", peer, dead)
	}
	if after["recv_packets"] != before["recv_packets"] || after["recvs_done"] != before["recvs_done"] {
		t.Errorf("the replay was received: %d -> %d packets, %d -> %d receives done",
			before["recv_packets"], after["recv_packets"], before["recvs_done"], after["recvs_done"])
	}

	// The live flow end: it binds and fills the bait.
	createFlow(ctx, t, c1, flow, 2)
	var srcs [][]byte
	for i := range 2 {
		sr, err := c1.RegisterMemory(ctx, 64<<10)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = rand.Read(sr.Bytes())
		if err := c1.PostSend(ctx, hostapi.SendReq{Flow: flow, Region: sr.ID(), Length: 64 << 10, WRID: uint64(300 + i)}); err != nil {
			t.Fatal(err)
		}
		srcs = append(srcs, sr.Bytes())
	}
	for range 2 {
		if c := awaitKind(t, c2, hostapi.KindRecv, 30*time.Second); c.Status != hostapi.StatusOK {
			t.Fatalf("the live flow's receive after the replay: %+v", c)
		}
		if c := awaitKind(t, c1, hostapi.KindSend, 30*time.Second); c.Status != hostapi.StatusOK {
			t.Fatalf("the live peer's send after the replay: %+v", c)
		}
	}
	for i, rr := range baits {
		if !bytes.Equal(rr.Bytes(), srcs[i]) {
			t.Errorf("receive %d holds other bytes than the live peer sent", i)
		}
	}
}

// currentTags returns flow id's tags as client c's daemon reports them
// now, the peer's 0 while unbound.
func currentTags(t *testing.T, c *hostapi.Client, id hostapi.FlowID) (local, peer uint32) {
	t.Helper()
	ct, err := c.Counters(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ct.Flows {
		if f.Flow == id {
			return f.LocalTag, f.PeerTag
		}
	}
	t.Fatalf("no flow %d", id)
	return 0, 0
}
