package trimswitchdrv

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/switchcore"
	"github.com/forgive-emu/forgive/udpio"
	"github.com/forgive-emu/forgive/wire"
)

// On an unshaped link the switch is a forwarder: every valid packet comes
// out of the port its destination is routed to, in order, with its bytes
// and its TOS byte unchanged.
func TestUnshapedLinkForwardsPacketsAndTOSUnchanged(t *testing.T) {
	sender, receiver := listen(t), listen(t)
	r := start(t, parse(t, twoPortYAML(sender.LocalAddr(), receiver.LocalAddr(), unshapedDefaults, "")))
	const n = 200
	pkts := make([][]byte, n)
	tos := make([]byte, n)
	for i := range pkts {
		pkts[i] = dataPacket(t, uint32(i), 100+i)
		// DSCPs 0-7 share priority 0 and so one FIFO: no reordering.
		tos[i] = udpio.MakeTOS(byte(i%8), byte(i%4))
	}
	for i := 0; i < n; i += 50 {
		send(t, sender, r.LocalAddr(0), pkts[i:i+50], tos[i:i+50])
	}
	got := receive(t, receiver, n, 2*time.Second)
	if len(got) != n {
		t.Fatalf("received %d of %d packets", len(got), n)
	}
	for i, g := range got {
		if !bytes.Equal(g.data, pkts[i]) || g.tos != tos[i] {
			t.Fatalf("packet %d: got %d bytes TOS %#x, want %d bytes TOS %#x (same bytes)", i, len(g.data), g.tos, len(pkts[i]), tos[i])
		}
	}
	r.stop(t)
	st := r.Snapshot()
	if in, out := st.Fabric.Ports[0].Received.Packets, st.Fabric.Ports[1].Sent.Packets; in != n || out != n {
		t.Fatalf("engine counted %d received on in and %d sent on out, want %d", in, out, n)
	}
}

// "Invalid datagrams (short, bad version, garbage, truncated) are counted
// (per port, by reason) and dropped; the switch keeps forwarding."
func TestInvalidDatagramsAreCountedByReasonAndForwardingGoesOn(t *testing.T) {
	sender, receiver := listen(t), listen(t)
	r := start(t, parse(t, twoPortYAML(sender.LocalAddr(), receiver.LocalAddr(), unshapedDefaults, "")))
	good := dataPacket(t, 1, 64)
	badVersion := append([]byte(nil), good...)
	badVersion[0] = 1<<4 | 1 // version 1: the layout before the flow tags
	badLength := good[:40]
	badField := append([]byte(nil), good...)
	badField[39] = 1 // reserved byte
	unknownType := append([]byte(nil), good...)
	unknownType[0] = wire.Version<<4 | 9
	garbage := []struct {
		pkt    []byte
		reason InvalidReason
	}{
		{[]byte{1, 2, 3}, InvalidTooShort},
		{badVersion, InvalidBadVersion},
		{unknownType, InvalidUnknownType},
		{badLength, InvalidBadLength},
		{badField, InvalidBadField},
		{make([]byte, 3000), InvalidTruncated}, // max_datagram is 2048
	}
	var pkts [][]byte
	for _, g := range garbage {
		pkts = append(pkts, g.pkt, dataPacket(t, uint32(len(pkts)), 64))
	}
	send(t, sender, r.LocalAddr(0), pkts, make([]byte, len(pkts)))
	if got := receive(t, receiver, len(garbage), 2*time.Second); len(got) != len(garbage) {
		t.Fatalf("received %d valid packets, want %d", len(got), len(garbage))
	}
	r.stop(t)
	st := r.Snapshot()
	for _, g := range garbage {
		if n := st.Ports[0].Invalid[g.reason]; n != 1 {
			t.Errorf("port in counted %d datagrams %v, want 1", n, g.reason)
		}
	}
	if st.TotalInvalid() != uint64(len(garbage)) {
		t.Errorf("total invalid %d, want %d", st.TotalInvalid(), len(garbage))
	}
}

