package main

import (
	bin "encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/udpio"
)

// A sender offers twice what the egress link carries. The data queue
// fills, so about half the data bytes must be trimmed to their header;
// the RED ramp marks CE on the whole packets that leave a deep queue;
// every DATA packet reaches the receiver, whole or trimmed, or was
// dropped by the kernel at a full socket buffer (the switch's input, the
// receiver's), which /proc/net/udp counts for each socket; and the
// switch's own counters, scraped from /metrics, are exactly what the
// receiver counted. Garbage datagrams interleaved in the stream are
// counted by reason and do not stop the forwarding. A loaded machine
// (both cores busy, or the test pinned to one) only moves datagrams from
// received to the kernel's drops: every one is accounted for.
func TestOverloadTrimsHalfTheBytesAndCountersMatchTheReceiver(t *testing.T) {
	const (
		rate    = 100e6 // the shaped egress, bits per second
		packets = 3000
		payload = 1400
	)
	sender, receiver := listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")
	rxAddr := receiver.LocalAddr()
	anyPort := netip.MustParseAddrPort("127.0.0.1:0")
	cfg := overloadConfig(sender.LocalAddr(), receiver.LocalAddr(), anyPort, anyPort, "100Mbps", "")
	sw := startSwitch(t, cfg)

	var got tally
	var wg sync.WaitGroup
	start := time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		// Until every packet arrived or was dropped by the kernel;
		// a minute without progress is a hang.
		got = collectAccounted(t, receiver, packets, time.Minute, func() int {
			return int(kernelDrops(t, sw.ports["in"]) + kernelDrops(t, rxAddr))
		})
	}()
	sent := blast(t, sender, sw.ports["in"], blastPlan{packets: packets, payload: payload, bitsPerSec: 2 * rate, garbageEvery: 50})
	wg.Wait()
	inDrops, rxDrops := int(kernelDrops(t, sw.ports["in"])), int(kernelDrops(t, rxAddr))
	// The switch forwarded everything between start and the last arrival:
	// its link, shaped to rate, carried at most rate for that span plus
	// what its queue held, so at least the fluid model's share was
	// trimmed, less 0.05 for the model's roughness. A loaded machine only
	// lengthens the span and loosens the bound; how close to half the
	// share comes is the machine's timing.
	span := got.last.Sub(start)
	atLeast := expectedTrimShare(float64(sent.payloadBytes), rate, span, 64<<10) - 0.05
	t.Logf("sent %d DATA (garbage %v) in %v; received %d over %v: %d whole (%d CE), %d trimmed; a fluid model trims %.2f of the offer at the send's pace, at least %.2f over the span",
		sent.packets, sent.garbage, sent.took, got.packets, span, got.whole, got.ce, got.trimmed,
		expectedTrimShare(float64(sent.payloadBytes), rate, sent.took, 64<<10), atLeast)

	if got.invalid != 0 || got.wrongDSCP != 0 {
		t.Fatalf("received %d invalid DATA packets, %d with the wrong DSCP", got.invalid, got.wrongDSCP)
	}
	if inDrops+rxDrops > 0 {
		t.Logf("the kernel dropped %d datagrams at the switch's input and %d at the receiver (full socket buffers: a loaded machine)", inDrops, rxDrops)
	}
	trimmedShare := float64(got.trimmedPayload) / float64(sent.payloadBytes)
	if inDrops+rxDrops == 0 && trimmedShare < atLeast || got.whole == 0 || got.trimmed == 0 {
		t.Errorf("%.2f of the data bytes were trimmed (%d whole, %d trimmed packets), want at least %.2f, the share a %v link cannot carry in %v, and some whole",
			trimmedShare, got.whole, got.trimmed, atLeast, rate, span)
	}
	if got.ce == 0 {
		t.Errorf("no CE mark: the queue stood above kmin for most of the run")
	}

	m := scrape(t, sw.metrics)
	garbage := 0
	for _, n := range sent.garbage {
		garbage += n
	}
	in := m.sum("trimswitch_received_packets_total", `port="in"`)
	invalid := m.sum("trimswitch_invalid_datagrams_total", `port="in"`)
	out := m.sum("trimswitch_sent_packets_total", `port="out"`)
	// Every datagram sent is read by the switch (valid or not) or dropped
	// by the kernel before it; every DATA packet the switch read leaves
	// by port out; every one that left arrives or is dropped by the kernel
	// at the receiver.
	if in+invalid+float64(inDrops) != float64(packets+garbage) {
		t.Errorf("the switch read %v valid and %v invalid datagrams, the kernel dropped %d before it: %v, want the %d sent",
			in, invalid, inDrops, in+invalid+float64(inDrops), packets+garbage)
	}
	if float64(got.packets+rxDrops) != out {
		t.Errorf("the receiver read %d DATA packets and the kernel dropped %d before it: %d, want the %v the switch sent",
			got.packets, rxDrops, got.packets+rxDrops, out)
	}
	expect := []struct {
		what  string
		value float64
		want  int
	}{
		{"packets sent out of port out (every valid one read)", out, int(in)},
		{"drops", m.sum("trimswitch_dropped_packets_total") + m.sum("trimswitch_rx_dropped_packets_total"), 0},
	}
	if rxDrops == 0 { // the receiver saw every packet the switch sent: its counts are the switch's
		expect = append(expect, []struct {
			what  string
			value float64
			want  int
		}{
			{"trimmed headers", m.sum("trimswitch_trimmed_packets_total", `port="out"`), got.trimmed},
			{"trimmed payload bytes", m.sum("trimswitch_trimmed_payload_bytes_total", `port="out"`), got.trimmedPayload},
			{"CE marks", m.sum("trimswitch_marked_packets_total", `port="out"`), got.ce},
		}...)
	}
	if inDrops == 0 { // the switch read every datagram sent
		expect = append(expect, struct {
			what  string
			value float64
			want  int
		}{"valid packets received on port in", in, packets})
		for reason, n := range sent.garbage {
			expect = append(expect, struct {
				what  string
				value float64
				want  int
			}{"invalid datagrams " + reason, m.sum("trimswitch_invalid_datagrams_total", `port="in"`, `reason="`+reason+`"`), n})
		}
	}
	for _, e := range expect {
		if e.value != float64(e.want) {
			t.Errorf("%s: the switch counted %v, the test %d", e.what, e.value, e.want)
		}
	}
	if r := sw.terminate(t); r.code != 0 || !strings.Contains(r.stderr, `"msg":"stopped"`) {
		t.Fatalf("SIGTERM: exit %d, want 0 and a stopped line", r.code)
	}
}

