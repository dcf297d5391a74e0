package lab

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/lab/report"
)

// twoJobOptions is a small sweep of two jobs in the simulator: the
// shipped two-job topology at 4 ranks a job, a small workload.
func twoJobOptions(policies ...string) Options {
	o := simOptions(policies...)
	o.Topology, o.Ranks = "two-jobs-2x4-4to1", 0
	return o
}

func TestLookupJobPolicies(t *testing.T) {
	ps, err := LookupJobPolicies([]string{"forgive+dcqcn", "dcqcn+dcqcn"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, p := range ps {
		names = append(names, p.Name)
	}
	if got, want := strings.Join(names, ","), "forgive+dcqcn,dcqcn+dcqcn,forgive+idle,idle+dcqcn,dcqcn+idle"; got != want {
		t.Errorf("policies %s, want %s", got, want)
	}
	if p := ps[0]; p.Jobs[0].Name != "forgive" || p.Jobs[1].Name != "dcqcn" || !p.Forgive || p.Alone() {
		t.Errorf("forgive+dcqcn: %+v", p)
	}
	if p := ps[3]; p.Jobs[0] != nil || p.Jobs[1].Name != "dcqcn" || p.Forgive || !p.Alone() {
		t.Errorf("idle+dcqcn: %+v", p)
	}
	// The references already listed are not added twice, and expanding
	// the expansion (a worker re-checks the sweep's list) changes nothing.
	again, err := LookupJobPolicies(names, 2)
	if err != nil || len(again) != len(ps) {
		t.Fatalf("re-expanded: %d policies, %v", len(again), err)
	}
	for _, tc := range []struct {
		names []string
		jobs  int
		want  string
	}{
		{[]string{"forgive"}, 2, `--policies: "forgive": the topology places two jobs`},
		{[]string{"forgive+dcqcm"}, 2, `--policies: "forgive+dcqcm": job policy "dcqcm" is no policy`},
		{[]string{"idle+idle"}, 2, `--policies: "idle+idle": both jobs idle`},
		{[]string{"all+dcqcn"}, 2, `job policy "all" is no policy`},
		{[]string{"forgive+dcqcn", "forgive+dcqcn"}, 2, "listed twice"},
		{[]string{"forgive+dcqcn"}, 0, `--policies: "forgive+dcqcn" is a policy pair, for a topology of two jobs`},
	} {
		_, err := LookupJobPolicies(tc.names, tc.jobs)
		if err == nil || !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v on %d jobs: %v, want %q", tc.names, tc.jobs, err, tc.want)
		}
	}
}

// A plain policy on a two-job topology is refused before anything runs.
func TestTwoJobsRefusePlainPolicies(t *testing.T) {
	o := twoJobOptions("forgive")
	if _, err := Check(o); err == nil || !strings.Contains(err.Error(), "name a policy per job") {
		t.Fatalf("check: %v", err)
	}
}

// Two jobs run at once in the simulator, each with its own ranks, steps
// and budget: both complete every step, the invariants hold per job, the
// reference runs leave the other job's hosts idle (not one byte sent),
// and the run is deterministic.
func TestSimTwoJobs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	o := twoJobOptions("forgive+dcqcn")
	o.Workload.GradientBytes = 512 << 10
	o.Out = t.TempDir()
	f, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if got := runKeys(f.Runs); got != "forgive+dcqcn/1 forgive+idle/1 idle+dcqcn/1" {
		t.Fatalf("runs %s", got)
	}
	for _, r := range f.Runs {
		if len(r.Jobs) != 2 || r.Jobs[0].Job != "a" || r.Jobs[1].Job != "b" {
			t.Fatalf("%s: jobs %+v", r.Policy, r.Jobs)
		}
		a, b, _ := strings.Cut(r.Policy, "+")
		for j, want := range []string{a, b} {
			jr := r.Jobs[j]
			if jr.Policy != want || len(jr.Ranks) != 4 || jr.Ranks[0] != 4*j {
				t.Errorf("%s job %s: policy %s ranks %v", r.Policy, jr.Job, jr.Policy, jr.Ranks)
			}
			if !jr.BudgetInvariantHeld || !jr.ChecksHeld {
				t.Errorf("%s job %s: invariant %v, checks %v", r.Policy, jr.Job, jr.BudgetInvariantHeld, jr.ChecksHeld)
			}
			if jr.IsIdle() {
				if jr.HostTxBytes != 0 || jr.DataBytes != 0 || jr.TrainingTimeS != 0 {
					t.Errorf("%s: idle job %s sent %d bytes (%d data), trained %v s", r.Policy, jr.Job, jr.HostTxBytes, jr.DataBytes, jr.TrainingTimeS)
				}
				continue
			}
			if len(jr.StepTimesS) != o.Steps || jr.TrainingTimeS <= 0 || jr.AllReduceP99S < jr.AllReduceMedianS || jr.AllReduceMedianS <= 0 ||
				jr.HostTxBytes <= 0 || jr.DataBytes <= 0 {
				t.Errorf("%s job %s: %d steps, %v s, all-reduce %v..%v, %d bytes sent", r.Policy, jr.Job, len(jr.StepTimesS),
					jr.TrainingTimeS, jr.AllReduceMedianS, jr.AllReduceP99S, jr.HostTxBytes)
			}
			if jr.Policy == "dcqcn" && (jr.ForgivenBytes != 0 || jr.ExemptFlows != 0) {
				t.Errorf("%s: the dcqcn job forgave %d bytes, %d flows exempt", r.Policy, jr.ForgivenBytes, jr.ExemptFlows)
			}
		}
		// The run's own fields are its first running job's; its steps
		// carry that job's per-step invariant.
		first := r.Jobs[0]
		if first.IsIdle() {
			first = r.Jobs[1]
		}
		if r.TrainingTimeS != first.TrainingTimeS || len(r.Steps) != o.Steps {
			t.Errorf("%s: time %v, first job's %v", r.Policy, r.TrainingTimeS, first.TrainingTimeS)
		}
		for _, s := range r.Steps {
			if !s.Invariant || s.Forgiven > s.Budget {
				t.Errorf("%s step %d: invariant %v, forgave %d of %d", r.Policy, s.Step, s.Invariant, s.Forgiven, s.Budget)
			}
		}
		if r.LossPattern == nil || len(r.PatternFile) == 0 {
			t.Errorf("%s: no loss pattern", r.Policy)
		}
		if _, err := os.Stat(filepath.Join(o.Out, PatternFile(r.Policy, r.Seed))); err != nil {
			t.Error(err)
		}
	}
	// Beside the other job, a job's figures are not those of itself alone.
	if f.Runs[0].Jobs[1].TrainingTimeS == f.Runs[2].Jobs[1].TrainingTimeS {
		t.Errorf("job b took %v s beside job a and alone", f.Runs[0].Jobs[1].TrainingTimeS)
	}
	// The report's section and plot.
	var table bytes.Buffer
	if err := report.Table(&table, f); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "two jobs: each job beside the other") {
		t.Errorf("no two-job section:\n%s", table.String())
	}
	if _, err := os.Stat(filepath.Join(o.Out, report.TwoJobsPNG)); err != nil {
		t.Error(err)
	}
	// Deterministic: the same inputs, the same results.
	o.Out = ""
	g, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := wallFree(t, f), wallFree(t, g); !bytes.Equal(a, b) {
		t.Fatalf("two runs with the same inputs differ:\n%s\n---\n%s", a, b)
	}
}

