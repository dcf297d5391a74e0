package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/lab/pattern"
	"github.com/forgive-emu/forgive/lab/report"
	"github.com/forgive-emu/forgive/lab/results"
)

// sweepOpts is a sweep of 2 policies x 2 seeds on the congested 4-rank
// fabric (a topology file, so the workers read it too), where forgive has
// trims to forgive.
func sweepOpts(t *testing.T) Options { return sweepOptsOn(congestedTopology(t)) }

// sweepOptsOn is sweepOpts on the topology file at path.
func sweepOptsOn(path string) Options {
	o := simOptions("dcqcn", "forgive")
	o.Topology, o.Ranks, o.Seeds = path, 0, 2
	return o
}

func runSweep(t *testing.T, o Options) *results.File {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	f, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("shard %v, jobs %d: %v", o.Shard, o.Jobs, err)
	}
	checkInvariants(t, f)
	return f
}

// checkInvariants checks FORGIVE's invariants on every run: the ledger's
// verdict at every rank (forgiven <= budget, forgiven <= p/(1-p) x
// received, no range charged twice) and forgiven <= budget on every step.
func checkInvariants(t *testing.T, f *results.File) {
	t.Helper()
	for _, r := range f.Runs {
		if !r.BudgetInvariantHeld || !r.NonGradientBytesExact || !r.GradientSumsExact {
			t.Errorf("%s seed %d: invariant %v, non-gradient exact %v, sums exact %v", r.Policy, r.Seed, r.BudgetInvariantHeld, r.NonGradientBytesExact, r.GradientSumsExact)
		}
		for _, s := range r.Steps {
			if !s.Invariant || s.Forgiven > s.Budget {
				t.Errorf("%s seed %d step %d: invariant %v, forgave %d of a budget of %d", r.Policy, r.Seed, s.Step, s.Invariant, s.Forgiven, s.Budget)
			}
		}
	}
}

// runKeys lists a file's runs as "policy/seed".
func runKeys(runs []results.Run) string {
	var out []string
	for _, r := range runs {
		out = append(out, fmt.Sprintf("%s/%d", r.Policy, r.Seed))
	}
	return strings.Join(out, " ")
}

// shards runs the sweep of o as n shards, shard i into root/shard-i, and
// returns their directories.
func shards(t *testing.T, o Options, n int, root string) []string {
	t.Helper()
	var dirs []string
	for i := 1; i <= n; i++ {
		o := o
		o.Shard, o.Out = Shard{Index: i, Count: n}, filepath.Join(root, fmt.Sprintf("shard-%d", i))
		runSweep(t, o)
		dirs = append(dirs, o.Out)
	}
	return dirs
}

// sweepRuns is sweepOpts's sweep run whole and as 3 shards. The tests of
// sweeps share one (sweepFixture): under the race detector on a loaded
// two-core machine each run of it costs tens of seconds, and the package
// must finish within go test's ten minutes. Its directories are read,
// never written: a test that changes a shard changes a copy.
type sweepRuns struct {
	opts     Options // the sweep's options, its topology file in the fixture's directory
	whole    *results.File
	wholeDir string
	shards   []string
}

var (
	sweepOnce sync.Once
	sweepFix  *sweepRuns
	// fixtureDir holds the shared sweep's files; TestMain removes it.
	fixtureDir string
)

// sweepFixture returns the shared sweep, running it on first use.
func sweepFixture(t *testing.T) *sweepRuns {
	t.Helper()
	sweepOnce.Do(func() {
		dir, err := os.MkdirTemp("", "forgive-lab-sweep-")
		if err != nil {
			t.Fatal(err)
		}
		fixtureDir = dir
		o := sweepOptsOn(filepath.Join(dir, "congested.yaml"))
		if err := os.WriteFile(o.Topology, []byte(congestedYAML), 0o644); err != nil {
			t.Fatal(err)
		}
		whole := o
		whole.Out = filepath.Join(dir, "whole")
		f := runSweep(t, whole)
		sweepFix = &sweepRuns{opts: o, whole: f, wholeDir: whole.Out, shards: shards(t, o, 3, dir)}
	})
	if sweepFix == nil {
		t.Fatal("the shared sweep failed in an earlier test")
	}
	return sweepFix
}

