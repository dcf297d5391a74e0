package forgivedrv

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/tss"
	"github.com/forgive-emu/forgive/udpio"
	"github.com/forgive-emu/forgive/wire"
)

// BenchmarkReceivePath is the CPU the loop's receive path (ingest: the
// neighbour check, the security sublayer, the engine) spends on a
// datagram it accepts and on one it refuses, for every reason it refuses
// one, in one run: each sub-benchmark ingests batches of 32 datagrams as
// the socket would hand them over, and its ns/op is per datagram (the
// timer runs during ingest only; making the datagrams, the socket's
// copy, and for "accepted" the peer's side of the transfer, are outside
// it). The datagrams carry 4 KiB payloads (the default MTU) where the
// type has one. A sub-benchmark fails unless every datagram it times was
// accepted, or refused for its reason, by the counter that names it.
//
//	go test -run '^$' -bench BenchmarkReceivePath -benchtime 2000x ./forgivedrv
func BenchmarkReceivePath(b *testing.B) {
	for _, c := range receiveCases {
		b.Run(c.name, func(b *testing.B) {
			rb := newRecvBench(b, c.sealed)
			rb.benchmark(b, c)
		})
	}
}

// A receiveCase is one kind of datagram: batch fills rb.d.rx with a batch
// of it (the timer is stopped); counted reads the counter each datagram
// must add one to.
type receiveCase struct {
	name    string
	sealed  bool // the daemon holds a key
	batch   func(rb *recvBench) int
	counted func(rb *recvBench) uint64
}

const recvBatch = 32

var receiveCases = []receiveCase{
	{"accepted/sealed", true, nil, nil},
	{"accepted/plain", false, nil, nil},
	// Refused before the sublayer: the datagram did not come from the
	// switch port the host is cabled to.
	{"foreign_source/sealed", true, func(rb *recvBench) int {
		return rb.fill(rb.foreign, func(int) []byte { return rb.sealedData })
	}, func(rb *recvBench) uint64 { return rb.d.stats.ForeignSource }},
	{"foreign_source/plain", false, func(rb *recvBench) int {
		return rb.fill(rb.foreign, func(int) []byte { return rb.plainData })
	}, func(rb *recvBench) uint64 { return rb.d.stats.ForeignSource }},
	// Refused by the sublayer, cheapest first.
	{"unsealed", true, func(rb *recvBench) int {
		return rb.fill(rb.sw, func(int) []byte { return rb.plainData })
	}, func(rb *recvBench) uint64 { return rb.d.stats.RefusedUnsealed }},
	{"malformed_seal", true, func(rb *recvBench) int {
		return rb.fill(rb.sw, func(int) []byte { return rb.sealedData[:wire.DataLen+5] })
	}, func(rb *recvBench) uint64 { return rb.d.stats.RefusedMalformedSeal }},
	{"unknown_domain", true, func(rb *recvBench) int {
		return rb.fill(rb.sw, func(int) []byte { return rb.otherDomain })
	}, func(rb *recvBench) uint64 { return rb.d.stats.RefusedUnknownDomain }},
	{"replayed", true, func(rb *recvBench) int {
		return rb.fill(rb.sw, func(int) []byte { return rb.opened })
	}, func(rb *recvBench) uint64 { return rb.d.stats.RefusedReplayed }},
	// A forged header (a PSN changed) under the sender's current start.
	{"header_tag", true, func(rb *recvBench) int {
		return rb.fill(rb.sw, func(int) []byte { return rb.badHeader })
	}, func(rb *recvBench) uint64 { return rb.d.stats.RefusedHeaderTag }},
	// A forgery naming a new start of the sender on every datagram: a
	// header subkey derived for each, then its header tag refused (with
	// the flow's tags or without: they are checked after opening).
	{"header_tag/new_start_every_packet", true, func(rb *recvBench) int {
		return rb.fill(rb.sw, func(int) []byte { return rb.newStart(rb.forgedFrom) })
	}, func(rb *recvBench) uint64 { return rb.d.stats.RefusedHeaderTag }},
	// The same with the tags, cycling through four starts: their header
	// subkeys cached.
	{"header_tag/four_new_starts", true, func(rb *recvBench) int {
		return rb.fill(rb.sw, func(i int) []byte { return rb.fourStarts[i%4] })
	}, func(rb *recvBench) uint64 { return rb.d.stats.RefusedHeaderTag }},
	// A key holder of domain 1 sealing as host 3, which is in domain 2.
	{"wrong_domain", true, func(rb *recvBench) int {
		return rb.fill(rb.sw, func(int) []byte { return rb.wrongDomain })
	}, func(rb *recvBench) uint64 { return rb.d.stats.RefusedWrongDomain }},
	// A payload changed: the header authenticates, the 4 KiB payload is
	// decrypted and its tag refused.
	{"payload_tag", true, func(rb *recvBench) int {
		return rb.fill(rb.sw, func(int) []byte { return rb.badPayload })
	}, func(rb *recvBench) uint64 { return rb.d.stats.RefusedPayloadTag }},
	// Refused by the engine: sealed by the peer (so opened, payload and
	// all) but with a destination tag that is not the flow's, or for a
	// flow the host does not have; plain, a blind guess of the tag.
	{"wrong_tag/sealed", true, func(rb *recvBench) int {
		return rb.fill(rb.sw, func(int) []byte { return rb.seal(rb.wrongTag) })
	}, func(rb *recvBench) uint64 { return rb.d.eng.Stats().WrongTag }},
	{"wrong_tag/plain", false, func(rb *recvBench) int {
		return rb.fill(rb.sw, func(int) []byte { return rb.wrongTag })
	}, func(rb *recvBench) uint64 { return rb.d.eng.Stats().WrongTag }},
	{"unknown_flow/sealed", true, func(rb *recvBench) int {
		return rb.fill(rb.sw, func(int) []byte { return rb.seal(rb.unknownFlow) })
	}, func(rb *recvBench) uint64 { return rb.d.eng.Stats().UnknownFlow }},
	{"unknown_flow/plain", false, func(rb *recvBench) int {
		return rb.fill(rb.sw, func(int) []byte { return rb.unknownFlow })
	}, func(rb *recvBench) uint64 { return rb.d.eng.Stats().UnknownFlow }},
}

