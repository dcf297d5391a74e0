package lab

import (
	"bytes"
	"context"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/internal/npy"
	"github.com/forgive-emu/forgive/internal/npy/npytest"
)

// Known runs, shares and correlations, computed by hand.
func TestBurstinessOfKnownRanges(t *testing.T) {
	const n, steps, chunk = 3, 2, 100
	rs := []prange{
		// step 1, rank 0: [0,10) and [10,30) merge into one run of 30;
		// [50,54) is a run of 4.
		{step: 1, recv: 0, round: 0, off: 0, n: 10}, {step: 1, recv: 0, round: 0, off: 10, n: 20},
		{step: 1, recv: 0, gather: true, round: 1, off: 50, n: 4},
		// step 1, rank 1: [20,40) overlaps rank 0's [0,30) on 10 bytes;
		// round 0 again, as rank 0.
		{step: 1, recv: 1, round: 0, off: 20, n: 20},
		// step 2, rank 2: a run of 6.
		{step: 2, recv: 2, round: 1, off: 200, n: 6},
	}
	b := burstiness(rs, n, steps, chunk)
	if b.Ranges != 5 || b.Bytes != 60 || b.Runs != 4 || b.RunMaxBytes != 30 || b.RunMedianBytes != 6 {
		t.Fatalf("%+v: want 5 ranges, 60 bytes, runs 30, 4, 20, 6", b)
	}
	if b.RunMeanBytes != 15 || b.RunByteMedianBytes != 30 {
		t.Fatalf("run mean %v, byte median %d; want 15 and 30 (30 of 60 bytes in runs of 30 or more)", b.RunMeanBytes, b.RunByteMedianBytes)
	}
	// runs of 4 (bin 2), 6 (bin 2), 20 (bin 4), 30 (bin 4)
	if want := []int64{0, 0, 2, 0, 2}; !slices.Equal(b.RunHistogram, want) {
		t.Fatalf("histogram %v, want %v", b.RunHistogram, want)
	}
	// Step 1 has 44 distinct bytes at some rank ([0,40) and [50,54)), 10
	// at two; step 2 has 6, none shared.
	if want := 10.0 / 50; math.Abs(b.SharedFrac-want) > 1e-12 {
		t.Fatalf("shared %v, want %v", b.SharedFrac, want)
	}
	if b.TopSteps != 1 || math.Abs(b.TopStepsFrac-54.0/60) > 1e-12 {
		t.Fatalf("top %d steps hold %v, want 1 step with 54/60", b.TopSteps, b.TopStepsFrac)
	}
	// Message fractions, step 1: rank 0 (0.3, 0, 0, 0.04), rank 1 (0.2,
	// 0, 0, 0), rank 2 all zero (left out): one pair.
	want := pearson([]float64{0.3, 0, 0, 0.04}, []float64{0.2, 0, 0, 0})
	if math.Abs(b.MessageCorrelation-want) > 1e-12 {
		t.Fatalf("message correlation %v, want %v", b.MessageCorrelation, want)
	}
}

func pearson(x, y []float64) float64 {
	mx, my := mean(x), mean(y)
	var c, vx, vy float64
	for i := range x {
		c += (x[i] - mx) * (y[i] - my)
		vx += (x[i] - mx) * (x[i] - mx)
		vy += (y[i] - my) * (y[i] - my)
	}
	return c / math.Sqrt(vx*vy)
}

// The control keeps each (step, rank)'s forgiven bytes, never overlaps
// itself, stays inside the chunk the rank receives in the round it
// names, and is the same for the same seed.
func TestUniformControl(t *testing.T) {
	const n, steps, chunk, unit = 4, 3, 1000, 64
	pat := []prange{
		{step: 1, recv: 0, flow: 1003, round: 0, off: 0, n: 640},
		{step: 1, recv: 2, flow: 1001, gather: true, round: 2, off: 64, n: 100},
		{step: 3, recv: 3, flow: 1002, round: 1, off: 0, n: 3000},
	}
	c, err := uniformControl(pat, n, steps, chunk, unit, 7)
	if err != nil {
		t.Fatal(err)
	}
	type key struct{ step, rank int }
	want, got := map[key]int64{}, map[key]int64{}
	for _, r := range pat {
		want[key{r.step, r.recv}] += r.n
	}
	seen := map[[2]int64]bool{} // (step*n+rank, tensor byte / unit)
	for _, r := range c {
		got[key{r.step, r.recv}] += r.n
		ch := int64(ringChunk(n, r.recv, r.gather, r.round))
		if r.off < ch*chunk || r.off+r.n > (ch+1)*chunk || r.n > unit || r.n <= 0 || !math.IsNaN(r.t) || r.send != (r.recv+n-1)%n {
			t.Errorf("control range %+v: not within chunk %d of its round, or not a unit", r, ch)
		}
		k := [2]int64{int64(r.step*n + r.recv), r.off}
		if r.gather {
			k[0] += 1000
		}
		if seen[k] {
			t.Errorf("control range %+v drawn twice", r)
		}
		seen[k] = true
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("step %d rank %d: control forgives %d bytes, the pattern %d", k.step, k.rank, got[k], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("control covers %d (step, rank) pairs, the pattern %d", len(got), len(want))
	}
	again, _ := uniformControl(pat, n, steps, chunk, unit, 7)
	other, _ := uniformControl(pat, n, steps, chunk, unit, 8)
	if !rangesEqual(c, again) || rangesEqual(c, other) {
		t.Error("the control is not a function of the seed alone")
	}
	// More bytes than the rank receives in a step is an error.
	if _, err := uniformControl([]prange{{step: 1, recv: 0, n: 2*(n-1)*chunk + 1}}, n, 1, chunk, unit, 1); err == nil || !strings.Contains(err.Error(), "more than it receives") {
		t.Errorf("an impossible pattern: %v", err)
	}
}

func rangesEqual(a, b []prange) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		x.t, y.t = 0, 0
		if x != y {
			return false
		}
	}
	return true
}

