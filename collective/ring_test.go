package collective

import (
	"slices"
	"testing"
)

// TestFlatRingIsTodaysRing checks the flat ring against the workload's
// ring, written out: rank i, round r of n-1, GradientBytes a multiple of
// 4n cut into n equal chunks.
//
//	reduce-scatter: send chunk (i-r) mod n to i+1, receive chunk (i-r-1) from i-1 and add it
//	all-gather:     send chunk (i+1-r) to i+1, receive chunk (i-r) and keep it;
//	                round 0 gather-owner, later rounds gather; rounds >= 1 forward
//	                the previous all-gather receive; the copy of a chunk waits
//	                for the reduce-scatter send of the same chunk
func TestFlatRingIsTodaysRing(t *testing.T) {
	for _, n := range []int{2, 3, 4, 8, 13, 64} {
		chunk := 4 * 3
		sc, err := Compile(Spec{Ranks: n, Bytes: n * chunk, Algorithms: []Algorithm{Ring}})
		if err != nil {
			t.Fatal(err)
		}
		md := func(x int) int { return ((x % n) + n) % n }
		for i, p := range sc.Plans {
			if len(p.Sends) != 2*(n-1) || len(p.Recvs) != 2*(n-1) {
				t.Fatalf("n %d rank %d: %d sends, %d receives, want %d each", n, i, len(p.Sends), len(p.Recvs), 2*(n-1))
			}
			for r := range n - 1 {
				rs, ag := r, n-1+r
				want := []struct {
					got  any
					want any
				}{
					{p.Sends[rs], Send{Peer: md(i + 1), Off: md(i-r) * chunk, Len: chunk, Role: Reduce, From: -1, AfterRecvs: ints(r > 0, r-1), Dim: 0, Phase: 0}},
					{p.Recvs[rs], Recv{Peer: md(i - 1), Off: md(i-r-1) * chunk, Len: chunk, Role: Reduce, PeerMsg: rs, Dim: 0, Phase: 0}},
				}
				agSend := Send{Peer: md(i + 1), Off: md(i+1-r) * chunk, Len: chunk, Role: Gather, From: ag - 1, AfterRecvs: []int{ag - 1}, Phase: 1}
				agRecv := Recv{Peer: md(i - 1), Off: md(i-r) * chunk, Len: chunk, Role: Gather, PeerMsg: ag, AfterSends: []int{r}, Phase: 1}
				if r == 0 {
					agSend.Role, agSend.From, agSend.AfterRecvs = GatherOwner, -1, []int{n - 2}
					agRecv.Role = GatherOwner
				}
				want = append(want, struct{ got, want any }{p.Sends[ag], agSend}, struct{ got, want any }{p.Recvs[ag], agRecv})
				for _, w := range want {
					if !equalMsg(w.got, w.want) {
						t.Errorf("n %d rank %d round %d:\n got  %+v\n want %+v", n, i, r, w.got, w.want)
					}
				}
			}
		}
	}
}

func ints(ok bool, xs ...int) []int {
	if !ok {
		return nil
	}
	return xs
}

// equalMsg compares two messages, a nil and an empty list alike.
func equalMsg(a, b any) bool {
	switch a := a.(type) {
	case Send:
		b := b.(Send)
		return slices.Equal(a.AfterRecvs, b.AfterRecvs) && slices.Equal(a.AfterSends, b.AfterSends) &&
			a.Peer == b.Peer && a.Off == b.Off && a.Len == b.Len && a.Role == b.Role && a.From == b.From && a.Dim == b.Dim && a.Phase == b.Phase
	case Recv:
		b := b.(Recv)
		return slices.Equal(a.AfterRecvs, b.AfterRecvs) && slices.Equal(a.AfterSends, b.AfterSends) &&
			a.Peer == b.Peer && a.Off == b.Off && a.Len == b.Len && a.Role == b.Role && a.PeerMsg == b.PeerMsg && a.Dim == b.Dim && a.Phase == b.Phase
	}
	return false
}