func merge(paths ...string) (*results.File, error) {
	files, err := report.Shards(paths)
	if err != nil {
		return nil, err
	}
	return report.Merge(paths, files)
}

// A sweep run as 3 shards and merged is the sweep run whole, field by
// field but for the wall-clock ones, and so are the CSV and the table;
// each shard holds its slice of the sweep's order (runs k with k mod 3 ==
// i-1) and names its sweep and shard.
func TestSweepShardsMergeToTheWhole(t *testing.T) {
	fx := sweepFixture(t)
	whole, wholeDir := fx.whole, fx.wholeDir
	if got := runKeys(whole.Runs); got != "dcqcn/1 forgive/1 dcqcn/2 forgive/2" {
		t.Fatalf("the whole sweep ran %s", got)
	}
	if whole.Sweep.ID == "" || whole.Sweep.Shard != nil || whole.Sweep.Options.Seeds != 2 || whole.Sweep.Options.TopologySHA256 == "" {
		t.Fatalf("the whole sweep's sweep: %+v", whole.Sweep)
	}
	dirs := fx.shards
	want := []string{"dcqcn/1 forgive/2", "forgive/1", "dcqcn/2"}
	for i, dir := range dirs {
		f, err := report.ReadJSON(filepath.Join(dir, "results.json"))
		if err != nil {
			t.Fatal(err)
		}
		if got := runKeys(f.Runs); got != want[i] {
			t.Errorf("shard %d/3 ran %s, want %s", i+1, got, want[i])
		}
		if f.Sweep.ID != whole.Sweep.ID || f.Sweep.Shard == nil || *f.Sweep.Shard != (results.Shard{Index: i + 1, Count: 3}) {
			t.Errorf("shard %d/3: sweep %s shard %+v, want %s", i+1, f.Sweep.ID, f.Sweep.Shard, whole.Sweep.ID)
		}
	}
	m, err := merge(dirs...)
	if err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, m)
	if a, b := wallFree(t, whole), wallFree(t, m); !bytes.Equal(a, b) {
		t.Fatalf("merged shards differ from the whole sweep:\n%s\n---\n%s", a, b)
	}
	if len(m.Wall.Runs) != 4 || m.Wall.Runs[1].Policy != "forgive" || m.Wall.Runs[1].Seed != 1 || m.Wall.Seconds <= 0 {
		t.Errorf("merged wall %+v", m.Wall)
	}
	mergedDir := filepath.Join(t.TempDir(), "merged")
	if err := report.WriteResults(mergedDir, m); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"results.csv", report.StepTimePNG, report.AllReduceCDFPNG, report.RatePNG, report.OccupancyPNG} {
		a, errA := os.ReadFile(filepath.Join(wholeDir, name))
		b, errB := os.ReadFile(filepath.Join(mergedDir, name))
		if errA != nil || errB != nil || !bytes.Equal(a, b) {
			t.Errorf("%s: the whole sweep's and the merge's differ (%v, %v)", name, errA, errB)
		}
	}
	var ta, tb bytes.Buffer
	if report.Table(&ta, whole) != nil || report.Table(&tb, m) != nil || ta.String() != tb.String() {
		t.Errorf("tables differ:\n%s\n---\n%s", ta.String(), tb.String())
	}
	// Every run's loss pattern comes along from the shard that ran it.
	if err := report.CopyPatterns(dirs, mergedDir, m); err != nil {
		t.Fatal(err)
	}
	for _, r := range whole.Runs {
		name := pattern.File(r.Policy, r.Seed)
		a, errA := os.ReadFile(filepath.Join(wholeDir, name))
		b, errB := os.ReadFile(filepath.Join(mergedDir, name))
		if r.LossPattern == nil || r.LossPattern.File != name || errA != nil || errB != nil || len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s: the whole sweep's and the merge's differ (%+v, %v, %v)", name, r.LossPattern, errA, errB)
		}
	}
	lacking := filepath.Join(t.TempDir(), "lacking")
	if err := os.CopyFS(lacking, os.DirFS(dirs[1])); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(lacking, pattern.File("forgive", 1))); err != nil {
		t.Fatal(err)
	}
	if err := report.CopyPatterns([]string{dirs[0], lacking, dirs[2]}, t.TempDir(), m); !errors.Is(err, report.ErrMerge) || !strings.Contains(err.Error(), "forgive seed 1") {
		t.Errorf("a shard without its pattern file: %v, want ErrMerge naming the run", err)
	}
}

