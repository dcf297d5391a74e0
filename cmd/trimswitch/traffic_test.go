package main

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/udpio"
	"github.com/forgive-emu/forgive/wire"
)

// Traffic for the process tests: a sender paced at a rate, with garbage
// datagrams interleaved, and a receiver that classifies what arrives.

const (
	dataDSCP    = 26 // AF31: a data class
	trimmedDSCP = 11 // what the test switch remarks trimmed headers to
	dataTOS     = dataDSCP<<2 | udpio.ECT0
	maxDatagram = 2048 // the test switch's max_datagram
)

func listen(t *testing.T, addr string) *udpio.Conn {
	t.Helper()
	c, err := udpio.Listen(addr, udpio.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// overloadConfig is a switch whose port "out" is shaped at rate and trims
// at a 64 KiB data queue; "in" faces the sender.
func overloadConfig(sender, receiver, in, out netip.AddrPort, rate string, extra string) string {
	return fmt.Sprintf(`name: overload
seed: 3
metrics: 127.0.0.1:0
max_datagram: %d
socket_buffer: 16MiB # room for the whole blast if the switch is starved for a while
classification:
  data_dscps: [%d]
defaults:
  rate: 0
  data_queue: 1MiB
ports:
  - name: in
    local: %v
    neighbor: %v
  - name: out
    local: %v
    neighbor: %v
    rate: %s
    delay: 20us
    data_queue: 64KiB
    header_queue: 1MiB
    ecn: {kmin: 16KiB, kmax: 48KiB, pmax: 0.5}
    trim: arrival
    trimmed_dscp: %d
routes:
  - dst: [1]
    ports: [in]
  - dst: [2]
    ports: [out]
%s`, maxDatagram, dataDSCP, in, sender, out, receiver, rate, trimmedDSCP, extra)
}

// blastPlan is what the sender sends.
type blastPlan struct {
	packets      int     // DATA packets
	payload      int     // bytes of payload each
	bitsPerSec   float64 // pace of the DATA datagrams
	garbageEvery int     // one garbage datagram after every this many DATA; 0: none
}

// blastSent is what the sender sent.
type blastSent struct {
	packets      int
	payloadBytes int
	garbage      map[string]int // by the reason the switch should count
	took         time.Duration
}

// garbageKinds are invalid datagrams and the reason each is counted under.
var garbageKinds = []struct {
	reason string
	make   func(r *rand.Rand) []byte
}{
	{"too_short", func(*rand.Rand) []byte { return []byte{0x11, 0, 0} }},
	{"bad_version", func(r *rand.Rand) []byte {
		b := make([]byte, 64+r.IntN(400)) // random garbage, version nibble 3
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		b[0] = 0x31
		return b
	}},
	{"truncated", func(*rand.Rand) []byte { return make([]byte, maxDatagram+500) }},
}

// blast sends the plan's DATA packets to dst at its pace, with garbage
// interleaved. Each batch goes out when the pace says it is due, so the
// offered load is bursty at the millisecond scale of Go's sleeps but
// exact on average.
func blast(t *testing.T, tx *udpio.Conn, dst netip.AddrPort, plan blastPlan) blastSent {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	payload := make([]byte, plan.payload)
	sent := blastSent{garbage: map[string]int{}}
	perPacket := float64((wire.DataLen+plan.payload)*8) / plan.bitsPerSec
	start := time.Now()
	msgs := make([]udpio.Msg, 0, 64)
	for sent.packets < plan.packets {
		elapsed := time.Since(start)
		if elapsed > 30*time.Second {
			t.Fatalf("sender still sending after 30s (%d of %d)", sent.packets, plan.packets)
		}
		due := min(int(elapsed.Seconds()/perPacket)+1, plan.packets)
		if due <= sent.packets {
			time.Sleep(100 * time.Microsecond)
			continue
		}
		msgs = msgs[:0]
		for sent.packets < due && len(msgs) < cap(msgs)-1 {
			msgs = append(msgs, udpio.Msg{Buf: dataPacket(t, sent.packets, payload), TOS: dataTOS, Addr: dst})
			sent.packets++
			sent.payloadBytes += plan.payload
			if plan.garbageEvery > 0 && sent.packets%plan.garbageEvery == 0 {
				g := garbageKinds[(sent.packets/plan.garbageEvery)%len(garbageKinds)]
				msgs = append(msgs, udpio.Msg{Buf: g.make(rng), Addr: dst})
				sent.garbage[g.reason]++
			}
		}
		for i := range msgs {
			msgs[i].N = len(msgs[i].Buf)
		}
		if _, err := tx.WriteBatch(msgs); err != nil {
			t.Fatal(err)
		}
	}
	sent.took = time.Since(start)
	return sent
}

func dataPacket(t *testing.T, psn int, payload []byte) []byte {
	t.Helper()
	b, err := wire.AppendData(make([]byte, 0, wire.DataLen+len(payload)), wire.DataFields{
		Src: 1, Dst: 2, Flow: 5, PSN: wire.PSN(psn), Msg: 1, Entropy: uint16(psn),
		Offset: uint32(psn * len(payload)), MsgLen: 1 << 31,
	}, payload)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// tally is what the receiver saw.
type tally struct {
	packets, whole, trimmed, ce int
	trimmedPayload              int // bytes the trimmed headers say were cut
	wrongDSCP, invalid          int
	last                        time.Time // when the last datagram was read
}

// collect reads until want datagrams arrived or none came for quiet.
func collect(t *testing.T, rx *udpio.Conn, want int, quiet time.Duration) tally {
	t.Helper()
	msgs := make([]udpio.Msg, rx.BatchSize())
	for i := range msgs {
		msgs[i].Buf = make([]byte, 9216)
	}
	var got tally
	for got.packets < want {
		n, err := rx.ReadBatchUntil(msgs, time.Now().Add(quiet))
		if err != nil {
			t.Error(err)
			return got
		}
		if n == 0 {
			return got
		}
		got.last = time.Now()
		for i := range msgs[:n] {
			got.add(&msgs[i])
		}
	}
	return got
}

func (g *tally) add(m *udpio.Msg) {
	g.packets++
	d, err := wire.ParseData(m.Payload())
	if err != nil {
		g.invalid++
		return
	}
	wantDSCP := byte(dataDSCP)
	if d.Trimmed() {
		g.trimmed++
		g.trimmedPayload += int(d.PayloadLen())
		wantDSCP = trimmedDSCP
	} else {
		g.whole++
	}
	if udpio.ECN(m.TOS) == udpio.CE {
		g.ce++
	}
	if udpio.DSCP(m.TOS) != wantDSCP {
		g.wrongDSCP++
	}
}