// A shaped link holds packets back, so only the timer goroutine can send
// most of them: every packet of a burst comes out, whole or trimmed, and
// what the receiver counts is what the engine counted.
func TestShapedLinkReleasesABurstThroughTheTimer(t *testing.T) {
	sender, receiver := listen(t), listen(t)
	defaults := `  rate: 50Mbps
  delay: 10us
  data_queue: 16KiB
  trim: arrival
  ecn: {kmin: 2KiB, kmax: 12KiB, pmax: 1}`
	r := start(t, parse(t, twoPortYAML(sender.LocalAddr(), receiver.LocalAddr(), defaults, "")))
	const n = 100
	pkts := make([][]byte, n)
	for i := range pkts {
		pkts[i] = dataPacket(t, uint32(i), 1400)
	}
	tos := bytes.Repeat([]byte{udpio.ECT0}, n)
	send(t, sender, r.LocalAddr(0), pkts, tos)
	got := receive(t, receiver, n, 2*time.Second)
	whole, trimmed, ce := 0, 0, 0
	for _, g := range got {
		d, err := wire.ParseData(g.data)
		if err != nil {
			t.Fatalf("received an invalid packet: %v", err)
		}
		if d.Trimmed() {
			trimmed++
		} else {
			whole++
		}
		if udpio.ECN(g.tos) == udpio.CE {
			ce++
		}
	}
	if whole+trimmed != n || trimmed == 0 || whole == 0 || ce == 0 {
		t.Fatalf("received %d whole and %d trimmed (%d CE) of %d: want all, some of each", whole, trimmed, ce, n)
	}
	r.stop(t)
	cs := r.Snapshot().Fabric.Ports[1].Classes[0]
	if cs.Trimmed.Packets != uint64(trimmed) || cs.Marked.Packets != uint64(ce) {
		t.Fatalf("engine trimmed %d and marked %d; receiver saw %d trimmed, %d CE", cs.Trimmed.Packets, cs.Marked.Packets, trimmed, ce)
	}
}

// Run gives every socket back: the addresses can be bound again.
func TestRunReleasesItsSockets(t *testing.T) {
	sender, receiver := listen(t), listen(t)
	doc := twoPortYAML(sender.LocalAddr(), receiver.LocalAddr(), unshapedDefaults, "metrics: 127.0.0.1:0\n")
	r := start(t, parse(t, doc))
	addrs := []string{r.LocalAddr(0).String(), r.LocalAddr(1).String()}
	metrics := r.MetricsAddr()
	r.stop(t)
	for _, a := range addrs {
		c, err := udpio.Listen(a, udpio.Options{})
		if err != nil {
			t.Fatalf("port address %s still taken: %v", a, err)
		}
		c.Close()
	}
	if _, err := http.Get("http://" + metrics + "/healthz"); err == nil {
		t.Fatalf("metrics server %s still answers", metrics)
	}
}