// --jobs 2 runs every run in a worker process and gives the results of
// --jobs 1, byte for byte but for the wall clock, with one progress line
// per run.
func TestSweepJobsEqualsOneJob(t *testing.T) {
	fx := sweepFixture(t)
	o, one := fx.opts, fx.whole
	var progress bytes.Buffer
	o.Jobs, o.Progress = 2, &progress
	two := runSweep(t, o)
	if a, b := wallFree(t, one), wallFree(t, two); !bytes.Equal(a, b) {
		t.Fatalf("--jobs 2 differs from --jobs 1:\n%s\n---\n%s", a, b)
	}
	for i := range one.Runs {
		if a, b := one.Runs[i].PatternFile, two.Runs[i].PatternFile; len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s seed %d: the worker's loss pattern (%d bytes) is not the run's (%d bytes)", one.Runs[i].Policy, one.Runs[i].Seed, len(b), len(a))
		}
	}
	if len(two.Wall.Runs) != 4 || two.Wall.Runs[3].Policy != "forgive" || two.Wall.Runs[3].Seed != 2 || two.Wall.Runs[3].EventsPerS <= 0 {
		t.Errorf("wall %+v", two.Wall)
	}
	lines := strings.Split(strings.TrimSpace(progress.String()), "\n")
	if len(lines) != 4 {
		t.Fatalf("%d progress lines, want one per run:\n%s", len(lines), progress.String())
	}
	for _, r := range one.Runs {
		if run := fmt.Sprintf("%-16s seed %-3d done in", r.Policy, r.Seed); !strings.Contains(progress.String(), run) {
			t.Errorf("no progress line for %q:\n%s", run, progress.String())
		}
	}
	for i, l := range lines {
		if !strings.HasPrefix(l, fmt.Sprintf("run %d/4  ", i+1)) {
			t.Errorf("progress line %d: %q", i+1, l)
		}
	}
	// A shard runs in workers too.
	o.Shard, o.Progress = Shard{Index: 1, Count: 2}, nil
	if f := runSweep(t, o); runKeys(f.Runs) != "dcqcn/1 dcqcn/2" || f.Sweep.ID != one.Sweep.ID {
		t.Errorf("shard 1/2 with --jobs 2 ran %s of sweep %s", runKeys(f.Runs), f.Sweep.ID)
	}
}

// A worker that fails stops its run with the worker's own error, and the
// worker refuses a request its options do not match.
func TestSweepJobsWorkerErrors(t *testing.T) {
	p, err := check(sweepOpts(t))
	if err != nil {
		t.Fatal(err)
	}
	so, err := p.sweepOptions()
	if err != nil {
		t.Fatal(err)
	}
	id := results.SweepID(so)
	ctx := context.Background()
	bogus := sweepRun{policy: Policy{Name: "no-such-policy"}, seed: 1}
	if _, _, err := p.runWorker(ctx, id, so, bogus); err == nil || !strings.Contains(err.Error(), `policy "no-such-policy" seed 1 is no run of the sweep`) {
		t.Errorf("a run the sweep does not have: %v", err)
	}
	if _, _, err := p.runWorker(ctx, "0123456789abcdef", so, sweepRun{policy: p.policies[0], seed: 1}); err == nil || !strings.Contains(err.Error(), "not the parent's 0123456789abcdef") {
		t.Errorf("another sweep's id: %v", err)
	}
	if _, _, err := p.runWorker(ctx, id, so, sweepRun{policy: p.policies[1], seed: 2}); err != nil {
		t.Errorf("a run of the sweep: %v", err)
	}
	// In a sweep, the failed run's error is the sweep's, not the
	// cancellation of the runs it stopped.
	runs := p.sweepRuns(Shard{})
	runs = append(runs[:1:1], append([]sweepRun{bogus}, runs[1:]...)...)
	var progress bytes.Buffer
	_, _, err = p.runParallel(ctx, id, so, runs, 2, newProgress(&progress, len(runs), p.opts.Steps))
	if err == nil || !strings.Contains(err.Error(), "lab: policy no-such-policy, seed 1: worker") || errors.Is(err, context.Canceled) {
		t.Errorf("a sweep with a failing run: %v", err)
	}
	if !strings.Contains(progress.String(), "no-such-policy   seed 1   failed or stopped") {
		t.Errorf("no progress line for the failed run:\n%s", progress.String())
	}
}

