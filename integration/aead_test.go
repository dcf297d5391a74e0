package integration

import (
	"bytes"
	"context"
	"crypto/rand"
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
	"github.com/forgive-emu/forgive/tss"
	"github.com/forgive-emu/forgive/wire"
)

// keyFile writes a fresh security-domain key file of mode 0600 (as
// forgivectl keygen does) and returns its path.
func keyFile(t testing.TB, dir, name string) string {
	t.Helper()
	var k tss.Key
	if _, err := rand.Read(k[:]); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, tss.FormatKeyFile(k), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// security returns a daemon config's security section for one domain.
func security(domain uint32, key string) string {
	return fmt.Sprintf("security: {domains: [{id: %d, key_file: %q}]}\n", domain, key)
}

// refusals sums the security sublayer's refusal counters of a host for
// forged packets: every reason but refused_replayed, whose packets are
// authentic.
func refusals(v map[string]uint64) uint64 {
	return v["refused_unsealed"] + v["refused_unknown_domain"] + v["refused_wrong_domain"] +
		v["refused_header_tag"] + v["refused_payload_tag"] + v["refused_malformed_seal"]
}

// "It must survive trimming: a trimmed header still has to be
// authenticated, since the switch removes the payload." Three daemons
// share a domain key; host 3 runs without congestion control beside host
// 2 into host 1's 200 Mb/s port, so the switch, which has no key, trims
// sealed packets. Both transfers arrive byte-exact; host 1 authenticated
// trimmed sealed headers (opened_trimmed) as the flows' trimmed_recv, and
// refused nothing.
func TestSealedTransferSurvivesTrimming(t *testing.T) {
	dir := t.TempDir()
	sec := security(1, keyFile(t, dir, "domain1.key"))
	s := newStar(t, 3, "200Mbps", map[uint16]hostOpts{1: {extra: sec}, 2: {extra: sec}, 3: {cc: "none", extra: sec}})
	c1, c2, c3 := s.client(1), s.client(2), s.client(3)
	// Both prepared before either is sent, so they overlap under the race
	// detector too.
	big := prepare(t, c2, c1, 2, 1, 21, hostapi.ClassTensor, 16<<20, 0)
	noise := prepare(t, c3, c1, 3, 1, 31, hostapi.ClassOther, 8<<20, 0)
	noise.send()
	big.send()
	for range 2 {
		if comp := awaitKind(t, c1, hostapi.KindRecv, 2*time.Minute); comp.Status != hostapi.StatusOK || len(comp.Forgiven) != 0 {
			t.Fatalf("receive %+v: want success with nothing forgiven", comp)
		}
	}
	if !bytes.Equal(big.dst, big.src) || !bytes.Equal(noise.dst, noise.src) {
		t.Fatal("received bytes differ from the bytes sent")
	}
	trimmed := metric(t, s.swStats, "trimswitch_trimmed_packets_total", `port="h1"`)
	h1 := hostValues(t, c1)
	f21, f31 := flowValues(t, c1, 21), flowValues(t, c1, 31)
	t.Logf("switch trimmed %v sealed packets to host 1; host 1 opened %d (%d trimmed headers), refused %d; flows trimmed_recv %d + %d",
		trimmed, h1["opened"], h1["opened_trimmed"], refusals(h1), f21["trimmed_recv"], f31["trimmed_recv"])
	if trimmed == 0 {
		t.Fatal("the switch trimmed nothing: the test did not exercise trimming")
	}
	if h1["opened_trimmed"] == 0 || h1["opened_trimmed"] != f21["trimmed_recv"]+f31["trimmed_recv"] {
		t.Errorf("host 1 authenticated %d trimmed headers; its flows received %d trimmed; want every trimmed header authenticated",
			h1["opened_trimmed"], f21["trimmed_recv"]+f31["trimmed_recv"])
	}
	if uint64(trimmed) < h1["opened_trimmed"] {
		t.Errorf("host 1 authenticated %d trimmed headers, the switch trimmed only %v", h1["opened_trimmed"], trimmed)
	}
	if refusals(h1) != 0 || h1["malformed"] != 0 || h1["seal_errors"] != 0 {
		t.Errorf("host 1 refused %d packets (malformed %d, seal errors %d); want none", refusals(h1), h1["malformed"], h1["seal_errors"])
	}
	for h, c := range map[int]*hostapi.Client{1: c1, 2: c2, 3: c3} { // host 1 sends only ACKs, NACKs and CNPs
		if v := hostValues(t, c); v["sealed"] == 0 || v["sealed"] != v["tx_packets"] || v["opened"] == 0 || refusals(v) != 0 {
			t.Errorf("host %d: sealed %d of %d packets, opened %d, refused %d; want every packet sealed and nothing refused",
				h, v["sealed"], v["tx_packets"], v["opened"], refusals(v))
		}
	}
}

// A host without the domain's key, or with another key for the same
// domain id, gets nothing delivered, and what it sends is refused: host 3
// has no security section (its plain packets are refused_unsealed at host
// 1; host 1's sealed packets are refused_unknown_domain at host 3), host 4
// has another key (refused_header_tag both ways). A keyed transfer in the
// same fabric completes byte-exact.
func TestHostWithoutTheKeyGetsNothing(t *testing.T) {
	dir := t.TempDir()
	sec := security(1, keyFile(t, dir, "domain1.key"))
	other := security(1, keyFile(t, dir, "other.key"))
	s := newStar(t, 4, "200Mbps", map[uint16]hostOpts{
		1: {extra: sec}, 2: {extra: sec}, 3: {failAfter: "2s"}, 4: {failAfter: "2s", extra: other}})
	c1, c2, c3, c4 := s.client(1), s.client(2), s.client(3), s.client(4)
	const size = 1 << 20
	from3 := post(t, c3, c1, 3, 1, 31, hostapi.ClassTensor, size, 0)
	from4 := post(t, c4, c1, 4, 1, 41, hostapi.ClassTensor, size, 0)
	to3 := post(t, c1, c3, 1, 3, 13, hostapi.ClassTensor, size, 0)
	to4 := post(t, c1, c4, 1, 4, 14, hostapi.ClassTensor, size, 0)
	good := post(t, c2, c1, 2, 1, 21, hostapi.ClassTensor, 4<<20, 0)
	for _, c := range []*hostapi.Client{c3, c4} {
		if comp := awaitKind(t, c, hostapi.KindSend, time.Minute); comp.Status == hostapi.StatusOK {
			t.Errorf("a send from a host without the key succeeded: %+v", comp)
		}
	}
	if comp := awaitKind(t, c1, hostapi.KindRecv, time.Minute); comp.Status != hostapi.StatusOK || comp.Flow != 21 {
		t.Fatalf("host 1's first receive: %+v; want the keyed transfer on flow 21", comp)
	}
	if !bytes.Equal(good.dst, good.src) {
		t.Fatal("the keyed transfer's bytes differ")
	}
	for name, x := range map[string]*transfer{"3 to 1": from3, "4 to 1": from4, "1 to 3": to3, "1 to 4": to4} {
		if !x.untouched() {
			t.Errorf("%s: bytes were delivered across the key boundary", name)
		}
	}
	h1, h3, h4 := hostValues(t, c1), hostValues(t, c3), hostValues(t, c4)
	t.Logf("host 1 refused %d unsealed and %d with a bad header tag; host 3 refused %d of an unknown domain; host 4 refused %d with a bad header tag",
		h1["refused_unsealed"], h1["refused_header_tag"], h3["refused_unknown_domain"], h4["refused_header_tag"])
	if h1["refused_unsealed"] == 0 || h1["refused_header_tag"] == 0 {
		t.Errorf("host 1: %d unsealed and %d bad header tags refused; want both", h1["refused_unsealed"], h1["refused_header_tag"])
	}
	if h3["refused_unknown_domain"] == 0 || h3["opened"] != 0 || h3["sealed"] != 0 || h3["truncated"] != 0 {
		t.Errorf("host 3 (no key): refused %d sealed packets, opened %d, sealed %d, truncated %d; want refusals only",
			h3["refused_unknown_domain"], h3["opened"], h3["sealed"], h3["truncated"])
	}
	if h4["refused_header_tag"] == 0 || h4["opened"] != 0 {
		t.Errorf("host 4 (another key): refused %d, opened %d; want refusals only", h4["refused_header_tag"], h4["opened"])
	}
	if h1["opened"] == 0 || h1["refused_payload_tag"] != 0 || h1["refused_malformed_seal"] != 0 {
		t.Errorf("host 1: opened %d, payload-tag refusals %d, malformed %d", h1["opened"], h1["refused_payload_tag"], h1["refused_malformed_seal"])
	}
}

// tamperer is an on-path attacker between host 2 and its switch port: it
// relays every datagram both ways, and toward host 2 it also sends forged
// packets: copies of real sealed packets with one bit flipped, in the
// header, the domain, the nonce, the header tag, the payload or the
// payload tag, and plain packets with no seal at all.
type tamperer struct {
	hostSide, switchSide *net.UDPConn
	host, port           *net.UDPAddr
	every, limit         int
	injected             atomic.Int64
	// What crossed the relay from the daemons, by type; plain counts the
	// packets that were not sealed.
	types sync.Map // wire.Type -> *atomic.Int64
	plain atomic.Int64
	// toHost counts the real packets relayed to host 2, replayed those
	// sent to it a second time.
	toHost, replayed atomic.Int64
	byPart           sync.Map // part name -> *atomic.Int64
	wg               sync.WaitGroup
}

// count adds n forgeries of part. The relay counts a forgery before it
// sends it (and takes it back if the send fails): host 2 may refuse it
// before the relay's next line runs, and the test must never see the
// refusal of a forgery it has not counted.
func (tp *tamperer) count(part string, n int64) {
	v, _ := tp.byPart.LoadOrStore(part, new(atomic.Int64))
	v.(*atomic.Int64).Add(n)
	tp.injected.Add(n)
}

// saw records one packet a daemon sent across the relay.
func (tp *tamperer) saw(pkt []byte) {
	typ, err := wire.Peek(pkt)
	if err != nil || !wire.Sealed(pkt) {
		tp.plain.Add(1)
		return
	}
	v, _ := tp.types.LoadOrStore(typ, new(atomic.Int64))
	v.(*atomic.Int64).Add(1)
}

func (tp *tamperer) run() {
	tp.wg.Add(2)
	go func() { // host 2 -> switch, untouched
		defer tp.wg.Done()
		buf := make([]byte, 65536)
		for {
			n, _, err := tp.hostSide.ReadFromUDP(buf)
			if err != nil {
				return
			}
			tp.saw(buf[:n])
			_, _ = tp.switchSide.WriteToUDP(buf[:n], tp.port)
		}
	}()
	go func() { // switch -> host 2, with forgeries
		defer tp.wg.Done()
		buf := make([]byte, 65536)
		seen := 0
		var replay [][]byte
		for {
			n, _, err := tp.switchSide.ReadFromUDP(buf)
			if err != nil {
				return
			}
			pkt := buf[:n]
			tp.saw(pkt)
			tp.toHost.Add(1)
			seen++
			if wire.Sealed(pkt) && seen%tp.every == 0 && int(tp.injected.Load()) < tp.limit {
				tp.forge(pkt, seen)
			}
			_, _ = tp.hostSide.WriteToUDP(pkt, tp.host)
			// Replay: every 8th packet is sent again 20 packets later,
			// unchanged. It authenticates, and the sublayer's replay
			// window refuses it (refused_replayed).
			if seen%8 == 0 {
				replay = append(replay, bytes.Clone(pkt))
			}
			if seen%8 == 4 && len(replay) > 20/8 {
				tp.replayed.Add(1) // before the send, as count
				if _, err := tp.hostSide.WriteToUDP(replay[0], tp.host); err != nil {
					tp.replayed.Add(-1)
				}
				replay = replay[1:]
			}
		}
	}()
}

// forge sends host 2 one forgery derived from the real packet pkt.
func (tp *tamperer) forge(pkt []byte, seen int) {
	typ, err := wire.Peek(pkt)
	if err != nil {
		return
	}
	hl, _ := wire.HeaderLen(typ)
	c := bytes.Clone(pkt)
	var part string
	switch r := seen / tp.every % 7; {
	case r == 6: // the same header, plain: the seal stripped
		c = c[:hl]
		c[1] &^= wire.FlagSealed
		if typ == wire.TypeData {
			c[1] |= wire.DataTrimmed
		}
		part = "unsealed"
	default:
		// Pick a byte in one part; flip one bit of it.
		lo, hi := []int{0, hl, hl + 4, hl + 28, hl + 44, len(c) - 16}[r], []int{hl, hl + 4, hl + 28, hl + 44, len(c) - 16, len(c)}[r]
		if lo >= hi || hi > len(c) {
			lo, hi = 0, hl // a control packet or a trimmed header: no payload
			r = 0
		}
		i := lo + seen%(hi-lo)
		c[i] ^= 1 << (seen % 8)
		part = []string{"header", "domain", "nonce", "header tag", "payload", "payload tag"}[r]
	}
	tp.count(part, 1)
	if _, err := tp.hostSide.WriteToUDP(c, tp.host); err != nil {
		tp.count(part, -1)
	}
}

func udpListen(t *testing.T, addr string) *net.UDPConn {
	t.Helper()
	a, err := net.ResolveUDPAddr("udp4", addr)
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.ListenUDP("udp4", a)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadBuffer(4 << 20)
	return c
}

// Forged and bit-flipped packets on the path are refused and counted: an
// on-path attacker between host 2 and the switch injects, beside every
// other real packet toward host 2, a copy with one bit flipped (up to
// 1,500 forgeries, in every part of the sealed layout) or the same header
// with its seal stripped, and it replays every 8th real packet 20 packets
// later. Host 2 refuses every forgery it reads under a named reason (a
// flipped version or type bit is the engine's malformed) and opens none of
// them; the replays are refused as refused_replayed, and the 8 MiB
// transfer from host 1 arrives byte-exact.
func TestForgedSealedPacketsRefused(t *testing.T) {
	dir := t.TempDir()
	key := keyFile(t, dir, "domain1.key")
	seq := fabricSeq.Add(1)
	base := fmt.Sprintf("127.%d.%d.", 100+os.Getpid()%100, seq)
	addr := func(last, port int) string { return fmt.Sprintf("%s%d:%d", base, last, port) }
	// Host 2 listens on .52; the tamperer is its "switch" at .202 and
	// the switch's neighbour for port h2 at .2.
	specs := []launch.Spec{pathSwitch(t, dir, addr, addr(1, 4793))}
	for h, ends := range map[int][2]string{1: {addr(1, 4793), addr(101, 4793)}, 2: {addr(52, 4793), addr(202, 4793)}} {
		cfg := fmt.Sprintf(`host: %d
listen: %q
switch: %q
socket: %q
log_level: warn
line_rate: 200Mbps
fail_after: 5s
reliability: {window: 64KiB, rto_low: 2ms, rto_high: 8ms}
%s`, h, ends[0], ends[1], filepath.Join(dir, fmt.Sprintf("h%d.sock", h)), security(1, key))
		path := filepath.Join(dir, fmt.Sprintf("h%d.yaml", h))
		if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
			t.Fatal(err)
		}
		specs = append(specs, launch.Spec{Name: fmt.Sprintf("host%d", h), Path: bins["forgived"],
			Args: []string{"--config", path}, Ready: launch.HostAPIReady(filepath.Join(dir, fmt.Sprintf("h%d.sock", h)))})
	}
	host2, _ := net.ResolveUDPAddr("udp4", addr(52, 4793))
	port2, _ := net.ResolveUDPAddr("udp4", addr(102, 4793))
	tp := &tamperer{hostSide: udpListen(t, addr(202, 4793)), switchSide: udpListen(t, addr(2, 4793)),
		host: host2, port: port2, every: 2, limit: 1500}
	tp.run()
	t.Cleanup(func() { tp.hostSide.Close(); tp.switchSide.Close(); tp.wg.Wait() })
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := launch.Start(ctx, specs, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := g.Stop(10 * time.Second); err != nil {
			t.Errorf("stopping the fabric: %v", err)
		}
	})
	dial := func(h int) *hostapi.Client {
		c, err := hostapi.Dial(filepath.Join(dir, fmt.Sprintf("h%d.sock", h)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	c1, c2 := dial(1), dial(2)
	elapsed := timedTransfer(t, c1, c2, 12, 8<<20, nil)

	var v map[string]uint64
	// The last forgeries may still be in host 2's socket.
	// A forged nonce that names an opened counter or an earlier start is
	// refused as a replay, before its tag is checked: refused_replayed
	// counts the replays and those forgeries.
	settle(func() bool {
		v = hostValues(t, c2)
		return refusals(v)+v["malformed"]+v["refused_replayed"] >= uint64(tp.injected.Load()+tp.replayed.Load())
	})
	// The relay goes on relaying the flow's last control packets, and may
	// forge or replay one more: what it injected is read after host 2's
	// counters, so it covers every refusal they count.
	rp := uint64(tp.replayed.Load())
	parts := map[string]int64{}
	tp.byPart.Range(func(k, val any) bool { parts[k.(string)] = val.(*atomic.Int64).Load(); return true })
	refused := refusals(v) + v["malformed"] + v["refused_replayed"]
	t.Logf("transfer %v; %d forgeries injected %v and %d replays; host 2 refused %d: unsealed %d, header tag %d, payload tag %d, unknown domain %d, malformed seal %d, malformed %d, replayed %d; opened %d (%d trimmed)",
		elapsed.Round(time.Millisecond), tp.injected.Load(), parts, rp, refused, v["refused_unsealed"], v["refused_header_tag"],
		v["refused_payload_tag"], v["refused_unknown_domain"], v["refused_malformed_seal"], v["malformed"], v["refused_replayed"],
		v["opened"], v["opened_trimmed"])
	// Every packet either daemon sent was sealed, control packets too.
	types := map[wire.Type]int64{}
	tp.types.Range(func(k, val any) bool { types[k.(wire.Type)] = val.(*atomic.Int64).Load(); return true })
	t.Logf("sealed packets across the relay by type: %v; plain: %d; to host 2: %d real, %d replayed",
		types, tp.plain.Load(), tp.toHost.Load(), tp.replayed.Load())
	if tp.plain.Load() != 0 || types[wire.TypeData] == 0 || types[wire.TypeAck] == 0 {
		t.Errorf("across the relay: %d plain packets, sealed by type %v; want DATA and ACK, all sealed", tp.plain.Load(), types)
	}
	// Replays are refused by the sublayer's window, and open nothing:
	// host 2 opened no more than the real packets relayed to it.
	// Loopback may drop a datagram when host 2's socket is full.
	if rp < 100 || v["refused_replayed"] > rp+uint64(parts["nonce"]) || v["refused_replayed"] < rp*9/10 ||
		v["opened"] > uint64(tp.toHost.Load()) {
		t.Errorf("%d real packets to host 2 and %d replays: host 2 opened %d, refused %d as replayed; want every replay refused",
			tp.toHost.Load(), rp, v["opened"], v["refused_replayed"])
	}
	inj := uint64(tp.injected.Load())
	if inj < 500 {
		t.Fatalf("only %d forgeries injected: the attack did not happen", inj)
	}
	for _, p := range []string{"header", "domain", "nonce", "header tag", "payload", "payload tag", "unsealed"} {
		if parts[p] == 0 {
			t.Errorf("no forgery in the %s", p)
		}
	}
	// Loopback may drop a datagram when host 2's socket is full; every
	// forgery and replay read is refused, and none is opened.
	if refused > inj+rp || refused < (inj+rp)*9/10 {
		t.Errorf("%d forgeries and %d replays injected, %d refused; want every one refused", inj, rp, refused)
	}
	if v["refused_unsealed"] == 0 || v["refused_header_tag"] == 0 || v["refused_payload_tag"] == 0 {
		t.Errorf("refusals by reason: unsealed %d, header tag %d, payload tag %d; want each",
			v["refused_unsealed"], v["refused_header_tag"], v["refused_payload_tag"])
	}
}

// BenchmarkSealedOneFlow is BenchmarkOneFlow's trimswitch case (one 32 MiB
// message per transfer, forgived -> trimswitch -> forgived on loopback,
// unshaped links) on two fabrics running side by side: plain, and with
// both daemons sealing every packet for one security domain. Each op moves
// one message through each, in turns, so a load that comes and goes on
// the machine weighs on both alike. It reports the goodput of each (payload
// bytes delivered per second, in Gb/s) and the sealed fabric's cost, the
// share of the plain goodput it loses, in percent.
//
//	go test ./integration -run '^$' -bench SealedOneFlow -benchtime 5x -count 3
func BenchmarkSealedOneFlow(b *testing.B) {
	plain := startOneFlow(b, "trimswitch", nil)
	sealed := startOneFlow(b, "trimswitch", func(dir string) string { return security(1, keyFile(b, dir, "domain1.key")) })
	gp, gs := inTurns(b, plain, sealed, "plain-", "sealed-")
	// The measurement counts only if every packet was sealed and opened.
	for h, c := range map[int]*hostapi.Client{1: sealed.c1, 2: sealed.c2} {
		ct, err := c.Counters(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		v := ct.Host.Map()
		if v["sealed"] == 0 || v["sealed"] != v["tx_packets"] || v["opened"] == 0 || refusals(v)+v["refused_replayed"] != 0 {
			b.Fatalf("host %d: sealed %d of %d packets, opened %d, refused %d (%d as replayed)", h, v["sealed"], v["tx_packets"],
				v["opened"], refusals(v)+v["refused_replayed"], v["refused_replayed"])
		}
	}
	b.ReportMetric(100*(1-gs/gp), "cost-%")
}

// pathSwitch is the trimswitch of a two-host fabric on whose path a test
// puts its own relay: port h1 at .101 takes host 1's packets from
// neighbour h1Neighbor (host 1 itself, or a relay in front of it), port
// h2 at .102 serves host 2 at .2, and its metrics answer at .250.
func pathSwitch(t *testing.T, dir string, addr func(last, port int) string, h1Neighbor string) launch.Spec {
	t.Helper()
	sw := fmt.Sprintf(`name: sw
seed: 1
metrics: %s
log_level: warn
defaults: {rate: 200Mbps, delay: 5us, data_queue: 64KiB, trim: ndp}
ports:
  - {name: h1, local: %q, neighbor: %q, host: 1}
  - {name: h2, local: %q, neighbor: %q, host: 2}
routes:
  - {dst: [1], ports: [h1]}
  - {dst: [2], ports: [h2]}
`, addr(250, 9464), addr(101, 4793), h1Neighbor, addr(102, 4793), addr(2, 4793))
	swPath := filepath.Join(dir, "sw.yaml")
	if err := os.WriteFile(swPath, []byte(sw), 0o644); err != nil {
		t.Fatal(err)
	}
	return launch.Spec{Name: "switch", Path: bins["trimswitch"], Args: []string{"--config", swPath},
		Ready: launch.HTTPReady("http://" + addr(250, 9464) + "/ready")}
}