// recvBench is a daemon (host 1) with a live flow to a peer engine (host
// 2) cabled straight to its batches, as in TestLoopAllocatesNothingPerPacket,
// and the datagrams the cases send it.
type recvBench struct {
	tb          testing.TB
	b           *testing.B    // timing ingest, when set (its own timer stopped)
	wall, cpu   time.Duration // timed ingest's wall time, and its thread's CPU time
	wallCost    time.Duration // what the clocks add to each interval
	cpuCost     time.Duration
	d           *Daemon
	peer        *nic.Engine
	peerSealer  *tss.Sealer
	peerOpener  *tss.Opener
	regions     [2]nic.RegionID
	now         time.Duration
	sw, foreign netip.AddrPort
	dgram       []byte
	received    int // datagrams ingested by rounds
	full        int // of them, DATA with 4 KiB of payload
	fullBefore  int
	done        int // messages received

	plainData, sealedData, opened      []byte
	otherDomain, badHeader, badPayload []byte
	wrongDomain, wrongTag, unknownFlow []byte
	fourStarts                         [4][]byte
	starts                             uint64
	forgedFrom                         []byte // a sealed DATA whose prefix newStart rewrites
}

const recvMsg = 1 << 20

func newRecvBench(tb testing.TB, sealed bool) *recvBench {
	tb.Helper()
	rb := &recvBench{tb: tb, sw: netip.MustParseAddrPort("127.0.0.1:4793"),
		foreign: netip.MustParseAddrPort("127.0.0.1:4794")}
	engines := [2]*nic.Engine{}
	for i, h := range []uint16{1, 2} {
		cfg := nic.DefaultConfig(h, 1e12) // pacing is not what this measures
		cfg.DCQCN.LineRate = 0
		e, err := nic.New(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		if err := e.CreateFlow(0, nic.FlowSpec{Peer: 3 - h, ID: 1, Class: nic.ClassGradient}); err != nil {
			tb.Fatal(err)
		}
		if rb.regions[i], err = e.RegisterMemory(make([]byte, recvMsg)); err != nil {
			tb.Fatal(err)
		}
		engines[i] = e
	}
	bufSize := wire.DataLen + nic.DefaultConfig(1, 1e9).MTU
	rb.d = &Daemon{eng: engines[0], sw: rb.sw, log: zap.NewNop(),
		rx: make([]udpio.Msg, recvBatch), tx: make([]udpio.Msg, recvBatch)}
	for i := range rb.d.rx {
		rb.d.rx[i].Buf = make([]byte, bufSize+wire.SealOverhead+1)
		rb.d.tx[i].Buf = make([]byte, bufSize+wire.SealOverhead)
	}
	rb.dgram = make([]byte, 0, bufSize+wire.SealOverhead)
	rb.peer = engines[1]
	key1, key2 := tss.Key{1, 2, 3}, tss.Key{4, 5, 6}
	if sealed {
		ring, err := tss.NewKeyring(tss.Domain{ID: 1, Key: key1, Hosts: []uint16{1, 2}},
			tss.Domain{ID: 2, Key: key2, Hosts: []uint16{3}})
		if err != nil {
			tb.Fatal(err)
		}
		if rb.d.sealer, err = tss.NewSealer(ring, rand.Reader, 1); err != nil {
			tb.Fatal(err)
		}
		if rb.peerSealer, err = tss.NewSealer(ring, rand.Reader, 2); err != nil {
			tb.Fatal(err)
		}
		rb.d.opener, rb.peerOpener = tss.NewOpener(ring), tss.NewOpener(ring)
	}
	rb.post()
	// The handshake, then the transfer at its steady size; a full DATA
	// packet of the peer's is kept as the template of the forgeries.
	for range 500 {
		rb.work()
	}
	if rb.plainData == nil || rb.done < 2 {
		tb.Fatalf("no full DATA packet in 500 rounds, %d messages done: the transfer does not run", rb.done)
	}
	rb.forgeries(key1, key2)
	return rb
}

// post posts a receive at the daemon and the send at the peer: the
// daemon's ingest takes the DATA.
func (rb *recvBench) post() {
	if err := rb.d.eng.PostRecv(nic.RecvReq{Key: nic.FlowKey{Peer: 2, ID: 1}, Region: rb.regions[0], Length: recvMsg}); err != nil {
		rb.tb.Fatal(err)
	}
	if err := rb.peer.PostSend(rb.now, nic.SendReq{Key: nic.FlowKey{Peer: 1, ID: 1}, Region: rb.regions[1], Length: recvMsg}); err != nil {
		rb.tb.Fatal(err)
	}
}

// work runs one round of the transfer, ingest timed if rb.b is set, and
// posts the next message when one completes.
func (rb *recvBench) work() {
	rb.round()
	if n := len(rb.d.eng.Completions()); n > 0 {
		rb.done += n
		rb.post()
	}
	rb.peer.Completions()
}

// round moves one batch each way at now: the peer's packets through
// ingest, the daemon's to the peer, then advances time.
func (rb *recvBench) round() {
	d, peer := rb.d, rb.peer
	n := 0
	for ; n < len(d.rx); n++ {
		full := d.rx[n].Buf[:cap(d.rx[n].Buf)]
		buf := full
		if rb.peerSealer != nil {
			buf = full[tss.Headroom:]
		}
		pkt, tos, ok := peer.Transmit(rb.now, buf)
		if !ok {
			break
		}
		full4K := wire.Header(pkt).Type() == wire.TypeData && len(pkt) == wire.DataLen+4096
		if rb.plainData == nil && full4K {
			rb.plainData = bytes.Clone(pkt)
		}
		if full4K {
			rb.full++
		}
		if rb.peerSealer != nil && wire.Header(pkt).Type() != wire.TypePause {
			var err error
			if pkt, err = rb.peerSealer.SealInPlace(full[:tss.Headroom+len(pkt)], len(pkt)); err != nil {
				rb.tb.Fatal(err)
			}
		} else if rb.peerSealer != nil {
			pkt = append(full[:0], pkt...)
		}
		d.rx[n].N, d.rx[n].TOS, d.rx[n].Addr, d.rx[n].Truncated = len(pkt), tos, rb.sw, false
	}
	rb.timed(func() { d.ingest(rb.now, d.rx[:n]) })
	rb.received += n
	d.eng.Advance(rb.now)
	for {
		m := d.fill(rb.now)
		for i := range d.tx[:m] {
			pkt := append(append(rb.dgram[:0], d.tx[i].Payload()...), d.tx[i].Tail...)
			if rb.peerOpener != nil && wire.Sealed(pkt) {
				var err error
				if pkt, _, err = rb.peerOpener.OpenInPlace(pkt); err != nil {
					rb.tb.Fatal(err)
				}
			}
			peer.Receive(rb.now, pkt, d.tx[i].TOS)
		}
		if m < len(d.tx) {
			break
		}
	}
	peer.Advance(rb.now)
	rb.now += time.Microsecond
}

// forgeries makes the datagrams of the refusal cases from the peer's
// DATA template.
func (rb *recvBench) forgeries(key1, key2 tss.Key) {
	tb := rb.tb
	p := rb.plainData
	tags, _ := wire.Header(p).Tags()
	rb.wrongTag = bytes.Clone(p)
	binary.BigEndian.PutUint32(rb.wrongTag[12:], tags.Dst^0x5A5A) // the destination tag
	rb.unknownFlow = bytes.Clone(p)
	binary.BigEndian.PutUint32(rb.unknownFlow[8:], 99) // the flow id
	rb.badHeader = bytes.Clone(p)
	rb.badHeader[23] ^= 1 // the PSN's low byte
	if wt, _ := wire.Header(rb.wrongTag).Tags(); wt.Dst == tags.Dst || wt.Src != tags.Src {
		tb.Fatal("the DATA header's layout is not the one this benchmark forges (tags)")
	}
	if id, _ := wire.Header(rb.unknownFlow).Flow(); id != 99 {
		tb.Fatal("the DATA header's layout is not the one this benchmark forges (flow)")
	}
	if wire.Data(rb.badHeader).Fields().PSN == wire.Data(p).Fields().PSN {
		tb.Fatal("the DATA header's layout is not the one this benchmark forges (PSN)")
	}
	if rb.peerSealer == nil {
		return
	}
	rb.sealedData = rb.seal(p)
	rb.opened = rb.seal(p)
	if _, _, err := rb.d.opener.Open(nil, rb.opened); err != nil { // opened once: a replay from now on
		tb.Fatal(err)
	}
	// The PSN changed after sealing: the header tag no longer holds.
	sealed := rb.seal(p)
	copy(sealed[:wire.DataLen], rb.badHeader)
	sealed[1] |= wire.FlagSealed
	rb.badHeader = sealed
	rb.badPayload = rb.seal(p)
	rb.badPayload[len(rb.badPayload)-100] ^= 1
	other := func(d tss.Domain, src uint16) []byte {
		ring, err := tss.NewKeyring(d)
		if err != nil {
			tb.Fatal(err)
		}
		s, err := tss.NewSealer(ring, rand.Reader, 3)
		if err != nil {
			tb.Fatal(err)
		}
		q := bytes.Clone(p)
		binary.BigEndian.PutUint16(q[4:], src)
		out, err := s.Seal(nil, q)
		if err != nil {
			tb.Fatal(err)
		}
		return out
	}
	rb.otherDomain = other(tss.Domain{ID: 99, Key: key2}, 2)
	rb.wrongDomain = other(tss.Domain{ID: 1, Key: key1}, 3)
	rb.forgedFrom = rb.seal(p)
	for i := range rb.fourStarts {
		rb.fourStarts[i] = bytes.Clone(rb.newStart(rb.forgedFrom))
	}
}

// seal seals p as the peer's next packet.
func (rb *recvBench) seal(p []byte) []byte {
	out, err := rb.peerSealer.Seal(nil, p)
	if err != nil {
		rb.tb.Fatal(err)
	}
	return out
}

// newStart rewrites from, a sealed DATA of the peer's, to name a start of
// it later than its current one, never named before, and returns it; its
// header tag is the current start's, so it does not authenticate.
func (rb *recvBench) newStart(from []byte) []byte {
	rb.starts++
	nonce := from[wire.DataLen+wire.SealDomainLen:]
	binary.BigEndian.PutUint64(nonce, 1<<40+rb.starts) // the epoch: later than the peer's, 2
	binary.BigEndian.PutUint64(nonce[8:], rb.starts)
	return from
}

// fill writes a batch of datagrams from addr, the i-th pkt(i), as the
// socket would have read them.
func (rb *recvBench) fill(addr netip.AddrPort, pkt func(i int) []byte) int {
	for i := range rb.d.rx {
		m := &rb.d.rx[i]
		p := pkt(i)
		m.N = copy(m.Buf, p)
		m.Addr, m.TOS, m.Truncated = addr, 0, false
	}
	return len(rb.d.rx)
}

// timed runs fn and, if rb.b is set, adds the wall time it took to
// rb.wall and the CPU time its thread spent in it to rb.cpu, less what
// the clocks' own readings add.
func (rb *recvBench) timed(fn func()) {
	if rb.b == nil {
		fn()
		return
	}
	w0, c0 := time.Now(), threadCPU()
	fn()
	c1 := threadCPU()
	rb.wall += time.Since(w0) - rb.wallCost
	rb.cpu += c1 - c0 - rb.cpuCost
}

// threadCPU returns the CPU time of the calling thread.
func threadCPU() time.Duration {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return time.Duration(ts.Nano())
}

// clockCosts are the least wall and CPU time timed measures around
// nothing: what the clocks' readings add to each interval.
func clockCosts() (wall, cpu time.Duration) {
	wall, cpu = 1<<62, 1<<62
	for range 1000 {
		w0, c0 := time.Now(), threadCPU()
		c1 := threadCPU()
		wall, cpu = min(wall, time.Since(w0)), min(cpu, c1-c0)
	}
	return wall, cpu
}

// benchmark reports, per datagram, the wall time ingest took (ns/op)
// and the CPU time its thread spent (cpu-ns/op: on a machine shared with
// other work the wall time also counts the time the thread waited for a
// core; the CPU time does not, nor the garbage collector's work on other
// threads). The benchmark's own timer is stopped throughout: timed
// measures ingest alone.
func (rb *recvBench) benchmark(b *testing.B, c receiveCase) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.StopTimer()
	rb.wall, rb.cpu = 0, 0
	rb.wallCost, rb.cpuCost = clockCosts()
	pkts, err := rb.run(c, b.N, b)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(rb.wall.Nanoseconds())/float64(pkts), "ns/op")
	b.ReportMetric(float64(rb.cpu.Nanoseconds())/float64(pkts), "cpu-ns/op")
	b.ReportMetric(float64(pkts)/float64(b.N), "pkts/batch")
	if c.batch == nil {
		b.ReportMetric(float64(rb.full-rb.fullBefore)/float64(pkts), "full_data/pkt")
	}
}

