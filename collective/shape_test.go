package collective

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// TestDirectEightByEightFanIn is the seed's "seven senders converge on
// every receiving link": direct on [8, 8] gives every rank 7 senders in
// every phase.
func TestDirectEightByEightFanIn(t *testing.T) {
	sc, err := Compile(Spec{Ranks: 64, Dims: []int{8, 8}, Algorithms: []Algorithm{Direct}, Bytes: 64 * 64 * 4})
	if err != nil {
		t.Fatal(err)
	}
	sh := sc.Shape()
	names := []string{}
	for _, ph := range sh.Phases {
		names = append(names, ph.Name)
		if ph.MaxFanIn != 7 || ph.MeanFanIn != 7 {
			t.Errorf("%s: fan-in max %d mean %v, want 7", ph.Name, ph.MaxFanIn, ph.MeanFanIn)
		}
		for r, f := range ph.FanIn {
			if f != 7 {
				t.Errorf("%s rank %d: fan-in %d", ph.Name, r, f)
			}
		}
	}
	want := []string{"reduce-scatter dim 0 (direct)", "reduce-scatter dim 1 (direct)", "all-gather dim 1 (direct)", "all-gather dim 0 (direct)"}
	if !slices.Equal(names, want) {
		t.Errorf("phases %q, want %q", names, want)
	}
	// 7/8 of the vector out in the first phase, 7/64 in the second.
	if got := sh.Phases[0].SentBytes[5]; got != 64*64*4*7/8 {
		t.Errorf("phase 0 rank 5 sends %d", got)
	}
	if got := sh.Phases[1].SentBytes[5]; got != 64*64*4*7/64 {
		t.Errorf("phase 1 rank 5 sends %d", got)
	}
	if sh.Messages != 64*4*7 || sh.MaxFanIn != 7 {
		t.Errorf("messages %d, max fan-in %d", sh.Messages, sh.MaxFanIn)
	}
	b, err := json.Marshal(sh)
	if err != nil || !strings.Contains(string(b), `"max_fan_in":7`) || !strings.Contains(string(b), `"name":"all-gather dim 0 (direct)"`) {
		t.Errorf("json %.300s: %v", b, err)
	}
}

// TestRingAndTreeFanIn: a ring has one sender per receiver; in a double
// binary tree over an even group every rank is an inner node of exactly
// one tree, so at most two senders reduce into it.
func TestRingAndTreeFanIn(t *testing.T) {
	for _, n := range []int{2, 5, 8, 64} {
		ring, _ := Compile(Spec{Ranks: n, Bytes: 4 * n})
		for _, ph := range ring.Shape().Phases {
			if ph.MaxFanIn != 1 {
				t.Errorf("ring %d %s: max fan-in %d", n, ph.Name, ph.MaxFanIn)
			}
		}
	}
	for n := 2; n <= 130; n++ {
		tr := newDoubleTree(n)
		for i := range n {
			inner := 0
			for k := range 2 {
				x := tr.position(k, i)
				if tr.member(k, x) != i {
					t.Fatalf("m %d tree %d: member %d at %d maps back to %d", n, k, i, x, tr.member(k, x))
				}
				if tr.kids[x] != [2]int32{} {
					inner++
				}
			}
			if inner > 1 || n%2 == 0 && inner != 1 {
				t.Errorf("m %d: member %d inner in %d trees", n, i, inner)
			}
		}
		if n%2 == 0 {
			sc, _ := Compile(Spec{Ranks: n, Bytes: 64 * n, Algorithms: []Algorithm{DoubleBinaryTree}})
			if f := sc.Shape().Phases[0].MaxFanIn; f > 2 {
				t.Errorf("tree %d: reduce fan-in %d", n, f)
			}
		}
	}
}

// TestAddAfterAddWaitsForEarlierReaders exercises a rule no algorithm
// here needs yet: adds are not ordered among themselves, so the second
// of two adds after a send of the range must wait for the send too.
func TestAddAfterAddWaitsForEarlierReaders(t *testing.T) {
	c := &compiler{
		spec:   Spec{Kind: AllReduce, Ranks: 2, Elem: 4},
		phases: []PhaseInfo{{Algorithm: Ring}},
		plans: []Plan{{
			Sends: []Send{{Peer: 1, Len: 4, Role: Reduce, From: -1}, {Peer: 1, Len: 4, Role: Gather, From: -1}},
			Recvs: []Recv{{Peer: 1, Len: 4, Role: Reduce}, {Peer: 1, Len: 4, Role: Reduce}, {Peer: 1, Len: 4, Role: Gather}},
		}},
		sendStep: [][]int32{{0, 4}},
		recvStep: [][]int32{{1, 2, 3}},
	}
	var d deriver
	d.derive(c, 0)
	p := c.plans[0]
	for k, want := range [][]int{{0}, {0}, nil} {
		if !slices.Equal(p.Recvs[k].AfterSends, want) {
			t.Errorf("recv %d AfterSends %v, want %v", k, p.Recvs[k].AfterSends, want)
		}
	}
	if !slices.Equal(p.Recvs[2].AfterRecvs, []int{0, 1}) {
		t.Errorf("the copy after two adds waits for %v, want both", p.Recvs[2].AfterRecvs)
	}
	if p.Sends[1].From != 2 || !slices.Equal(p.Sends[1].AfterRecvs, []int{2}) {
		t.Errorf("the gather of the copied range: From %d after %v, want forwarded from 2", p.Sends[1].From, p.Sends[1].AfterRecvs)
	}
}

// TestAllToAllBlocks is the MoE exchange: rank i's block j goes to rank
// j, into its block i, in Splits pieces.
func TestAllToAllBlocks(t *testing.T) {
	sc, err := Compile(Spec{Kind: AllToAll, Ranks: 4, Algorithms: []Algorithm{Direct}, Bytes: 4 * 4 * 6, Splits: 2, Window: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, p := range sc.Plans {
		if len(p.Sends) != 6 || len(p.Recvs) != 6 {
			t.Fatalf("rank %d: %d sends %d receives, want 3 peers x 2 pieces", i, len(p.Sends), len(p.Recvs))
		}
		for _, s := range p.Sends {
			if s.Off/24 != s.Peer || s.Len != 12 || s.Role != Exchange {
				t.Errorf("rank %d sends %+v", i, s)
			}
		}
		for k, v := range p.Recvs {
			if v.Off/24 != v.Peer || v.AfterSends != nil || v.AfterRecvs != nil {
				t.Errorf("rank %d recv %d %+v", i, k, v)
			}
		}
	}
	if got := FormulaSentBytes(sc.Spec, 0); got != 3*24 {
		t.Errorf("formula %d, want 72", got)
	}
}
