package udpio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// sent is one datagram a test sends: its size and TOS byte. Its payload is
// a pattern of its index, so a datagram cut or merged in the wrong place
// reads as another.
type sent struct {
	size int
	tos  byte
}

// fill makes msgs for ds addressed to dst, datagram i filled with bytes
// derived from i (its first four bytes: i itself).
func fill(ds []sent, dst netip.AddrPort) []Msg {
	msgs := make([]Msg, len(ds))
	for i, d := range ds {
		buf := make([]byte, d.size)
		for j := range buf {
			buf[j] = byte(i*7 + j)
		}
		if d.size >= 4 {
			binary.BigEndian.PutUint32(buf, uint32(i))
		}
		msgs[i] = Msg{Buf: buf, N: d.size, Addr: dst, TOS: d.tos}
	}
	return msgs
}

// expectExact fails unless got holds exactly the datagrams of want, in
// order, each with its size, bytes, TOS and source.
func expectExact(t *testing.T, got, want []Msg, from netip.AddrPort) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("received %d datagrams, sent %d", len(got), len(want))
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.N != w.N || string(g.Payload()) != string(w.Payload()) || g.TOS != w.TOS || g.Addr != from || g.Truncated {
			t.Fatalf("datagram %d: %d bytes (first %x), TOS %#x, from %v, truncated %v; sent %d bytes (first %x), TOS %#x, from %v",
				i, g.N, head(g.Payload()), g.TOS, g.Addr, g.Truncated, w.N, head(w.Payload()), w.TOS, from)
		}
	}
}

func head(b []byte) []byte { return b[:min(len(b), 8)] }

// readAll reads want datagrams through msgs of bufSize bytes, per read at
// most per of them, and returns copies.
func readAll(t *testing.T, c *Conn, want, per, bufSize int) []Msg {
	t.Helper()
	msgs := makeMsgs(per, bufSize)
	var got []Msg
	deadline := time.Now().Add(guard)
	for len(got) < want {
		n, err := c.ReadBatchUntil(msgs, deadline)
		if err != nil {
			t.Fatalf("read after %d of %d datagrams: %v", len(got), want, err)
		}
		if n == 0 {
			t.Fatalf("only %d of %d datagrams arrived", len(got), want)
		}
		for _, m := range msgs[:n] {
			cp := m
			cp.Buf = append([]byte(nil), m.Payload()...)
			got = append(got, cp)
		}
	}
	return got
}

// offloadPair is a sender and a receiver on loopback with Offload on; it
// fails (rather than skips) where this kernel refuses either direction:
// every kernel the project runs on has both (Linux 5.0 and later).
func offloadPair(t *testing.T, txOpts, rxOpts Options) (tx, rx *Conn) {
	t.Helper()
	rx = listen(t, "127.0.0.1:0", rxOpts)
	tx = listen(t, "127.0.0.2:0", txOpts)
	if _, gro := rx.Offload(); rxOpts.Offload && rxOpts.testGROOpt == 0 && !gro {
		t.Fatal("UDP_GRO refused on loopback")
	}
	return tx, rx
}

// A batch with TOS bytes and sizes mixed is sent as segmented runs and
// received coalesced, and the receiver hands back exactly the datagrams
// sent: sizes, bytes, order, and the TOS byte of each.
func TestOffloadSplitsCoalescedReceivesIntoTheDatagramsSent(t *testing.T) {
	tx, rx := offloadPair(t, Options{Offload: true}, Options{Offload: true})
	ect0, ce, ack := MakeTOS(10, ECT0), MakeTOS(10, CE), MakeTOS(46, NotECT)
	var ds []sent
	for range 10 {
		ds = append(ds, sent{1200, ect0})
	}
	ds = append(ds, sent{1200, ce}, sent{1200, ce}) // marked by a switch
	for range 5 {
		ds = append(ds, sent{1200, ect0})
	}
	ds = append(ds, sent{300, ect0}) // a short last segment ends the run
	ds = append(ds, sent{64, ack}, sent{64, ack}, sent{64, ack}, sent{0, ack}, sent{64, ack})
	ds = append(ds, sent{1200, ect0}, sent{1300, ect0}, sent{1300, ect0}) // a longer one starts a new run
	out := fill(ds, rx.LocalAddr())
	writeAllMsgs(t, tx, out)
	got := readAll(t, rx, len(out), DefaultBatchSize, 2048)
	expectExact(t, got, out, tx.LocalAddr())
	if rx.rg.coalesced == 0 {
		t.Fatal("no receive was coalesced: the test did not exercise GRO")
	}
	if gso, gro := tx.Offload(); !gso || !gro {
		t.Fatalf("Offload() = %v, %v after the sends; want both on", gso, gro)
	}
}

