package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/lab/launch"
	"github.com/forgive-emu/forgive/lab/pattern"
	"github.com/forgive-emu/forgive/lab/report"
	"github.com/forgive-emu/forgive/lab/results"
)

// tinySweep is a sweep of 2 policies x 2 seeds in the simulator on a 4:1
// fabric (step 4 not critical, so forgive differs from dcqcn), small
// enough for a fraction of a second per run.
var tinySweep = []string{"lab", "--placement", "sim", "--topology", "leaf-spine-2x4-4to1", "--ranks", "4", "--steps", "5", "--seeds", "2",
	"--policies", "dcqcn,forgive", "--gradient-bytes", "131072", "--compute", "2ms"}

// plainBin is forgivectl built without the race detector, once.
var plainBin struct {
	once sync.Once
	path string
	err  error
}

// plainForgivectl runs forgivectl built as a reader builds it, without the
// race detector, and returns its exit code and output. The sweeps the
// report tests merge are deterministic simulator runs, which the detector
// only slows (run in-process, they took most of TestReportMergeShards' 91 s
// and TestReportMergeRefuses' 74 s at a load average of 20 to 30); what
// those tests check, the merge, runs in-process under it.
func plainForgivectl(t *testing.T, args ...string) (int, string) {
	t.Helper()
	plainBin.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute) // a hang guard
		defer cancel()
		bins, err := launch.Binaries(ctx, "", "forgivectl")
		plainBin.path, plainBin.err = bins["forgivectl"], err
	})
	if plainBin.err != nil {
		t.Fatal(plainBin.err)
	}
	out, err := exec.Command(plainBin.path, args...).CombinedOutput()
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		return ee.ExitCode(), string(out)
	case err != nil:
		t.Fatalf("forgivectl %s: %v", strings.Join(args, " "), err)
	}
	return 0, string(out)
}

