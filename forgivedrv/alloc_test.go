package forgivedrv

import (
	"crypto/rand"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/forgive-emu/forgive/internal/race"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/tss"
	"github.com/forgive-emu/forgive/udpio"
	"github.com/forgive-emu/forgive/wire"
)

// TestLoopAllocatesNothingPerPacket is forgived's allocation gate: the
// loop's per-packet paths without the socket (ingest, which checks each
// datagram and hands it to the engine, and fill, which writes a batch of
// what the engine sends) allocate nothing per packet while a transfer
// runs between the daemon's engine and a peer engine cabled straight to
// its batches. A round moves about five packets, so one allocation per
// packet would count five per round; a message's own few allocations (its
// work requests and completion, about one message in forty rounds) are
// below AllocsPerRun's whole-number average.
//
// Sealed, the same holds with the security sublayer on both sides: the
// loop seals in place what fill writes and opens in place what ingest
// reads, and the peer does the same.
func TestLoopAllocatesNothingPerPacket(t *testing.T) {
	t.Run("plain", func(t *testing.T) { loopAllocs(t, false) })
	t.Run("sealed", func(t *testing.T) { loopAllocs(t, true) })
}

func loopAllocs(t *testing.T, sealed bool) {
	const msg = 1 << 20
	sw := netip.MustParseAddrPort("127.0.0.1:4793")
	engines := [2]*nic.Engine{}
	regions := [2]nic.RegionID{}
	for i, h := range []uint16{1, 2} {
		cfg := nic.DefaultConfig(h, 1e12) // pacing is not what this measures
		cfg.DCQCN.LineRate = 0
		e, err := nic.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.CreateFlow(0, nic.FlowSpec{Peer: 3 - h, ID: 1, Class: nic.ClassGradient}); err != nil {
			t.Fatal(err)
		}
		if regions[i], err = e.RegisterMemory(make([]byte, msg)); err != nil {
			t.Fatal(err)
		}
		engines[i] = e
	}
	bufSize := wire.DataLen + nic.DefaultConfig(1, 1e9).MTU
	d := &Daemon{eng: engines[0], sw: sw, log: zap.NewNop(),
		rx: make([]udpio.Msg, 32), tx: make([]udpio.Msg, 32)}
	for i := range d.rx {
		d.rx[i].Buf = make([]byte, bufSize+wire.SealOverhead+1)
		d.tx[i].Buf = make([]byte, bufSize+wire.SealOverhead)
	}
	peer := engines[1]
	// The peer's side of the sublayer.
	var peerSealer *tss.Sealer
	var peerOpener *tss.Opener
	if sealed {
		ring, err := tss.NewKeyring(tss.Domain{ID: 1, Key: tss.Key{1, 2, 3}})
		if err != nil {
			t.Fatal(err)
		}
		if d.sealer, err = tss.NewSealer(ring, rand.Reader, 1); err != nil {
			t.Fatal(err)
		}
		if peerSealer, err = tss.NewSealer(ring, rand.Reader, 2); err != nil {
			t.Fatal(err)
		}
		d.opener, peerOpener = tss.NewOpener(ring), tss.NewOpener(ring)
	}
	var now time.Duration
	var received, sent, gathered int
	dgram := make([]byte, 0, bufSize+wire.SealOverhead)
	// round moves one batch each way at now: the peer's packets through
	// ingest, the daemon's through fill to the peer, then advances time.
	round := func() {
		n := 0
		for ; n < len(d.rx); n++ {
			full := d.rx[n].Buf[:cap(d.rx[n].Buf)]
			if !sealed {
				pkt, tos, ok := peer.Transmit(now, full)
				if !ok {
					break
				}
				d.rx[n].N, d.rx[n].TOS, d.rx[n].Addr, d.rx[n].Truncated = len(pkt), tos, sw, false
				continue
			}
			pkt, tos, ok := peer.Transmit(now, full[tss.Headroom:])
			if !ok {
				break
			}
			if wire.Header(pkt).Type() != wire.TypePause {
				var err error
				if pkt, err = peerSealer.SealInPlace(full[:tss.Headroom+len(pkt)], len(pkt)); err != nil {
					t.Fatal(err)
				}
			} else {
				pkt = append(full[:0], pkt...)
			}
			d.rx[n].N, d.rx[n].TOS, d.rx[n].Addr, d.rx[n].Truncated = len(pkt), tos, sw, false
		}
		d.ingest(now, d.rx[:n])
		received += n
		d.eng.Advance(now)
		for {
			m := d.fill(now)
			for i := range d.tx[:m] {
				// The datagram the kernel would gather: Buf[:N], then Tail.
				pkt := append(append(dgram[:0], d.tx[i].Payload()...), d.tx[i].Tail...)
				if len(d.tx[i].Tail) > 0 {
					gathered++
				}
				if sealed && wire.Sealed(pkt) {
					var err error
					if pkt, _, err = peerOpener.OpenInPlace(pkt); err != nil {
						t.Fatal(err)
					}
				}
				peer.Receive(now, pkt, d.tx[i].TOS)
			}
			sent += m
			if m < len(d.tx) {
				break
			}
		}
		peer.Advance(now)
		now += time.Microsecond
	}
	var done int
	post := func() {
		if err := peer.PostRecv(nic.RecvReq{Key: nic.FlowKey{Peer: 1, ID: 1}, Region: regions[1], Length: msg}); err != nil {
			t.Fatal(err)
		}
		if err := d.eng.PostSend(now, nic.SendReq{Key: nic.FlowKey{Peer: 2, ID: 1}, Region: regions[0], Length: msg}); err != nil {
			t.Fatal(err)
		}
	}
	work := func() {
		round()
		if n := len(d.eng.Completions()); n > 0 {
			done += n
			post()
		}
		peer.Completions()
	}
	post()
	for range 500 { // the handshake, then the transfer at its steady size
		work()
	}
	before := sent + received
	allocs := testing.AllocsPerRun(1000, work)
	if moved := sent + received - before; moved < 2000 || done < 2 {
		t.Fatalf("%d packets moved in 1000 rounds, %d messages done: the transfer does not run", moved, done)
	}
	t.Logf("%d packets moved in 1000 rounds, %d messages done, %v allocations per round", sent+received-before, done, allocs)
	if d.stats.Truncated != 0 || d.stats.ForeignSource != 0 || d.stats.SealErrors != 0 || d.stats.RefusedReplayed != 0 ||
		d.stats.RefusedHeaderTag != 0 || d.stats.RefusedPayloadTag != 0 || d.stats.RefusedMalformedSeal != 0 {
		t.Fatalf("datagrams refused before the engine: %+v", d.stats)
	}
	if !sealed && gathered < 1000 {
		t.Fatalf("%d data packets left with their payload as a Tail: fill copied them", gathered)
	}
	if sealed && (d.stats.Sealed < 1000 || d.stats.Opened < 1000) {
		t.Fatalf("sealed %d and opened %d packets: the sublayer did not run", d.stats.Sealed, d.stats.Opened)
	}
	if race.Enabled {
		t.Skipf("the race detector allocates on its own (%v allocations per round here): this gate holds without -race", allocs)
	}
	if allocs != 0 {
		t.Errorf("%v allocations per round, want 0", allocs)
	}
}