// run ingests n batches of case c, timing ingest alone if b is not nil,
// and checks that every datagram was accepted or refused as c says.
func (rb *recvBench) run(c receiveCase, n int, b *testing.B) (pkts int, err error) {
	if c.batch == nil { // accepted: the transfer's own datagrams
		st, es := rb.d.stats, rb.d.eng.Stats()
		before := rb.received
		rb.fullBefore = rb.full
		rb.b = b
		for range n {
			rb.work()
		}
		rb.b = nil
		pkts = rb.received - before
		s, e := rb.d.stats, rb.d.eng.Stats()
		refused := s.ForeignSource - st.ForeignSource + s.RefusedHeaderTag - st.RefusedHeaderTag +
			s.RefusedPayloadTag - st.RefusedPayloadTag + s.RefusedReplayed - st.RefusedReplayed +
			s.RefusedUnsealed - st.RefusedUnsealed + s.RefusedMalformedSeal - st.RefusedMalformedSeal +
			s.RefusedUnknownDomain - st.RefusedUnknownDomain + s.RefusedWrongDomain - st.RefusedWrongDomain +
			e.WrongTag - es.WrongTag + e.UnknownFlow - es.UnknownFlow + e.Malformed - es.Malformed +
			e.StaleIncarnation - es.StaleIncarnation + e.Misdelivered - es.Misdelivered
		if refused != 0 || pkts == 0 || rb.full == rb.fullBefore {
			return pkts, fmt.Errorf("%s: %d datagrams ingested (%d full DATA), %d of them refused",
				c.name, pkts, rb.full-rb.fullBefore, refused)
		}
		if c.sealed && int(s.Opened-st.Opened) != pkts {
			return pkts, fmt.Errorf("%s: %d datagrams ingested, %d opened", c.name, pkts, s.Opened-st.Opened)
		}
		return pkts, nil
	}
	before := c.counted(rb)
	rb.b = b
	defer func() { rb.b = nil }()
	for range n {
		m := c.batch(rb)
		rb.timed(func() { rb.d.ingest(rb.now, rb.d.rx[:m]) })
		pkts += m
	}
	if got := c.counted(rb) - before; got != uint64(pkts) {
		return pkts, fmt.Errorf("%s: %d datagrams ingested, %d counted as refused for the reason", c.name, pkts, got)
	}
	return pkts, nil
}

// Every case of BenchmarkReceivePath does what its name says: a few
// batches of each are accepted, or refused for its reason, to the last
// datagram.
func TestReceivePathCases(t *testing.T) {
	for _, c := range receiveCases {
		rb := newRecvBench(t, c.sealed)
		if _, err := rb.run(c, 3, nil); err != nil {
			t.Error(err)
		}
	}
}