// runShards runs tinySweep (with extra flags) as n shards into dirs of
// their own, through the command line of a forgivectl built without the
// race detector (plainForgivectl) and with the default --jobs (the cores:
// each run a worker process, that forgivectl as lab-worker).
func runShards(t *testing.T, n int, extra ...string) []string {
	t.Helper()
	var dirs []string
	for i := 1; i <= n; i++ {
		dir := filepath.Join(t.TempDir(), "shard")
		args := append(append(append([]string{}, tinySweep...), extra...), "--shard", itoa(i)+"/"+itoa(n), "--out", dir)
		code, out := plainForgivectl(t, args...)
		if code != 0 {
			t.Fatalf("forgivectl %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
		if !strings.Contains(out, "shard "+itoa(i)+"/"+itoa(n)+" of sweep") {
			t.Errorf("shard %d/%d does not say it is a shard:\n%s", i, n, out)
		}
		dirs = append(dirs, dir)
	}
	return dirs
}

func readResults(t *testing.T, dir string) *results.File {
	t.Helper()
	f, err := report.ReadJSON(filepath.Join(dir, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range f.Runs {
		if !r.BudgetInvariantHeld || !r.NonGradientBytesExact || !r.GradientSumsExact {
			t.Errorf("%s seed %d: invariant %v, exact %v %v", r.Policy, r.Seed, r.BudgetInvariantHeld, r.NonGradientBytesExact, r.GradientSumsExact)
		}
		for _, s := range r.Steps {
			if !s.Invariant || s.Forgiven > s.Budget {
				t.Errorf("%s seed %d step %d: invariant %v, forgave %d of %d", r.Policy, r.Seed, s.Step, s.Invariant, s.Forgiven, s.Budget)
			}
		}
	}
	return f
}

func withoutWall(t *testing.T, f *results.File) []byte {
	t.Helper()
	c := *f
	c.Created, c.Wall = time.Time{}, results.Wall{}
	b, err := json.Marshal(&c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Shards run from the command line and merged with report merge give
// the sweep run whole with --jobs 1, its table and its CSV; a dry run
// checks the shards and writes nothing.
func TestReportMergeShards(t *testing.T) {
	dirs := runShards(t, 2)
	wholeDir := filepath.Join(t.TempDir(), "whole")
	code, wholeOut := plainForgivectl(t, append(append([]string{}, tinySweep...), "--jobs", "1", "--out", wholeDir)...)
	if code != 0 {
		t.Fatalf("the whole sweep: exit %d\n%s", code, wholeOut)
	}
	merged := filepath.Join(t.TempDir(), "merged")
	code, out := forgivectl(t, "--dry-run", "report", "merge", "--out", merged, dirs[0], dirs[1])
	if code != 0 || !strings.Contains(out, "dry run: would merge 2 shards of sweep") || !strings.Contains(out, "(4 runs)") {
		t.Fatalf("merge --dry-run: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(merged); !os.IsNotExist(err) {
		t.Fatalf("merge --dry-run wrote %s: %v", merged, err)
	}
	// A shard's directory may hold its results gzipped, as docs/results
	// keeps them.
	gzipResults(t, dirs[1])
	code, out = forgivectl(t, "report", "merge", "--out", merged, dirs[1], filepath.Join(dirs[0], "results.json"))
	if code != 0 {
		t.Fatalf("merge: exit %d\n%s", code, out)
	}
	whole, m := readResults(t, wholeDir), readResults(t, merged)
	if a, b := withoutWall(t, whole), withoutWall(t, m); !bytes.Equal(a, b) {
		t.Fatalf("merged shards differ from the whole sweep:\n%s\n---\n%s", a, b)
	}
	a, errA := os.ReadFile(filepath.Join(wholeDir, "results.csv"))
	b, errB := os.ReadFile(filepath.Join(merged, "results.csv"))
	if errA != nil || errB != nil || !bytes.Equal(a, b) {
		t.Errorf("results.csv differs (%v, %v)", errA, errB)
	}
	// Every run's loss pattern comes along, from a shard named by its
	// directory or by its results.json.
	for _, r := range whole.Runs {
		name := pattern.File(r.Policy, r.Seed)
		a, errA := os.ReadFile(filepath.Join(wholeDir, name))
		b, errB := os.ReadFile(filepath.Join(merged, name))
		if errA != nil || errB != nil || len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s: the merge's differs from the whole sweep's (%v, %v)", name, errA, errB)
		}
	}
	// The table is the whole sweep's: everything before the last line
	// (which names the directory) is the same.
	cut := func(s string) string {
		return s[strings.Index(s, "profile "):strings.LastIndex(strings.TrimRight(s, "\n"), "\n")]
	}
	if cut(out) != cut(wholeOut) {
		t.Errorf("merge printed\n%s\nthe whole sweep\n%s", out, wholeOut)
	}
}

// report merge refuses shards of different sweeps, a run twice and a run
// missing (exit 2, naming it), and an --out that is a shard's directory.
func TestReportMergeRefuses(t *testing.T) {
	dirs := runShards(t, 2)
	other := runShards(t, 2, "--scale", "1/2")
	merged := filepath.Join(t.TempDir(), "merged")
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{dirs[0], other[1]}, "scale (1 vs 0.5)"},
		{[]string{dirs[0], dirs[1], dirs[1]}, "is in both " + dirs[1] + " and " + dirs[1]},
		{[]string{dirs[1]}, "no shard given holds dcqcn seed 1 (shard 1/2), dcqcn seed 2 (shard 1/2)"},
		{[]string{filepath.Join(t.TempDir(), "nothing")}, "no such file or directory"},
	} {
		code, out := forgivectl(t, append([]string{"report", "merge", "--out", merged}, c.args...)...)
		if code != 2 || !strings.Contains(out, c.want) {
			t.Errorf("merge %s: exit %d, want 2 saying %q:\n%s", strings.Join(c.args, " "), code, c.want, out)
		}
	}
	if code, out := forgivectl(t, "report", "merge", "--out", dirs[0], dirs[0], dirs[1]); code != 2 || !strings.Contains(out, "would overwrite") {
		t.Errorf("merge into a shard's directory: exit %d:\n%s", code, out)
	}
	if code, out := forgivectl(t, "report", "merge"); code != 2 {
		t.Errorf("merge without a shard: exit %d:\n%s", code, out)
	}
	if _, err := os.Stat(merged); !os.IsNotExist(err) {
		t.Errorf("a refused merge wrote %s: %v", merged, err)
	}
}

// --shard's syntax and --jobs are checked on the command line, naming
// the flag (exit 2); the dry run says what the shard runs.
func TestLabShardAndJobsFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--shard", "0/3"}, "--shard 0/3"},
		{[]string{"--shard", "4/3"}, "--shard 4/3"},
		{[]string{"--shard", "x"}, `--shard "x"`},
		{[]string{"--shard", "1/10"}, "--shard 1/10: the sweep has 9 runs"}, // 3 policies x 3 seeds, the loopback default
		{[]string{"--jobs", "2"}, "--jobs 2: the loopback placement runs one run at a time"},
		{[]string{"--jobs", "0", "--placement", "sim"}, "--jobs 0"},
	} {
		code, out := forgivectl(t, append([]string{"lab", "--dry-run"}, c.args...)...)
		if code != 2 || !strings.Contains(out, c.want) {
			t.Errorf("lab --dry-run %s: exit %d, want 2 saying %q:\n%s", strings.Join(c.args, " "), code, c.want, out)
		}
	}
	code, out := forgivectl(t, "lab", "--dry-run", "--placement", "sim", "--seeds", "2", "--shard", "2/3", "--jobs", "4")
	if code != 0 || !strings.Contains(out, "shard 2/3, 2 of 6 runs (shed-tight seed 1, shed-tight seed 2), 2 at once") {
		t.Errorf("lab --dry-run --shard 2/3: exit %d:\n%s", code, out)
	}
	if _, out := forgivectl(t, "lab", "--help"); !strings.Contains(out, "1-based (1/3 is the first of three)") {
		t.Errorf("--help does not say --shard is 1-based:\n%s", out)
	}
}

// report phases tabulates a simulated sweep's steps phase by phase and
// draws one; the lab wrote the same plot; a results file without the
// samples is refused as bad input.
func TestReportPhases(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	args := append(append([]string{}, tinySweep...), "--seeds", "1", "--jobs", "1", "--out", dir)
	if code, out := forgivectl(t, args...); code != 0 {
		t.Fatalf("lab: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, report.StepPhasesPNG)); err != nil {
		t.Errorf("the lab wrote no %s: %v", report.StepPhasesPNG, err)
	}
	png := filepath.Join(t.TempDir(), "p.png")
	code, out := forgivectl(t, "report", "phases", "--step", "4", "--png", png, dir)
	if code != 0 {
		t.Fatalf("report phases: exit %d\n%s", code, out)
	}
	for _, want := range []string{`dcqcn +4 +all-reduce`, `forgive +4 +all-reduce`, "wrote " + regexp.QuoteMeta(png)} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("report phases: no %q in\n%s", want, out)
		}
	}
	if _, err := os.Stat(png); err != nil {
		t.Error(err)
	}
	bare := filepath.Join(t.TempDir(), "results.json")
	f := readResults(t, dir)
	for i := range f.Runs {
		f.Runs[i].Signals = nil
	}
	if err := report.WriteJSON(bare, f); err != nil {
		t.Fatal(err)
	}
	if code, out := forgivectl(t, "report", "phases", bare); code != 2 || !strings.Contains(out, "no step with per-phase samples") {
		t.Errorf("without samples: exit %d\n%s", code, out)
	}
}

// gzipResults replaces dir's results.json by results.json.gz.
func gzipResults(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, "results.json")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	if _, err := zw.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".gz", b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
}