// The CI test of the export: a small sim lab run (payload-free, as the
// seed's experiment runs) writes its loss patterns, and numpy, the reader
// they target, loads them and finds the shapes, dtypes and sums that
// results.json reports.
func TestLossPatternLoadsInNumpy(t *testing.T) {
	py, err := npytest.Python()
	if err != nil {
		t.Skipf("needs python3 with numpy (Debian: python3-numpy; .ci/run installs it): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	o := simOptions("dcqcn", "forgive")
	o.Topology, o.Ranks, o.PayloadFree = congestedTopology(t), 0, PayloadsOn
	o.Workload.GradientBytes = 512 << 10
	o.Out = t.TempDir()
	f, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Runs {
		if !r.BudgetInvariantHeld || !r.ChecksHeld() {
			t.Errorf("%s: invariant %v, checks %v held %v", r.Policy, r.BudgetInvariantHeld, r.Checks, r.ChecksHeld())
		}
		if !r.PayloadFree || r.LossPattern == nil || r.LossPattern.Pattern.Bytes != r.ForgivenBytes || r.LossPattern.Control.Bytes != r.ForgivenBytes {
			t.Fatalf("%s: payload-free %v, loss pattern %+v, forgave %d", r.Policy, r.PayloadFree, r.LossPattern, r.ForgivenBytes)
		}
		for _, s := range r.Steps {
			if !s.Invariant || s.Forgiven > s.Budget {
				t.Errorf("%s step %d: invariant %v, forgave %d of %d", r.Policy, s.Step, s.Invariant, s.Forgiven, s.Budget)
			}
		}
	}
	if fg := f.Runs[1]; fg.Policy != "forgive" || fg.ForgivenBytes == 0 || fg.LossPattern.Pattern.Runs == 0 {
		t.Fatalf("forgive forgave %d bytes in %+v: the test needs forgiveness", fg.ForgivenBytes, fg.LossPattern)
	}
	script := `
import json, sys
import numpy as np
out = sys.argv[1]
res = json.load(open(out + "/results.json"))
fields = [("step", "<i4"), ("receiver", "<i4"), ("sender", "<i4"), ("flow", "<u4"), ("phase", "|u1"),
          ("round", "<i4"), ("offset", "<i8"), ("length", "<i8"), ("time_s", "<f8")]
for run in res["runs"]:
    lp = run["loss_pattern"]
    z = np.load(out + "/" + lp["file"], allow_pickle=False)
    assert sorted(z.files) == ["control", "meta", "ranges", "steps"], z.files
    meta = json.loads(str(z["meta"]))
    n, chunk = meta["ranks"], meta["chunk_bytes"]
    assert (meta["policy"], meta["seed"], n, meta["steps"]) == (run["policy"], run["seed"], res["ranks"], res["steps"]), meta
    for name, want in (("ranges", lp["pattern"]), ("control", lp["control"])):
        a = z[name]
        assert [(f, a.dtype[f].str) for f in a.dtype.names] == fields, a.dtype
        assert a.shape == (want["ranges"],), (name, a.shape, want["ranges"])
        assert int(a["length"].sum()) == want["bytes"] == run["forgiven_bytes"], (name, a["length"].sum(), run["forgiven_bytes"])
        assert ((a["offset"] >= 0) & (a["offset"] + a["length"] <= n * chunk)).all()
        assert (a["sender"] == (a["receiver"] - 1) % n).all()
        # every range lies in the chunk its receiver receives in its round
        c = np.where(a["phase"] == 1, a["receiver"] - a["round"], a["receiver"] - a["round"] - 1) % n
        assert ((a["offset"] >= c * chunk) & (a["offset"] + a["length"] <= (c + 1) * chunk)).all(), name
        per_step = np.bincount(a["step"], weights=a["length"], minlength=res["steps"] + 1)[1:]
        assert per_step.tolist() == [s["forgiven"] for s in run["steps"]], (name, per_step)
    r, c = z["ranges"], z["control"]
    key = lambda a: np.bincount(a["step"] * n + a["receiver"], weights=a["length"], minlength=(res["steps"] + 1) * n)
    assert (key(r) == key(c)).all(), "the control's bytes per (step, rank) are the pattern's"
    assert np.isfinite(r["time_s"]).all() and np.isnan(c["time_s"]).all()
    st = z["steps"]
    assert st["step"].tolist() == list(range(1, res["steps"] + 1))
    assert st["critical"].tolist() == [int(s["critical"]) for s in run["steps"]]
print("ok", len(res["runs"]))
`
	out, err := exec.Command(py, "-c", script, o.Out).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok 2" {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
	// The file is what the run carried, and the Go reader reads it back.
	name := filepath.Join(o.Out, PatternFile("forgive", 1))
	data, err := os.ReadFile(name)
	if err != nil || !bytes.Equal(data, f.Runs[1].PatternFile) {
		t.Fatalf("%s: %v, or not the run's pattern", name, err)
	}
	arrays, err := npy.ReadNPZ(bytes.NewReader(data), int64(len(data)))
	if err != nil || len(arrays) != 4 || arrays[0].Name != "ranges" || arrays[0].Records[0].Len() != int(f.Runs[1].LossPattern.Pattern.Ranges) {
		t.Fatalf("read back: %v, %d arrays", err, len(arrays))
	}
}
