package topo

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/congestion"
)

// The two-job topologies split their ranks in two blocks, and with the
// ranks interleaved every leaf holds hosts of both jobs, so both jobs'
// rings cross the same uplinks.
func TestTwoJobTopologiesShareEveryLeaf(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ranks, per  int
		leaves      int
		perLeafEach int
	}{{"two-jobs-2x4-4to1", 8, 4, 2, 2}, {"two-jobs-8x8-4to1", 64, 32, 8, 4}} {
		tp := mustTopology(t, tc.name)
		jr := tp.JobRanks()
		if !slices.Equal(tp.Jobs, []string{"a", "b"}) || len(jr) != 2 || len(jr[0]) != tc.per || len(jr[1]) != tc.per || jr[1][0] != tc.per {
			t.Fatalf("%s: jobs %v, ranks %v", tc.name, tp.Jobs, jr)
		}
		plan, err := Place(tp, mustProfile(t, "loopback"), PlaceOptions{Dir: t.TempDir(), Net: "127.0.0.", Host: DefaultHostPolicy()})
		if err != nil {
			t.Fatal(err)
		}
		count := map[[2]string]int{}
		for j, ranks := range jr {
			for _, r := range ranks {
				count[[2]string{tp.Jobs[j], plan.Host(r).Switch}]++
			}
		}
		for l := 1; l <= tc.leaves; l++ {
			for _, job := range tp.Jobs {
				if n := count[[2]string{job, "leaf" + itoa(l)}]; n != tc.perLeafEach {
					t.Errorf("%s: leaf%d has %d hosts of job %s, want %d", tc.name, l, n, job, tc.perLeafEach)
				}
			}
		}
	}
	if mustTopology(t, "leaf-spine-2x4-4to1").JobRanks() != nil {
		t.Error("a topology of one job has job ranks")
	}
}

func itoa(n int) string { return string(rune('0' + n)) }

func TestBadJobsNameTheField(t *testing.T) {
	good := readText(t, filepath.Join(topologyDir, "two-jobs-2x4-4to1.yaml"))
	for _, c := range []struct{ old, new, want string }{
		{"jobs: [a, b]", "jobs: [a]", "jobs: 1 jobs: want exactly 2 names"},
		{"jobs: [a, b]", "jobs: [a, b, c]", "jobs: 3 jobs: want exactly 2"},
		{"jobs: [a, b]", "jobs: [a, a]", `jobs[1]: "a": named twice`},
		{"jobs: [a, b]", "jobs: [A, b]", `jobs[0]: "A": want 1 to 16 characters`},
		{"jobs: [a, b]", "jobs: a", "jobs: cannot unmarshal"},
		{"hosts_per_leaf: 4", "hosts_per_leaf: 1", "jobs: 2 ranks do not split into 2 jobs of at least 2 ranks"},
	} {
		_, err := ParseTopology([]byte(replace(t, good, c.old, c.new)))
		if err == nil || !errors.Is(err, ErrTopology) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q -> %q:\n got %v\nwant %q", c.old, c.new, err, c.want)
		}
	}
	// A rank count that does not split is refused where it is placed.
	tp := mustTopology(t, "two-jobs-2x4-4to1")
	odd, err := tp.WithRanks(2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Place(odd, mustProfile(t, "loopback"), PlaceOptions{Dir: t.TempDir(), Net: "127.0.0.", Host: DefaultHostPolicy()}); err == nil ||
		!strings.Contains(err.Error(), "jobs: 2 ranks do not split") {
		t.Errorf("2 ranks in two jobs: %v", err)
	}
}

// Each rank's host runs its own job's policy; a list that does not fit
// the ranks, or a bad policy in it, is refused naming the field.
func TestRankHostPolicies(t *testing.T) {
	tp := mustTopology(t, "two-jobs-2x4-4to1")
	prof := mustProfile(t, "loopback")
	pols := make([]HostPolicy, 8)
	for i := range pols {
		pols[i] = DefaultHostPolicy()
		if i >= 4 {
			pols[i] = HostPolicy{CC: congestion.KindNSCC}
		}
	}
	plan, err := Place(tp, prof, PlaceOptions{Dir: t.TempDir(), Net: "127.0.0.", Host: DefaultHostPolicy(), RankHost: pols})
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range plan.Hosts {
		want := "dcqcn"
		if h.Rank >= 4 {
			want = "nscc"
		}
		if h.Config.CC != want || (*h.Config.Forgive.Enabled) != (h.Rank < 4) {
			t.Errorf("rank %d: cc %s, forgive %v", h.Rank, h.Config.CC, *h.Config.Forgive.Enabled)
		}
	}
	if _, err := Place(tp, prof, PlaceOptions{Dir: t.TempDir(), Net: "127.0.0.", RankHost: pols[:3]}); err == nil || !strings.Contains(err.Error(), "rank_host: 3 policies for 8 ranks") {
		t.Errorf("3 policies: %v", err)
	}
	pols[5].CC = congestion.Kind(9) // no kind
	if _, err := Place(tp, prof, PlaceOptions{Dir: t.TempDir(), Net: "127.0.0.", RankHost: pols}); err == nil || !strings.Contains(err.Error(), `rank_host[5]: host.cc: Kind(9)`) {
		t.Errorf("a bad policy: %v", err)
	}
}
