package lab

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/internal/npy"
	"github.com/forgive-emu/forgive/internal/npy/npytest"
	"github.com/forgive-emu/forgive/lab/pattern"
)

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
	name := filepath.Join(o.Out, pattern.File("forgive", 1))
	data, err := os.ReadFile(name)
	if err != nil || !bytes.Equal(data, f.Runs[1].PatternFile) {
		t.Fatalf("%s: %v, or not the run's pattern", name, err)
	}
	arrays, err := npy.ReadNPZ(bytes.NewReader(data), int64(len(data)))
	if err != nil || len(arrays) != 4 || arrays[0].Name != "ranges" || arrays[0].Records[0].Len() != int(f.Runs[1].LossPattern.Pattern.Ranges) {
		t.Fatalf("read back: %v, %d arrays", err, len(arrays))
	}
}
