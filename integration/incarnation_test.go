package integration

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/lab/launch"
	"github.com/forgive-emu/forgive/wire"
)

// holder is a relay on the path between host 1 and its switch port: it
// passes every datagram both ways, but keeps the first CONNECT host 1
// sends that names a destination tag (the peer's), sealed or plain, and
// sends it on only when release is called. Drop and delay are what the
// threat model grants an on-path attacker.
type holder struct {
	hostSide   *net.UDPConn // host 1's "switch" address
	switchSide *net.UDPConn // the switch port's neighbour address
	host, port *net.UDPAddr
	wg         sync.WaitGroup
	mu         sync.Mutex
	held       []byte
	heldSealed bool
	released   atomic.Bool
	// dropRest: until the release, every other packet of the held
	// CONNECT's incarnation (its source tag) is dropped too, so the peer
	// never binds that incarnation.
	dropRest bool
	firstSrc uint32 // the source tag of host 1's first tagged packet: its first incarnation
	dropped  atomic.Int64
}

// keep reports whether the relay keeps pkt, of type t, from the switch:
// it holds the first CONNECT that names a destination tag and, with
// dropRest, drops every other packet of the first incarnation that names
// one.
func (h *holder) keep(t wire.Type, pkt []byte) bool {
	tags, _ := wire.Header(pkt).Tags()
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.firstSrc == 0 {
		h.firstSrc = tags.Src
	}
	switch {
	case tags.Dst == 0:
		return false
	case h.held == nil && t == wire.TypeConnect:
		h.held, h.heldSealed = bytes.Clone(pkt), wire.Sealed(pkt)
		return true
	case h.dropRest && tags.Src == h.firstSrc:
		h.dropped.Add(1)
		return true
	}
	return false
}

func (h *holder) run() {
	h.wg.Add(2)
	go func() { // host 1 -> switch, the first tagged CONNECT held
		defer h.wg.Done()
		buf := make([]byte, 65536)
		for {
			n, _, err := h.hostSide.ReadFromUDP(buf)
			if err != nil {
				return
			}
			pkt := buf[:n]
			if t, err := wire.Peek(pkt); err == nil && t != wire.TypePause && !h.released.Load() && h.keep(t, pkt) {
				continue
			}
			_, _ = h.switchSide.WriteToUDP(pkt, h.port)
		}
	}()
	go func() { // switch -> host 1, untouched
		defer h.wg.Done()
		buf := make([]byte, 65536)
		for {
			n, _, err := h.switchSide.ReadFromUDP(buf)
			if err != nil {
				return
			}
			_, _ = h.hostSide.WriteToUDP(buf[:n], h.host)
		}
	}()
}

// heldTags returns the tags of the held CONNECT, if one is held.
func (h *holder) heldTags() (wire.Tags, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.held == nil {
		return wire.Tags{}, false
	}
	tags, _ := wire.Header(h.held).Tags()
	return tags, true
}

// release sends the held CONNECT on to the switch.
func (h *holder) release() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.released.Store(true)
	_, err := h.switchSide.WriteToUDP(h.held, h.port)
	return err
}

// Attack (issue 39, item 1): "a relay on the path holds the first sealed
// CONNECT that carries a tag and delivers it after the sender has
// recreated its flow: 3 of 3 runs, refused_replayed 0, host 1
// stale_incarnation 419 / 419 / 1,187, the next batch 'peer
// unreachable', flows_failed 1". forgived -> relay -> trimswitch ->
// forgived on loopback, sealed and plain. The relay holds host 1's first
// CONNECT that names host 2's tag; host 1's flow moves a message (host 2
// binds it from the DATA), is destroyed and created again, and the new
// incarnation binds host 2's flow (a restart); the relay then delivers
// the held CONNECT. Host 2 refuses it (stale_connects 1) and keeps the
// live incarnation (no more peer restarts, the same peer tag); two more
// messages move byte-exact and no flow fails at either host. Sealed, the
// held packet was never opened, so the replay window takes it: the
// engine's incarnation check is what refuses it.
//
// In "sealed, never bound" the relay also drops every other packet of
// the first incarnation that names host 2's tag, so host 2 never binds
// it and has no tag to remember: the held CONNECT is refused by its
// order alone, the sealed packet's start and counter that forgived hands
// the engine (plain has no order, and there a held CONNECT of an
// incarnation never bound still restarts the flow: docs/security.md,
// "Incarnations").
func TestHeldConnectKillsNoLiveFlow(t *testing.T) {
	for _, c := range []struct {
		name          string
		sealed, bound bool
	}{{"sealed", true, true}, {"plain", false, true}, {"sealed, never bound", true, false}} {
		t.Run(c.name, func(t *testing.T) { heldConnect(t, c.sealed, c.bound) })
	}
}