// The runs a batch is cut into: one per destination, TOS and size, the
// last of a run possibly shorter, at most 64 datagrams and 65,507 bytes.
func TestOffloadGroupsRunsWithinTheKernelsLimits(t *testing.T) {
	a := netip.MustParseAddrPort("127.0.0.1:9")
	b := netip.MustParseAddrPort("127.0.0.3:9")
	many := func(n, size int, tos byte, to netip.AddrPort) []sent {
		_ = to
		ds := make([]sent, n)
		for i := range ds {
			ds[i] = sent{size, tos}
		}
		return ds
	}
	type grouping struct {
		name  string
		msgs  []Msg
		limit int
		want  []int
	}
	cases := []grouping{
		{"64 segments at most", fill(many(150, 100, 0, a), a), 0, []int{64, 64, 22}},
		{"64 KiB at most", fill(many(20, 4096, 0, a), a), 0, []int{15, 5}},
		{"65,507 bytes fit", fill(append(many(15, 4096, 0, a), sent{4067, 0}), a), 0, []int{16}},
		{"one byte more does not", fill(append(many(15, 4096, 0, a), sent{4068, 0}), a), 0, []int{15, 1}},
		{"TOS", fill([]sent{{100, 1}, {100, 1}, {100, 2}, {100, 2}}, a), 0, []int{2, 2}},
		{"shorter ends a run", fill([]sent{{100, 0}, {50, 0}, {50, 0}, {50, 0}}, a), 0, []int{2, 2}},
		{"longer starts one", fill([]sent{{50, 0}, {100, 0}, {100, 0}}, a), 0, []int{1, 2}},
		{"empty datagrams alone", fill([]sent{{0, 0}, {0, 0}, {10, 0}, {0, 0}}, a), 0, []int{1, 1, 1, 1}},
		// A segment limit (the path MTU refused a size): datagrams of the
		// limit or longer go alone, shorter runs stay segmented, and the
		// last of a run may still be shorter than the limit.
		{"at the limit alone", fill(append(many(3, 100, 0, a), many(3, 50, 0, a)...), a), 100, []int{1, 1, 1, 3}},
		{"over the limit alone", fill(many(3, 101, 0, a), a), 100, []int{1, 1, 1}},
		{"under the limit segmented", fill(append(many(3, 99, 0, a), sent{10, 0}), a), 100, []int{4}},
	}
	mixed := fill(many(4, 100, 0, a), a)
	mixed[2].Addr = b
	cases = append(cases, grouping{"destination", mixed, 0, []int{2, 1, 1}})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bt := newBatch(len(tc.msgs), tosCmsgSpace+segCmsgSpace)
			hdrs, packed, err := bt.prepareSendSegmented(tc.msgs, tc.limit)
			if err != nil || packed != len(tc.msgs) {
				t.Fatalf("prepareSendSegmented = %d, %d, %v", hdrs, packed, err)
			}
			if fmt.Sprint(bt.segs[:hdrs]) != fmt.Sprint(tc.want) {
				t.Fatalf("runs %v, want %v", bt.segs[:hdrs], tc.want)
			}
		})
	}
}

// The limits hold against the kernel: a batch at and over them goes
// through, every datagram exact.
func TestOffloadSendsAtTheKernelsLimits(t *testing.T) {
	tx, rx := offloadPair(t, Options{Offload: true, BatchSize: 256}, Options{Offload: true, BatchSize: 256, RecvBuffer: 16 << 20})
	var ds []sent
	for range 150 {
		ds = append(ds, sent{100, ECT0})
	}
	for range 20 {
		ds = append(ds, sent{4096, ECT0})
	}
	for range 15 {
		ds = append(ds, sent{4096, ECT1})
	}
	ds = append(ds, sent{4067, ECT1})
	out := fill(ds, rx.LocalAddr())
	writeAllMsgs(t, tx, out)
	got := readAll(t, rx, len(out), 7, 4096) // fewer Msgs per read than a coalesced buffer holds
	expectExact(t, got, out, tx.LocalAddr())
	if gso, _ := tx.Offload(); !gso {
		t.Fatalf("GSO turned off: %v", tx.OffloadFailure())
	}
}