// Merge refuses shards of different sweeps, a run twice, a run missing, a
// shard that holds another's run, an edited file and shards that divide
// the sweep differently, each naming what is wrong.
func TestMergeRefuses(t *testing.T) {
	fx := sweepFixture(t)
	o, dirs := fx.opts, fx.shards
	other := o
	other.Steps, other.Seeds, other.Shard, other.Out = 2, 1, Shard{Index: 2, Count: 2}, filepath.Join(t.TempDir(), "other")
	runSweep(t, other)
	dup := filepath.Join(t.TempDir(), "dup")
	if err := os.CopyFS(dup, os.DirFS(dirs[1])); err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(t.TempDir(), "edited.json")
	f, err := report.ReadJSON(filepath.Join(dirs[2], "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	f.Sweep.Options.Steps = 5
	if err := report.WriteJSON(edited, f); err != nil {
		t.Fatal(err)
	}
	stray := filepath.Join(t.TempDir(), "stray.json")
	f.Sweep.Options.Steps = 4
	f.Runs[0].Seed = 1 // dcqcn seed 1 is shard 1's
	if err := report.WriteJSON(stray, f); err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]struct {
		paths []string
		want  []string
	}{
		"another sweep":   {[]string{dirs[0], other.Out, dirs[2]}, []string{dirs[0], other.Out, "is of sweep", "steps (4 vs 2)", "seeds (2 vs 1)"}},
		"a run twice":     {[]string{dirs[0], dirs[1], dirs[2], dup}, []string{"run forgive seed 1 is in both " + dirs[1] + " and " + dup}},
		"a run missing":   {[]string{dirs[0], dirs[2]}, []string{"has 4 runs; no shard given holds forgive seed 1 (shard 2/3)"}},
		"only shard 2":    {[]string{dirs[1]}, []string{"dcqcn seed 1 (shard 1/3), dcqcn seed 2 (shard 3/3), forgive seed 2 (shard 1/3)"}},
		"an edited file":  {[]string{dirs[0], dirs[1], edited}, []string{edited, "not the " + f.Sweep.ID + " it names"}},
		"a stray run":     {[]string{dirs[1], stray}, []string{stray, "is shard 3/3 but holds run dcqcn seed 1, which is shard 1's"}},
		"whole and shard": {[]string{fx.wholeDir, dirs[0]}, []string{fx.wholeDir + " is shard 1/1, " + dirs[0] + " shard 1/3"}},
		"no sweep id":     {[]string{writeNoSweep(t)}, []string{"has no sweep id"}},
	} {
		_, err := merge(c.paths...)
		if !errors.Is(err, report.ErrMerge) {
			t.Errorf("%s: %v, want ErrMerge", name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %q does not say %q", name, err, w)
			}
		}
	}
	// The three shards in any order, and the whole alone, merge.
	for _, paths := range [][]string{{dirs[2], dirs[0], dirs[1]}, {fx.wholeDir}} {
		if m, err := merge(paths...); err != nil || runKeys(m.Runs) != "dcqcn/1 forgive/1 dcqcn/2 forgive/2" {
			t.Errorf("merge %v: %v", paths, err)
		}
	}
}

// writeNoSweep writes a results.json of a lab that recorded no sweep.
func writeNoSweep(t *testing.T) string {
	path := filepath.Join(t.TempDir(), "old.json")
	if err := report.WriteJSON(path, &results.File{Version: report.Version}); err != nil {
		t.Fatal(err)
	}
	return path
}

// --shard's syntax and range, and --jobs on a real placement, are refused
// before anything starts, naming the flag.
func TestShardAndJobsRefused(t *testing.T) {
	for _, s := range []string{"0/3", "4/3", "x", "1/0", "", "1/", "/3", "-1/3", "1/3/4"} {
		_, err := ParseShard(s)
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "--shard") {
			t.Errorf("--shard %q: %v, want ErrInput naming --shard", s, err)
		}
	}
	for s, want := range map[string]Shard{"1/3": {1, 3}, "3/3": {3, 3}, " 2/5 ": {2, 5}, "1/1": {1, 1}} {
		if got, err := ParseShard(s); err != nil || got != want {
			t.Errorf("--shard %q: %v, %v; want %v", s, got, err, want)
		}
	}
	bad := map[string]Options{
		"--shard 4/3":                   {Placement: PlacementSim, Shard: Shard{4, 3}},
		"--shard 0/3":                   {Placement: PlacementSim, Shard: Shard{0, 3}},
		"the sweep has 3 runs":          {Placement: PlacementSim, Shard: Shard{1, 4}},
		"--jobs 2: the loopback":        {Jobs: 2},
		"--jobs 3: the netns":           {Placement: "netns", Jobs: 3},
		"--jobs -1":                     {Placement: PlacementSim, Jobs: -1},
		"so shards 4 to 5 would run no": {Placement: PlacementSim, Shard: Shard{5, 5}},
	}
	for want, o := range bad {
		if _, err := Check(o); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: %v, want ErrInput saying %q", o.Shard, err, want)
		}
	}
	for _, o := range []Options{{Placement: PlacementSim, Jobs: 4, Shard: Shard{3, 3}}, {Jobs: 1}} {
		if _, err := Check(o); err != nil {
			t.Errorf("jobs %d shard %v on %q: %v", o.Jobs, o.Shard, o.Placement, err)
		}
	}
}