// peerTag returns the peer tag flow id holds at client c's daemon, 0
// while unbound.
func peerTag(t *testing.T, c *hostapi.Client, id hostapi.FlowID) uint32 {
	t.Helper()
	ct, err := c.Counters(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ct.Flows {
		if f.Flow == id {
			return f.PeerTag
		}
	}
	t.Fatalf("no flow %d", id)
	return 0
}

func heldConnect(t *testing.T, sealed, bound bool) {
	dir := t.TempDir()
	sec := ""
	if sealed {
		sec = security(1, keyFile(t, dir, "domain1.key"))
	}
	seq := fabricSeq.Add(1)
	base := fmt.Sprintf("127.%d.%d.", 100+os.Getpid()%100, seq)
	addr := func(last, port int) string { return fmt.Sprintf("%s%d:%d", base, last, port) }
	// Host 1 listens on .1, and its "switch" is the relay at .201; the
	// relay is the switch port h1's neighbour at .21.
	specs := []launch.Spec{pathSwitch(t, dir, addr, addr(21, 4793))}
	sock := func(h int) string { return filepath.Join(dir, fmt.Sprintf("h%d.sock", h)) }
	for h, ends := range map[int][2]string{1: {addr(1, 4793), addr(201, 4793)}, 2: {addr(2, 4793), addr(102, 4793)}} {
		cfg := fmt.Sprintf(`host: %d
listen: %q
switch: %q
socket: %q
log_level: warn
line_rate: 200Mbps
fail_after: 5s
reliability: {window: 64KiB, rto_low: 2ms, rto_high: 8ms}
%s`, h, ends[0], ends[1], sock(h), sec)
		path := filepath.Join(dir, fmt.Sprintf("h%d.yaml", h))
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		specs = append(specs, launch.Spec{Name: fmt.Sprintf("host%d", h), Path: bins["forgived"],
			Args: []string{"--config", path}, Ready: launch.HostAPIReady(sock(h))})
	}
	host1, _ := net.ResolveUDPAddr("udp4", addr(1, 4793))
	port1, _ := net.ResolveUDPAddr("udp4", addr(101, 4793))
	hd := &holder{hostSide: udpListen(t, addr(201, 4793)), switchSide: udpListen(t, addr(21, 4793)), host: host1, port: port1,
		dropRest: !bound}
	hd.run()
	t.Cleanup(func() { hd.hostSide.Close(); hd.switchSide.Close(); hd.wg.Wait() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	g, err := launch.Start(ctx, specs, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Stop(10 * time.Second); err != nil {
			t.Errorf("stopping the fabric: %v", err)
		}
	})
	dial := func(h int) *hostapi.Client {
		c, err := hostapi.Dial(sock(h))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c1, c2 := dial(1), dial(2)
	const flow = 71
	// Host 2's end first: host 1's first CONNECT then draws host 2's
	// ACCEPT, which binds host 1, and host 1 answers with the CONNECT
	// naming host 2's tag that the relay holds. (The other way round,
	// host 1 may bind from host 2's CONNECT and send no such CONNECT.)
	createFlow(ctx, t, c2, flow, 1)
	createFlow(ctx, t, c1, flow, 2)
	if bound {
		messages(t, c1, c2, flow, 1, 64<<10)
	} else {
		settle(func() bool { _, ok := hd.heldTags(); return ok })
	}
	dead, _ := flowTags(t, c1, flow)
	tags, ok := hd.heldTags()
	if !ok || tags.Src != dead || hd.heldSealed != sealed {
		t.Fatalf("the relay holds %+v (held %v, sealed %v); want host 1's first CONNECT naming host 2's tag, of tag %#x, sealed %v",
			tags, ok, hd.heldSealed, dead, sealed)
	}
	if peer, want := peerTag(t, c2, flow), map[bool]uint32{true: dead}[bound]; peer != want {
		t.Fatalf("host 2 bound %#x, want %#x (host 1's first incarnation %#x, bound %v)", peer, want, dead, bound)
	}

	// Host 1's flow end is recreated; host 2 restarts to the new one.
	if err := c1.DestroyFlow(ctx, flow); err != nil {
		t.Fatal(err)
	}
	createFlow(ctx, t, c1, flow, 2)
	var live, peer uint32
	settle(func() bool {
		live, _ = flowTags(t, c1, flow)
		_, peer = flowTags(t, c2, flow)
		return peer == live && live != dead
	})
	if peer != live || live == dead {
		t.Fatalf("host 2 bound %#x, want host 1's new incarnation %#x (the dead one %#x)", peer, live, dead)
	}
	before, h2Before := flowValues(t, c2, flow), hostValues(t, c2)

	// The held CONNECT of the dead incarnation, delivered now.
	if err := hd.release(); err != nil {
		t.Fatal(err)
	}
	var h2 map[string]uint64
	settle(func() bool {
		h2 = hostValues(t, c2)
		return h2["stale_connects"] > h2Before["stale_connects"]
	})
	after := flowValues(t, c2, flow)
	_, peerAfter := flowTags(t, c2, flow)
	t.Logf("held CONNECT of %#x (sealed %v, %d more of it dropped) delivered after the rebind to %#x: host 2 stale_connects %d -> %d, stale_incarnation %d -> %d, refused_replayed %d, peer restarts %d -> %d, peer tag %#x",
		dead, sealed, hd.dropped.Load(), live, h2Before["stale_connects"], h2["stale_connects"], h2Before["stale_incarnation"], h2["stale_incarnation"],
		h2["refused_replayed"], before["peer_restarts"], after["peer_restarts"], peerAfter)
	if h2["stale_connects"] != h2Before["stale_connects"]+1 {
		t.Errorf("host 2 counted %d stale CONNECTs; want the held one refused", h2["stale_connects"]-h2Before["stale_connects"])
	}
	if peerAfter != live || after["peer_restarts"] != before["peer_restarts"] {
		t.Errorf("host 2's flow rebound to %#x (live %#x), peer restarts %d -> %d; want it kept", peerAfter, live,
			before["peer_restarts"], after["peer_restarts"])
	}
	// The live flow moves on, and nothing failed at either end.
	messages(t, c1, c2, flow, 2, 64<<10)
	h1 := hostValues(t, c1)
	h2 = hostValues(t, c2)
	if h1["flows_failed"]+h2["flows_failed"] != 0 {
		t.Errorf("flows failed: host 1 %d, host 2 %d; want none", h1["flows_failed"], h2["flows_failed"])
	}
	if sealed && (h1["sealed"] == 0 || h2["opened"] == 0) {
		t.Errorf("sealed run: host 1 sealed %d, host 2 opened %d", h1["sealed"], h2["opened"])
	}
}
