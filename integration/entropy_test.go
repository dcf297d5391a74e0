package integration

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/gopacket/pcapgo"

	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/lab/fabric"
	"github.com/forgive-emu/forgive/lab/topo"
	"github.com/forgive-emu/forgive/reliability"
	"github.com/forgive-emu/forgive/wire"
)

// uplinkPacket is one data packet a leaf sent up to a spine.
type uplinkPacket struct {
	uplink string // the leaf's port
	flow   uint32
	psn    wire.PSN
	msg    uint32
	retx   bool
}

// On the 2-spine topology ECMP picks a spine by the entropy field. With
// entropy single a flow's packets all take one spine; with spray each
// packet draws its own, so a flow's packets spread over both spines as a
// uniform draw would (chi-square, 1 degree of freedom, below 10.83: p =
// 0.001); with subflows every subflow (PSN mod sigma) keeps one path, the
// subflows use both, and each subflow's packets leave in PSN order; with
// message every message's packets take one spine and the messages use
// both. Read from the source leaf's capture of its uplinks.
func TestEntropySpreadsFlowsOverSpines(t *testing.T) {
	tp, err := topo.FindTopology("leaf-spine-2x4-2spines")
	if err != nil {
		t.Fatal(err)
	}
	if tp, err = tp.WithRanks(4); err != nil {
		t.Fatal(err)
	}
	prof, err := topo.FindProfile("loopback")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	place := topo.PlaceOptions{Dir: dir, Net: fmt.Sprintf("127.%d.%d.", 100+os.Getpid()%100, fabricSeq.Add(1)),
		Seed: 1, Capture: true, Host: topo.HostPolicy{CC: congestion.KindDCQCN, Mode: reliability.SelectiveRepeat}}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	fab, err := fabric.Start(ctx, fabric.Config{Topology: tp, Profile: prof, Place: place,
		Bins: map[string]string{"forgived": bins["forgived"], "trimswitch": bins["trimswitch"]}})
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			_ = fab.Stop()
		}
	}()
	// A sender and a receiver on different leaves.
	src, dst := fab.Plan.Hosts[0], fab.Plan.Hosts[1]
	if src.Switch == dst.Switch {
		t.Fatalf("%s and %s share %s; the test needs two leaves", src.Name, dst.Name, src.Switch)
	}
	cs, err := hostapi.Dial(src.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	cd, err := hostapi.Dial(dst.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer cd.Close()

	const size = 1 << 20
	const sigma = 8
	flows := []struct {
		id       hostapi.FlowID
		entropy  hostapi.Entropy
		subflows uint8
	}{{71, hostapi.EntropySingle, 0}, {72, hostapi.EntropySpray, 0}, {73, hostapi.EntropySubflows, sigma}, {74, hostapi.EntropyMessage, 0}}
	for _, f := range flows {
		for _, e := range []struct {
			c    *hostapi.Client
			peer uint16
		}{{cs, dst.ID}, {cd, src.ID}} {
			if err := e.c.CreateFlow(ctx, hostapi.FlowSpec{Flow: f.id, Peer: hostapi.HostID(e.peer), Class: hostapi.ClassOther, Entropy: f.entropy, Subflows: f.subflows}); err != nil {
				t.Fatal(err)
			}
		}
		if f.entropy == hostapi.EntropyMessage {
			// 24 messages of 64 KiB: all 24 on one spine has
			// probability 2^-23.
			for range 24 {
				if x := sendOne(t, ctx, cs, cd, f.id, 64<<10); !bytes.Equal(x.dst, x.src) {
					t.Fatalf("flow %d (%v): received bytes differ", f.id, f.entropy)
				}
			}
			continue
		}
		x := sendOne(t, ctx, cs, cd, f.id, size)
		if !bytes.Equal(x.dst, x.src) {
			t.Fatalf("flow %d (%v): received bytes differ", f.id, f.entropy)
		}
	}
	cs.Close()
	cd.Close()
	stopped = true
	if err := fab.Stop(); err != nil { // flushes the captures
		t.Fatal(err)
	}

	var leaf topo.SwitchProc
	for _, sw := range fab.Plan.Switches {
		if sw.Name == src.Switch {
			leaf = sw
		}
	}
	pkts, uplinks := readUplinks(t, filepath.Join(dir, leaf.Name+".pcap"), leaf)
	if len(uplinks) != 2 {
		t.Fatalf("%s has uplinks %v, want two", leaf.Name, uplinks)
	}
	// per flow: packets per uplink; per subflow: the uplinks it used.
	perFlow := map[uint32]map[string]int{}
	subPaths := map[int]map[string]bool{}
	last := map[int]wire.PSN{}
	msgPaths := map[uint32]map[string]bool{} // flow 74: the uplinks of each message
	for _, p := range pkts {
		if perFlow[p.flow] == nil {
			perFlow[p.flow] = map[string]int{}
		}
		perFlow[p.flow][p.uplink]++
		if p.flow == 74 {
			if msgPaths[p.msg] == nil {
				msgPaths[p.msg] = map[string]bool{}
			}
			msgPaths[p.msg][p.uplink] = true
		}
		if p.flow != 73 || p.retx {
			continue
		}
		sub := int(uint32(p.psn) % sigma)
		if subPaths[sub] == nil {
			subPaths[sub] = map[string]bool{}
		}
		subPaths[sub][p.uplink] = true
		if prev, ok := last[sub]; ok && !prev.Before(p.psn) {
			t.Errorf("subflow %d: PSN %d left after %d", sub, p.psn, prev)
		}
		last[sub] = p.psn
	}
	a, b := uplinks[0], uplinks[1]
	single := perFlow[71]
	if single[a]+single[b] < size/4096 || single[a] != 0 && single[b] != 0 {
		t.Errorf("single: %d packets on %s, %d on %s; want every packet on one spine", single[a], a, single[b], b)
	}
	spray := perFlow[72]
	n := float64(spray[a] + spray[b])
	chi2 := float64((spray[a]-spray[b])*(spray[a]-spray[b])) / n
	if n < size/4096 || chi2 > 10.83 {
		t.Errorf("spray: %d packets on %s, %d on %s: chi-square %.2f against uniform, want <= 10.83", spray[a], a, spray[b], b, chi2)
	}
	both := map[string]bool{}
	for sub := range sigma {
		if len(subPaths[sub]) != 1 {
			t.Errorf("subflow %d took %d paths, want one", sub, len(subPaths[sub]))
		}
		for u := range subPaths[sub] {
			both[u] = true
		}
	}
	if len(both) != 2 {
		t.Errorf("the %d subflows all took %v; ECMP should spread them over both spines", sigma, both)
	}
	if len(msgPaths) != 24 {
		t.Errorf("message: %d messages seen on the uplinks, want 24", len(msgPaths))
	}
	for m, ups := range msgPaths {
		if len(ups) != 1 {
			t.Errorf("message: message %d took %d paths (%v), want one", m, len(ups), ups)
		}
	}
	if perFlow[74][a] == 0 || perFlow[74][b] == 0 {
		t.Errorf("message: %d packets on %s, %d on %s; ECMP per message should use both spines", perFlow[74][a], a, perFlow[74][b], b)
	}
	t.Logf("single %v; spray %v (chi-square %.2f); subflows %v, paths by subflow %v; message %v", single, spray, chi2, perFlow[73], subPaths, perFlow[74])
}

// sendOne moves one message of size bytes on an existing flow.
func sendOne(t *testing.T, ctx context.Context, cs, cd *hostapi.Client, id hostapi.FlowID, size int) *transfer {
	t.Helper()
	sr, err := cs.RegisterMemory(ctx, size)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := cd.RegisterMemory(ctx, size)
	if err != nil {
		t.Fatal(err)
	}
	x := &transfer{src: sr.Bytes(), dst: rr.Bytes(), recvReg: rr}
	for i := range x.src {
		x.src[i] = byte(i*7+int(id)) | 1
	}
	if err := cd.PostRecv(ctx, hostapi.RecvReq{Flow: id, Region: rr.ID(), Length: uint64(size), WRID: uint64(id)}); err != nil {
		t.Fatal(err)
	}
	if err := cs.PostSend(ctx, hostapi.SendReq{Flow: id, Region: sr.ID(), Length: uint64(size), WRID: uint64(id)}); err != nil {
		t.Fatal(err)
	}
	if comp := awaitKind(t, cd, hostapi.KindRecv, time.Minute); comp.Status != hostapi.StatusOK {
		t.Fatalf("flow %d: %s", id, comp.Err)
	}
	if comp := awaitKind(t, cs, hostapi.KindSend, time.Minute); comp.Status != hostapi.StatusOK {
		t.Fatalf("flow %d: %s", id, comp.Err)
	}
	return x
}

// readUplinks returns the data packets the leaf sent out of its uplinks,
// in capture order, and the uplinks' names.
func readUplinks(t *testing.T, path string, leaf topo.SwitchProc) ([]uplinkPacket, []string) {
	t.Helper()
	byAddr := map[netip.AddrPort]string{}
	var names []string
	for _, p := range leaf.Ports {
		if p.Role == topo.RoleUplink {
			ap, err := netip.ParseAddrPort(p.Local)
			if err != nil {
				t.Fatal(err)
			}
			byAddr[ap] = p.Name
			names = append(names, p.Name)
		}
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	const eth, ip, udp = 14, 20, 8
	var out []uplinkPacket
	for {
		frame, _, err := r.ReadPacketData()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(frame) < eth+ip+udp {
			continue
		}
		h := frame[eth:]
		srcAddr := netip.AddrPortFrom(netip.AddrFrom4([4]byte(h[12:16])), uint16(h[ip])<<8|uint16(h[ip+1]))
		up, ok := byAddr[srcAddr]
		if !ok {
			continue // not sent out of an uplink
		}
		pkt := h[ip+udp:]
		typ, err := wire.Validate(pkt)
		if err != nil || typ != wire.TypeData {
			continue
		}
		d := wire.Data(pkt)
		out = append(out, uplinkPacket{uplink: up, flow: d.Flow(), psn: d.PSN(), msg: d.Msg(), retx: d.Flags()&wire.DataRetx != 0})
	}
	return out, names
}