// A sweep of two jobs in worker processes equals the sweep in this
// process, loss patterns included.
func TestSimTwoJobsWorkers(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	o := twoJobOptions("dcqcn+dcqcn")
	o.Steps = 2
	one, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	o.Jobs = 2
	two, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := wallFree(t, one), wallFree(t, two); !bytes.Equal(a, b) {
		t.Fatalf("--jobs 2 differs from --jobs 1:\n%s\n---\n%s", a, b)
	}
	for i := range one.Runs {
		if a, b := one.Runs[i].PatternFile, two.Runs[i].PatternFile; len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s: the worker's loss pattern differs", one.Runs[i].Policy)
		}
		if len(two.Runs[i].Jobs) != 2 {
			t.Errorf("%s: the worker's run has %d jobs", two.Runs[i].Policy, len(two.Runs[i].Jobs))
		}
	}
}

func TestQuantileIsTheNearestRank(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3, 10, 9, 8, 7, 6}
	for _, tc := range []struct{ q, want float64 }{{0.99, 10}, {0.5, 5}, {0.9, 9}, {0, 1}, {1, 10}} {
		if got := quantile(xs, tc.q); got != tc.want {
			t.Errorf("q %v: %v, want %v", tc.q, got, tc.want)
		}
	}
	if quantile(nil, 0.99) != 0 || xs[0] != 5 {
		t.Error("empty input, or the input was sorted in place")
	}
}
