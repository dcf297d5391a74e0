package udpio

import (
	"testing"
	"time"
)

// splitTails moves the last tail bytes of every datagram of msgs out of
// its Buf into a Tail of its own, so each leaves as a gather write of two
// pieces: the same datagrams, in other memory.
func splitTails(msgs []Msg, tail int) []Msg {
	out := make([]Msg, len(msgs))
	for i, m := range msgs {
		out[i] = m
		if cut := m.N - tail; cut > 0 {
			out[i].N = cut
			out[i].Tail = append([]byte(nil), m.Buf[cut:m.N]...)
			out[i].Buf = append([]byte(nil), m.Buf[:cut]...) // no bytes shared with the original
		}
	}
	return out
}

// A datagram written as Buf[:N] then Tail arrives as one datagram, its
// bytes in order, with and without segmentation offload: runs of gathered
// datagrams of one size still leave as one segmented send.
func TestWriteBatchGathersTheTail(t *testing.T) {
	for _, offload := range []bool{false, true} {
		tx, rx := offloadPair(t, Options{Offload: offload}, Options{Offload: offload})
		var ds []sent
		for range 20 {
			ds = append(ds, sent{4136, MakeTOS(0, ECT0)})
		}
		ds = append(ds, sent{40, MakeTOS(46, NotECT)}, sent{1000, MakeTOS(0, ECT0)}) // an ACK, a short last segment
		want := fill(ds, rx.LocalAddr())
		writeAllMsgs(t, tx, splitTails(want, 4096))
		got := readAll(t, rx, len(want), DefaultBatchSize, 9000)
		expectExact(t, got, want, tx.LocalAddr())
		if offload && rx.rg.coalesced == 0 {
			t.Fatal("offload: no receive was coalesced: the gathered run was not one segmented send")
		}
	}
}

// Gathered writes allocate nothing, with offload as without.
func TestGatherWritesDoNotAllocate(t *testing.T) {
	for _, offload := range []bool{false, true} {
		tx, rx := offloadPair(t, Options{Offload: offload}, Options{Offload: offload})
		const batch = 40
		full := makeMsgs(batch, 4136)
		numbered(full, 4136, rx.LocalAddr())
		out := splitTails(full, 4096)
		in := makeMsgs(batch, 9000)
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
				for _, m := range in[:n] {
					if m.N != 4136 || m.Tail != nil {
						t.Fatalf("received %d bytes, tail %d", m.N, len(m.Tail))
					}
				}
				got += n
			}
		}
		round()
		if allocs := testing.AllocsPerRun(50, round); allocs != 0 {
			t.Fatalf("offload %v: one gathered write+read round of %d datagrams allocates %v times, want 0", offload, batch, allocs)
		}
	}
}
