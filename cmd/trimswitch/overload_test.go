package main

import (
	"math"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

// A sender offers twice what the egress link carries. The data queue
// fills, so about half the data bytes must be trimmed to their header;
// the RED ramp marks CE on the whole packets that leave a deep queue;
// every DATA packet reaches the receiver, whole or trimmed; and the
// switch's own counters, scraped from /metrics, are exactly what the
// receiver counted. Garbage datagrams interleaved in the stream are
// counted by reason and do not stop the forwarding.
func TestOverloadTrimsHalfTheBytesAndCountersMatchTheReceiver(t *testing.T) {
	const (
		rate    = 100e6 // the shaped egress, bits per second
		packets = 3000
		payload = 1400
	)
	sender, receiver := listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")
	anyPort := netip.MustParseAddrPort("127.0.0.1:0")
	cfg := overloadConfig(sender.LocalAddr(), receiver.LocalAddr(), anyPort, anyPort, "100Mbps", "")
	sw := startSwitch(t, cfg)

	var got tally
	var wg sync.WaitGroup
	start := time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		got = collect(t, receiver, packets, 5*time.Second)
	}()
	sent := blast(t, sender, sw.ports["in"], blastPlan{packets: packets, payload: payload, bitsPerSec: 2 * rate, garbageEvery: 50})
	wg.Wait()
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

	if got.packets != packets || got.invalid != 0 || got.wrongDSCP != 0 {
		t.Fatalf("received %d of %d DATA packets (%d invalid, %d with the wrong DSCP)", got.packets, packets, got.invalid, got.wrongDSCP)
	}
	trimmedShare := float64(got.trimmedPayload) / float64(sent.payloadBytes)
	if trimmedShare < atLeast || got.whole == 0 || got.trimmed == 0 {
		t.Errorf("%.2f of the data bytes were trimmed (%d whole, %d trimmed packets), want at least %.2f, the share a %v link cannot carry in %v, and some whole",
			trimmedShare, got.whole, got.trimmed, atLeast, rate, span)
	}
	if got.ce == 0 {
		t.Errorf("no CE mark: the queue stood above kmin for most of the run")
	}

	m := scrape(t, sw.metrics)
	expect := []struct {
		what  string
		value float64
		want  int
	}{
		{"packets sent out of port out", m.sum("trimswitch_sent_packets_total", `port="out"`), got.packets},
		{"trimmed headers", m.sum("trimswitch_trimmed_packets_total", `port="out"`), got.trimmed},
		{"trimmed payload bytes", m.sum("trimswitch_trimmed_payload_bytes_total", `port="out"`), got.trimmedPayload},
		{"CE marks", m.sum("trimswitch_marked_packets_total", `port="out"`), got.ce},
		{"valid packets received on port in", m.sum("trimswitch_received_packets_total", `port="in"`), packets},
		{"drops", m.sum("trimswitch_dropped_packets_total") + m.sum("trimswitch_rx_dropped_packets_total"), 0},
	}
	for reason, n := range sent.garbage {
		expect = append(expect, struct {
			what  string
			value float64
			want  int
		}{"invalid datagrams " + reason, m.sum("trimswitch_invalid_datagrams_total", `port="in"`, `reason="`+reason+`"`), n})
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