// The metrics endpoint serves the engine's counters with the port's name,
// and /ready answers once Run forwards.
func TestMetricsEndpoint(t *testing.T) {
	sender, receiver := listen(t), listen(t)
	doc := twoPortYAML(sender.LocalAddr(), receiver.LocalAddr(), unshapedDefaults, "metrics: 127.0.0.1:0\n")
	r := start(t, parse(t, doc))
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get("http://" + r.MetricsAddr() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	deadline := time.Now().Add(5 * time.Second)
	for code, _ := get("/ready"); code != http.StatusOK; code, _ = get("/ready") {
		if time.Now().After(deadline) {
			t.Fatalf("/ready answered %d for 5s", code)
		}
		time.Sleep(10 * time.Millisecond)
	}
	send(t, sender, r.LocalAddr(0), [][]byte{dataPacket(t, 1, 10), {0}}, []byte{0, 0})
	receive(t, receiver, 1, 2*time.Second)
	code, body := get("/metrics")
	for _, want := range []string{
		`trimswitch_sent_packets_total{port="out"} 1`,
		`trimswitch_received_packets_total{port="in"} 1`,
		`trimswitch_invalid_datagrams_total{port="in",reason="too_short"} 1`,
		`trimswitch_enqueued_packets_total{class="0",port="out"} 1`,
		`trimswitch_queue_occupancy_bytes{port="out",queue="data"} 0`,
		`trimswitch_paused_seconds_total{port="out",priority="3"} 0`,
		`trimswitch_socket_drops_total{port="in"} 0`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("/metrics (%d) lacks %q", code, want)
		}
	}
	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	// /queues: the occupancy gauges of every port and queue, and nothing else.
	code, queues := get("/queues")
	var samples []string
	for _, line := range strings.Split(queues, "\n") {
		if line != "" && !strings.HasPrefix(line, "#") {
			samples = append(samples, line)
		}
	}
	want := []string{
		`trimswitch_queue_occupancy_bytes{port="in",queue="data"} 0`,
		`trimswitch_queue_occupancy_bytes{port="in",queue="header"} 0`,
		`trimswitch_queue_occupancy_bytes{port="out",queue="data"} 0`,
		`trimswitch_queue_occupancy_bytes{port="out",queue="header"} 0`,
	}
	if code != http.StatusOK || strings.Join(samples, "\n") != strings.Join(want, "\n") {
		t.Errorf("/queues (%d):\n%s\nwant exactly:\n%s", code, strings.Join(samples, "\n"), strings.Join(want, "\n"))
	}
	if t.Failed() {
		t.Log(body)
	}
}

// The free list serves every batch once the queues reached their depth: a
// steady stream allocates no buffer per packet.
func TestSteadyForwardingReusesBuffers(t *testing.T) {
	sender, receiver := listen(t), listen(t)
	r := start(t, parse(t, twoPortYAML(sender.LocalAddr(), receiver.LocalAddr(), unshapedDefaults, "")))
	pkts := make([][]byte, 32)
	for i := range pkts {
		pkts[i] = dataPacket(t, uint32(i), 500)
	}
	tos := make([]byte, len(pkts))
	round := func() {
		send(t, sender, r.LocalAddr(0), pkts, tos)
		if got := receive(t, receiver, len(pkts), 2*time.Second); len(got) != len(pkts) {
			t.Fatalf("received %d of %d", len(got), len(pkts))
		}
	}
	for range 5 {
		round()
	}
	before := r.pool.allocated()
	for range 50 {
		round()
	}
	if after := r.pool.allocated(); after != before {
		t.Fatalf("the pool allocated %d buffers over 1600 packets in steady state", after-before)
	}
}

// The per-packet path (classify, Receive, Advance, Drain, Reclaim, one
// WriteBatch per port, buffers back to the free list) allocates nothing
// once the queues and batches have their size.
func TestIngestDoesNotAllocate(t *testing.T) {
	sender, receiver := listen(t), listen(t)
	d, err := Open(parse(t, twoPortYAML(sender.LocalAddr(), receiver.LocalAddr(), unshapedDefaults, "")), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	pkts := make([][]byte, 16)
	for i := range pkts {
		pkts[i] = dataPacket(t, uint32(i), 200)
	}
	msgs := make([]udpio.Msg, len(pkts))
	out := make([]switchcore.Output, 0, 64)
	in := d.ports[0]
	batch := func() {
		d.pool.refill(msgs)
		for i, p := range pkts {
			msgs[i].N = copy(msgs[i].Buf, p)
			msgs[i].TOS = udpio.ECT0
			msgs[i].Addr = sender.LocalAddr() // the in port's neighbour
		}
		out = d.ingest(in, msgs, out)
	}
	for range 10 {
		batch()
	}
	if avg := testing.AllocsPerRun(100, batch); avg != 0 {
		t.Fatalf("%v allocations per batch of %d packets", avg, len(pkts))
	}
	if got := receive(t, receiver, 110*len(pkts), time.Second); len(got) == 0 {
		t.Fatal("nothing was forwarded")
	}
}