// expectedTrimShare is what a fluid model predicts: the link carries rate
// for the duration of the offer plus what the queue holds.
func expectedTrimShare(offered float64, rate float64, took time.Duration, queue float64) float64 {
	return math.Max(0, 1-(rate/8*took.Seconds()+queue)/offered)
}

// collectAccounted reads until every one of want datagrams arrived or was
// dropped (drops reports the kernel's count), or until nothing moved for
// stall: a guard against a hang, not a deadline on the machine's speed.
func collectAccounted(t *testing.T, rx *udpio.Conn, want int, stall time.Duration, drops func() int) tally {
	t.Helper()
	msgs := make([]udpio.Msg, rx.BatchSize())
	for i := range msgs {
		msgs[i].Buf = make([]byte, 9216)
	}
	var got tally
	moved, lastDrops := time.Now(), 0
	for {
		d := drops()
		if got.packets+d >= want {
			return got
		}
		if d != lastDrops {
			moved, lastDrops = time.Now(), d
		}
		if time.Since(moved) > stall {
			return got
		}
		n, err := rx.ReadBatchUntil(msgs, time.Now().Add(200*time.Millisecond))
		if err != nil {
			t.Error(err)
			return got
		}
		if n == 0 {
			continue
		}
		got.last, moved = time.Now(), time.Now()
		for i := range msgs[:n] {
			got.add(&msgs[i])
		}
	}
}

// kernelDrops is the drops column of /proc/net/udp for the socket bound to
// addr: datagrams the kernel dropped at its full receive buffer.
func kernelDrops(t *testing.T, addr netip.AddrPort) int64 {
	t.Helper()
	b, err := os.ReadFile("/proc/net/udp")
	if err != nil {
		t.Fatal(err)
	}
	a4 := addr.Addr().As4()
	// The kernel prints the address's network-order word in the machine's
	// byte order, then the port, both in hex.
	local := fmt.Sprintf("%08X:%04X", bin.NativeEndian.Uint32(a4[:]), addr.Port())
	for _, l := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(l)
		if len(f) >= 13 && f[1] == local {
			n, err := strconv.ParseInt(f[len(f)-1], 10, 64)
			if err != nil {
				t.Fatalf("/proc/net/udp: %q: %v", l, err)
			}
			return n
		}
	}
	t.Fatalf("/proc/net/udp has no socket %v (%s)", addr, local)
	return 0
}