// The sweep id follows every option that shapes the results and none
// that only says where or how fast the sweep runs.
func TestSweepID(t *testing.T) {
	id := func(o Options) string {
		t.Helper()
		p, err := check(o)
		if err != nil {
			t.Fatal(err)
		}
		so, err := p.sweepOptions()
		if err != nil {
			t.Fatal(err)
		}
		return results.SweepID(so)
	}
	base := simOptions("dcqcn", "forgive")
	ref := id(base)
	same := map[string]func(*Options){
		"out":             func(o *Options) { o.Out = t.TempDir() },
		"jobs":            func(o *Options) { o.Jobs = 2 },
		"shard":           func(o *Options) { o.Shard = Shard{2, 2} },
		"progress":        func(o *Options) { o.Progress = &bytes.Buffer{} },
		"the default set": func(o *Options) { o.Steps, o.Seeds, o.Scale = 4, 1, 1 },
	}
	for name, edit := range same {
		o := base
		edit(&o)
		if got := id(o); got != ref {
			t.Errorf("%s changed the sweep id: %s, want %s", name, got, ref)
		}
	}
	other := map[string]func(*Options){
		"steps":    func(o *Options) { o.Steps = 3 },
		"seeds":    func(o *Options) { o.Seeds = 2 },
		"policies": func(o *Options) { o.Policies = []string{"forgive", "dcqcn"} },
		"scale":    func(o *Options) { o.Scale = 0.5 },
		"gradient": func(o *Options) { o.Workload.GradientBytes = 128 << 10 },
		"profile":  func(o *Options) { o.Profile = "loopback-fast" },
		"ranks":    func(o *Options) { o.Ranks = 8 },
	}
	for name, edit := range other {
		o := base
		edit(&o)
		if got := id(o); got == ref {
			t.Errorf("%s left the sweep id at %s", name, got)
		}
	}
	// A topology file's contents are part of the sweep.
	file := congestedTopology(t)
	o := base
	o.Topology, o.Ranks = file, 0
	a := id(o)
	if err := os.WriteFile(file, append(must(os.ReadFile(file)), "# edited\n"...), 0o644); err != nil {
		t.Fatal(err)
	}
	if b := id(o); a == b {
		t.Errorf("an edited topology file kept sweep id %s", a)
	}
}

func must(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}
