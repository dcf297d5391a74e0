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

// forgedFile is the DATA packets an off-path sender who knows the host
// ids and the flow id writes to deliver a file of its choice: message 0
// from host src to host dst, PSNs and offsets from 0, tags guessed (0).
func forgedFile(t *testing.T, src, dst uint16, flow uint32, packets int) [][]byte {
	t.Helper()
	payload := bytes.Repeat([]byte("FORGED!!"), 512)
	msgLen := uint32(packets * len(payload))
	var out [][]byte
	for i := range packets {
		flags := uint8(0)
		if i == 0 {
			flags |= wire.DataFirst
		}
		if i == packets-1 {
			flags |= wire.DataLast
		}
		pkt, err := wire.AppendData(nil, wire.DataFields{Flags: flags, Src: src, Dst: dst, Flow: flow, PSN: wire.PSN(i),
			Offset: uint32(i * len(payload)), MsgLen: msgLen}, payload)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, pkt)
	}
	return out
}

// Attack: "an off-path sender that knows host ids and the flow id
// delivered a file of its choice that forgivectl recv reported as SHA-256
// verified (257 forged packets)". The same 257 packets, sent to host 1's
// switch port from the attacker's own address, straight to host 2's
// daemon, and (as root, with host 1's address forged through a raw socket)
// into host 1's switch port, are refused: foreign_source at the switch,
// foreign_source at forgived, wrong_tag at the flow. The real file then
// arrives and is the one verified.
func TestOffPathForgedFileRefused(t *testing.T) {
	s := newStar(t, 2, "200Mbps", nil)
	x := s.startCLITransfer(1, 2, 1<<20+4096)
	c2 := s.client(2)
	// The receive's flow exists once host 2 sends CONNECTs for it, which
	// host 1 (no such flow yet) counts as unknown.
	c1 := s.client(1)
	// A guard against a hang, not a verdict on speed: a loaded machine
	// may take seconds to start forgivectl.
	for deadline := time.Now().Add(time.Minute); hostValues(t, c1)["unknown_flow"] == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("forgivectl recv created no flow within a minute")
		}
	}
	pkts := forgedFile(t, 1, 2, 7, 257)
	a := newAttacker(t, s)
	write := func(addr string) {
		raddr, err := net.ResolveUDPAddr("udp4", addr)
		if err != nil {
			t.Fatal(err)
		}
		for i, p := range pkts {
			if _, err := a.conn.WriteToUDP(p, raddr); err != nil {
				t.Fatal(err)
			}
			if i%32 == 31 {
				time.Sleep(time.Millisecond)
			}
		}
	}
	write(s.addr(101, 4793)) // host 1's switch port
	write(s.addr(2, 4793))   // host 2's daemon
	spoofed := 0
	if os.Geteuid() == 0 {
		sp := newSpoofer(t, s.addr(1, 4793))
		for i, p := range pkts {
			if err := sp.send(s.addr(101, 4793), p); err != nil {
				t.Fatal(err)
			}
			spoofed++
			if i%32 == 31 {
				time.Sleep(time.Millisecond)
			}
		}
	} else {
		t.Log("not root: the forged-address variant is skipped (it needs a raw socket)")
	}
	var host map[string]uint64
	var sw float64
	settle(func() bool {
		host = hostValues(t, c2)
		sw = s.switchCounter(t, "trimswitch_invalid_datagrams_total", `reason="foreign_source"`)
		return sw >= 257 && host["foreign_source"] >= 257 && host["wrong_tag"] >= uint64(spoofed)
	})
	t.Logf("257 forged packets three ways: switch foreign_source %v, host 2 foreign_source %d, wrong_tag %d (of %d with host 1's address forged)",
		sw, host["foreign_source"], host["wrong_tag"], spoofed)
	if sw != 257 || host["foreign_source"] != 257 || host["wrong_tag"] != uint64(spoofed) {
		t.Errorf("refusals: switch %v, daemon %d foreign_source, %d wrong_tag; want 257, 257, %d", sw, host["foreign_source"], host["wrong_tag"], spoofed)
	}
	x.finish() // the real file, not the forged one
}