// Either end may run without offload: a plain receiver gets the
// sender's segmented runs cut by the kernel, and a coalescing receiver
// gets plain datagrams one by one, all exact.
func TestOffloadInteroperatesWithPlainConns(t *testing.T) {
	ds := []sent{{1000, ECT0}, {1000, ECT0}, {1000, CE}, {1000, ECT0}, {10, ECT0}}
	for _, tc := range []struct {
		name   string
		tx, rx Options
	}{
		{"segmented to plain", Options{Offload: true}, Options{}},
		{"plain to coalescing", Options{}, Options{Offload: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tx, rx := offloadPair(t, tc.tx, tc.rx)
			out := fill(ds, rx.LocalAddr())
			writeAllMsgs(t, tx, out)
			expectExact(t, readAll(t, rx, len(out), DefaultBatchSize, 2048), out, tx.LocalAddr())
		})
	}
}

// A kernel or device without GSO fails the first segmented send: the Conn
// turns GSO off and sends the same datagrams again, one each, and says
// why.
func TestOffloadFallsBackWhenTheKernelRefusesGSO(t *testing.T) {
	for _, errno := range []unix.Errno{unix.EIO, unix.ENOPROTOOPT, unix.EINVAL} {
		t.Run(errno.Error(), func(t *testing.T) {
			tx, rx := offloadPair(t, Options{Offload: true, testGSOErrno: errno}, Options{Offload: true})
			var ds []sent
			for i := range 40 {
				ds = append(ds, sent{900, byte(i / 10)})
			}
			out := fill(ds, rx.LocalAddr())
			writeAllMsgs(t, tx, out)
			expectExact(t, readAll(t, rx, len(out), DefaultBatchSize, 2048), out, tx.LocalAddr())
			if gso, _ := tx.Offload(); gso || !errors.Is(tx.OffloadFailure(), errno) {
				t.Fatalf("after the refusal: GSO %v, failure %v; want off, %v", gso, tx.OffloadFailure(), errno)
			}
			// Later batches go out plain from the start.
			writeAllMsgs(t, tx, out)
			expectExact(t, readAll(t, rx, len(out), DefaultBatchSize, 2048), out, tx.LocalAddr())
		})
	}
}

// A segmented send whose segments exceed the path MTU fails with
// EMSGSIZE (the test hook stands for it here; TestOffloadOverAVeth... for
// the kernel): the Conn sends those datagrams again one each, keeps GSO
// on for shorter ones, and remembers the size.
func TestOffloadSendsOverMTUSegmentsOneEach(t *testing.T) {
	tx, rx := offloadPair(t, Options{Offload: true, testGSOErrno: unix.EMSGSIZE}, Options{Offload: true})
	var ds []sent
	for range 10 {
		ds = append(ds, sent{1400, ECT0})
	}
	for range 10 {
		ds = append(ds, sent{1000, ECT0})
	}
	out := fill(ds, rx.LocalAddr())
	writeAllMsgs(t, tx, out)
	expectExact(t, readAll(t, rx, len(out), DefaultBatchSize, 2048), out, tx.LocalAddr())
	if gso, _ := tx.Offload(); !gso || tx.OffloadFailure() != nil {
		t.Fatalf("after EMSGSIZE: GSO %v, failure %v; want on, none", gso, tx.OffloadFailure())
	}
	if l := tx.SegmentLimit(); l != 1400 {
		t.Fatalf("SegmentLimit() = %d, want 1400", l)
	}
	if rx.rg.coalesced == 0 {
		t.Fatal("no receive was coalesced: the 1000-byte run was not segmented")
	}
	writeAllMsgs(t, tx, out)
	expectExact(t, readAll(t, rx, len(out), DefaultBatchSize, 2048), out, tx.LocalAddr())
}

// Another error of a segmented send is the caller's, as without offload,
// and leaves GSO on.
func TestOffloadKeepsGSOOnOtherErrors(t *testing.T) {
	tx, rx := offloadPair(t, Options{Offload: true, testGSOErrno: unix.EPERM}, Options{})
	out := fill([]sent{{100, 0}, {100, 0}}, rx.LocalAddr())
	n, err := tx.WriteBatch(out)
	if n != 0 || !errors.Is(err, unix.EPERM) {
		t.Fatalf("WriteBatch = %d, %v; want 0, EPERM", n, err)
	}
	if gso, _ := tx.Offload(); !gso {
		t.Fatal("GSO turned off by an error that is not about it")
	}
}

// A kernel without UDP_GRO refuses the option (ENOPROTOOPT, as an
// unknown option number here): the Conn receives as without offload,
// every datagram exact, and keeps no memory for coalesced buffers.
func TestOffloadFallsBackWhenTheKernelRefusesGRO(t *testing.T) {
	tx, rx := offloadPair(t, Options{Offload: true}, Options{Offload: true, testGROOpt: 9999})
	if _, gro := rx.Offload(); gro || rx.rg != nil {
		t.Fatalf("GRO on (%v) or its buffers kept (%v) after the kernel refused it", gro, rx.rg != nil)
	}
	ds := []sent{{1000, ECT0}, {1000, ECT0}, {1000, ECT0}, {500, ECT0}, {1000, CE}}
	out := fill(ds, rx.LocalAddr())
	writeAllMsgs(t, tx, out)
	expectExact(t, readAll(t, rx, len(out), DefaultBatchSize, 2048), out, tx.LocalAddr())
}

// A datagram longer than the Msg it is split into is cut and flagged, as
// without offload, and the next datagram of the buffer is whole.
func TestOffloadTruncatesPerDatagram(t *testing.T) {
	tx, rx := offloadPair(t, Options{Offload: true}, Options{Offload: true})
	out := fill([]sent{{1000, 0}, {1000, 0}, {600, 0}}, rx.LocalAddr())
	writeAllMsgs(t, tx, out)
	got := readAll(t, rx, 3, DefaultBatchSize, 800)
	for i, want := range []struct {
		n     int
		trunc bool
	}{{800, true}, {800, true}, {600, false}} {
		if got[i].N != want.n || got[i].Truncated != want.trunc || string(got[i].Payload()) != string(out[i].Buf[:want.n]) {
			t.Fatalf("datagram %d: %d bytes, truncated %v; want %d, %v", i, got[i].N, got[i].Truncated, want.n, want.trunc)
		}
	}
}

// Offload adds no allocation per packet on either side.
func TestOffloadBatchesDoNotAllocate(t *testing.T) {
	tx, rx := offloadPair(t, Options{Offload: true}, Options{Offload: true})
	const batch = 40
	out := makeMsgs(batch, 4096)
	numbered(out, 4096, rx.LocalAddr())
	in := makeMsgs(batch, 4096)
	deadline := time.Now().Add(guard)
	round := func() {
		if n, err := tx.WriteBatch(out); n != batch || err != nil {
			t.Fatalf("WriteBatch = %d, %v", n, err)
		}
		for got := 0; got < batch; {
			n, err := rx.ReadBatchUntil(in, deadline)
			if err != nil || n == 0 {
				t.Fatalf("ReadBatchUntil = %d, %v after %d of %d datagrams", n, err, got, batch)
			}
			got += n
		}
	}
	round()
	if allocs := testing.AllocsPerRun(50, round); allocs != 0 {
		t.Fatalf("one write+read round of %d datagrams allocates %v times, want 0", batch, allocs)
	}
	if rx.rg.coalesced == 0 {
		t.Fatal("no receive was coalesced")
	}
}

// With ReceiveViews the datagrams of a coalesced receive are handed out
// where they lie: exactly the datagrams sent, none copied into the Msgs'
// own buffers (which stay as they were, and are too short to hold them),
// each view ending with its datagram.
func TestOffloadReceiveViewsAreTheDatagramsUncopied(t *testing.T) {
	tx, rx := offloadPair(t, Options{Offload: true}, Options{Offload: true, ReceiveViews: true})
	ect0, ce := MakeTOS(10, ECT0), MakeTOS(10, CE)
	var ds []sent
	for range 12 {
		ds = append(ds, sent{1200, ect0})
	}
	ds = append(ds, sent{1200, ce}, sent{700, ect0}, sent{64, ect0}, sent{64, ect0})
	out := fill(ds, rx.LocalAddr())
	writeAllMsgs(t, tx, out)
	const bufSize = 16 // shorter than every datagram but the empty
	msgs := makeMsgs(5, bufSize)
	own := make([][]byte, len(msgs))
	for i := range msgs {
		for j := range msgs[i].Buf {
			msgs[i].Buf[j] = 0xEE
		}
		own[i] = msgs[i].Buf
	}
	var got []Msg
	deadline := time.Now().Add(guard)
	for len(got) < len(out) {
		n, err := rx.ReadBatchUntil(msgs, deadline)
		if err != nil || n == 0 {
			t.Fatalf("read after %d of %d datagrams: %d, %v", len(got), len(out), n, err)
		}
		for _, m := range msgs[:n] {
			if cap(m.Buf) != m.N {
				t.Fatalf("datagram %d: a view of %d bytes with capacity %d: a write through it reaches the next", len(got), m.N, cap(m.Buf))
			}
			cp := m
			cp.Buf = append([]byte(nil), m.Payload()...)
			got = append(got, cp)
		}
	}
	expectExact(t, got, out, tx.LocalAddr())
	if rx.rg.coalesced == 0 {
		t.Fatal("no receive was coalesced: the test did not exercise GRO")
	}
	for i, b := range own {
		for _, c := range b {
			if c != 0xEE {
				t.Fatalf("Msg %d's own buffer was written: %x", i, b)
			}
		}
	}
}