// capturedData returns the DATA packets host from sent into the switch,
// read from the switch's capture.
func capturedData(t *testing.T, s *star, from string, flow uint32) [][]byte {
	t.Helper()
	f, err := os.Open(filepath.Join(s.dir, "capture.pcap"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
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
		if typ, err := wire.Validate(pl); err == nil && typ == wire.TypeData && wire.Data(pl).Flow() == flow {
			out = append(out, bytes.Clone(pl))
		}
	}
	return out
}

// Attack: "replaying another transfer's capture corrupted a later
// transfer (SHA-256 mismatch)". A transfer on flow 51 is captured at the
// switch; the flow is destroyed and created again at both ends (a new
// incarnation: new tags, new initial PSNs), and the capture is replayed
// with host 1's address forged into host 1's switch port while the next
// transfer on the same flow id runs. Every replayed packet is refused at
// the tag check (wrong_tag) and the later transfer arrives byte-exact.
func TestReplayedCaptureRefused(t *testing.T) {
	s := newStarPorts(t, 2, "200Mbps", nil, map[uint16]portOpts{1: {capture: true}})
	c1, c2 := s.client(1), s.client(2)
	sp := newSpoofer(t, s.addr(1, 4793))
	timedTransfer(t, c1, c2, 51, 2<<20, nil)
	oldLocal, _ := flowTags(t, c2, 51)
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	for _, c := range []*hostapi.Client{c1, c2} {
		if err := c.DestroyFlow(ctx, 51); err != nil {
			t.Fatal(err)
		}
	}
	// The capture is written as the switch goes; wait for the transfer's
	// packets to be in it.
	var replay [][]byte
	settle(func() bool { replay = capturedData(t, s, s.addr(1, 4793), 51); return len(replay) >= 256 })
	if len(replay) < 256 {
		t.Fatalf("captured %d DATA packets of the first transfer's 512, want at least half", len(replay))
	}
	sent := 0
	timedTransfer(t, c1, c2, 51, 2<<20, func(stop <-chan struct{}) {
		for i, p := range replay {
			select {
			case <-stop:
				return
			default:
			}
			if sp.send(s.addr(101, 4793), p) != nil {
				return
			}
			sent++
			if i%32 == 31 {
				time.Sleep(500 * time.Microsecond)
			}
		}
	})
	newLocal, _ := flowTags(t, c2, 51)
	var rx map[string]uint64
	settle(func() bool { rx = flowValues(t, c2, 51); return rx["wrong_tag"] >= uint64(sent)*9/10 })
	t.Logf("replayed %d captured DATA packets (tag %#x) into the next incarnation (tag %#x): %d wrong tag, %d out of window",
		sent, oldLocal, newLocal, rx["wrong_tag"], rx["out_of_window"])
	if oldLocal == newLocal {
		t.Fatalf("the recreated flow has the old tag %#x", oldLocal)
	}
	if sent == 0 || rx["wrong_tag"] == 0 || rx["wrong_tag"] > uint64(sent) || rx["out_of_window"] != 0 {
		t.Errorf("%d replayed, %d wrong tag, %d out of window: want them all refused at the tag", sent, rx["wrong_tag"], rx["out_of_window"])
	}
}

// Attack: "a receiver restarted after kill -9 accepted 368 stale packets
// from the old sender's retransmissions and its next transfer failed:
// there is no flow incarnation". Host 2 is killed with -9 during a
// transfer and restarted while host 1 retransmits; host 2 creates the flow
// again and posts a receive. The old sender's stale packets are refused
// (unknown_flow before the flow exists, wrong_tag after: they carry the
// dead incarnation's tag); the new incarnation's handshake restarts host
// 1's flow, whose interrupted send fails with a clear error; the next
// transfer on the same flow completes byte-exact.
func TestRestartedReceiverRefusesStalePackets(t *testing.T) {
	s := newStar(t, 2, "200Mbps", map[uint16]hostOpts{1: {failAfter: "20s"}})
	c1, c2 := s.client(1), s.client(2)
	post(t, c1, c2, 1, 2, 61, hostapi.ClassOther, 32<<20, 0)
	time.Sleep(100 * time.Millisecond)
	s.kill("host2")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.group.Add(ctx, s.hostSpec(2), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	c2 = s.client(2)
	time.Sleep(200 * time.Millisecond) // the old sender's retransmissions reach the restarted daemon
	if err := c2.CreateFlow(ctx, hostapi.FlowSpec{Flow: 61, Peer: 1, Class: hostapi.ClassOther}); err != nil {
		t.Fatal(err)
	}
	comp := awaitKind(t, c1, hostapi.KindSend, 30*time.Second)
	if comp.Status != hostapi.StatusError || !strings.Contains(comp.Err, "recreated") {
		t.Fatalf("the interrupted send completed with %+v, want the peer-restarted error", comp)
	}
	h2 := hostValues(t, c2)
	tx := flowValues(t, c1, 61)
	t.Logf("interrupted send: %s; restarted host 2 refused %d stale packets of an unknown flow, %d with a wrong tag; host 1: %d stale incarnation, %d restarts",
		comp.Err, h2["unknown_flow"], h2["wrong_tag"], tx["stale_incarnation"], tx["peer_restarts"])
	if h2["unknown_flow"]+h2["wrong_tag"] == 0 || tx["peer_restarts"] != 1 || tx["stale_incarnation"] == 0 {
		t.Errorf("stale packets refused %d+%d, host 1 restarts %d, stale incarnations %d", h2["unknown_flow"], h2["wrong_tag"],
			tx["peer_restarts"], tx["stale_incarnation"])
	}
	if rx := flowValues(t, c2, 61); rx["recv_packets"] != 0 || rx["out_of_window"] != 0 {
		t.Errorf("the new incarnation took %d stale packets (%d out of window)", rx["recv_packets"], rx["out_of_window"])
	}
	// The next transfer, on the same flows.
	sr, err := c1.RegisterMemory(ctx, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := c2.RegisterMemory(ctx, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = rand.Read(sr.Bytes())
	if err := c2.PostRecv(ctx, hostapi.RecvReq{Flow: 61, Region: rr.ID(), Length: 1 << 20, WRID: 2}); err != nil {
		t.Fatal(err)
	}
	if err := c1.PostSend(ctx, hostapi.SendReq{Flow: 61, Region: sr.ID(), Length: 1 << 20, WRID: 2}); err != nil {
		t.Fatal(err)
	}
	if comp := awaitKind(t, c2, hostapi.KindRecv, time.Minute); comp.Status != hostapi.StatusOK || !bytes.Equal(rr.Bytes(), sr.Bytes()) {
		t.Fatalf("the next transfer: %+v", comp)
	}
}
