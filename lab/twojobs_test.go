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

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/lab/pattern"
	"github.com/forgive-emu/forgive/lab/report"
	"github.com/forgive-emu/forgive/lab/results"
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
	checkTwoJobRuns(t, f, o.Steps, o.Out)
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
	o := twoJobOptions("dcqcn+shed-tight")
	one, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	checkTwoJobRuns(t, one, o.Steps, "")
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

// checkTwoJobRuns checks every run of a two-job sweep with steps steps
// whose files went to out: each job's policy, ranks and checks, an idle
// job's hosts silent, a running job's figures complete, a dcqcn job
// forgiving nothing, the run's own fields its first running job's, and
// a loss pattern written for every run.
func checkTwoJobRuns(t *testing.T, f *results.File, steps int, out string) {
	t.Helper()
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
				if jr.HostTxBytes != 0 || jr.DataBytes != 0 || jr.TrainingTimeS != 0 || jr.StartS != 0 || jr.EndS != 0 {
					t.Errorf("%s: idle job %s sent %d bytes (%d data), trained %v s", r.Policy, jr.Job, jr.HostTxBytes, jr.DataBytes, jr.TrainingTimeS)
				}
				continue
			}
			if len(jr.StepTimesS) != steps || jr.TrainingTimeS <= 0 || jr.AllReduceP99S < jr.AllReduceMedianS || jr.AllReduceMedianS <= 0 ||
				jr.HostTxBytes <= 0 || jr.DataBytes <= 0 {
				t.Errorf("%s job %s: %d steps, %v s, all-reduce %v..%v, %d bytes sent", r.Policy, jr.Job, len(jr.StepTimesS),
					jr.TrainingTimeS, jr.AllReduceMedianS, jr.AllReduceP99S, jr.HostTxBytes)
			}
			// Each job runs under its own policy: only a FORGIVE job
			// forgives or exempts, only a shedding job sheds.
			if !strings.Contains(jr.Policy, "forgive") && (jr.ForgivenBytes != 0 || jr.ExemptFlows != 0) {
				t.Errorf("%s: the %s job forgave %d bytes, %d flows exempt", r.Policy, jr.Policy, jr.ForgivenBytes, jr.ExemptFlows)
			}
			if shed := strings.HasPrefix(jr.Policy, "shed"); shed != (jr.ShedBytes > 0) {
				t.Errorf("%s: the %s job shed %d bytes", r.Policy, jr.Policy, jr.ShedBytes)
			}
			if jr.StartS < 0 || jr.EndS-jr.StartS < jr.TrainingTimeS*(1-1e-9) {
				t.Errorf("%s job %s: ran from %v to %v s, for %v s of training", r.Policy, jr.Job, jr.StartS, jr.EndS, jr.TrainingTimeS)
			}
		}
		// The two jobs of a pair run at once.
		if a, b := r.Jobs[0], r.Jobs[1]; !a.IsIdle() && !b.IsIdle() && (a.StartS >= b.EndS || b.StartS >= a.EndS) {
			t.Errorf("%s: job a ran from %v to %v s, job b from %v to %v s: not at once", r.Policy, a.StartS, a.EndS, b.StartS, b.EndS)
		}
		// The run's own fields are its first running job's; its steps
		// carry that job's per-step invariant.
		first := r.Jobs[0]
		if first.IsIdle() {
			first = r.Jobs[1]
		}
		if r.TrainingTimeS != first.TrainingTimeS || len(r.Steps) != steps {
			t.Errorf("%s: time %v, first job's %v", r.Policy, r.TrainingTimeS, first.TrainingTimeS)
		}
		// Its all-reduce figures are over every rank's all-reduce of
		// every step, the median and the 99th percentile.
		var ar []float64
		for _, s := range r.Steps {
			if !s.Invariant || s.Forgiven > s.Budget {
				t.Errorf("%s step %d: invariant %v, forgave %d of %d", r.Policy, s.Step, s.Invariant, s.Forgiven, s.Budget)
			}
			ar = append(ar, s.AllReduceS...)
		}
		if len(ar) != steps*len(first.Ranks) || first.AllReduceMedianS != median(ar) || first.AllReduceP99S != quantile(ar, 0.99) {
			t.Errorf("%s job %s: all-reduce median %v, p99 %v over %d all-reduces; want %v, %v over %d", r.Policy, first.Job,
				first.AllReduceMedianS, first.AllReduceP99S, len(ar), median(ar), quantile(ar, 0.99), steps*len(first.Ranks))
		}
		if r.LossPattern == nil || len(r.PatternFile) == 0 {
			t.Errorf("%s: no loss pattern", r.Policy)
		}
		if out == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(out, pattern.File(r.Policy, r.Seed))); err != nil {
			t.Error(err)
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

// Two jobs on real processes: the loopback placement runs both jobs of a
// pair at once over the daemons, and each job's reference alone with the
// other job's daemons running but idle. The same checks as in the
// simulator hold of every run.
func TestShortLabTwoJobs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 11 processes for three runs; skipped with -short")
	}
	f, out := realTwoJobs(t, "") // loopback, the default
	for _, r := range f.Runs {
		if r.SocketDrops == nil || len(r.Occupancy) == 0 {
			t.Errorf("%s: socket drops %v, %d queue samples: a loopback run has both", r.Policy, r.SocketDrops, len(r.Occupancy))
		}
	}
	var table bytes.Buffer
	if err := report.Table(&table, f); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "two jobs: each job beside the other") {
		t.Errorf("no two-job section:\n%s", table.String())
	}
	if _, err := os.Stat(filepath.Join(out, report.TwoJobsPNG)); err != nil {
		t.Error(err)
	}
}

// realTwoJobs runs forgive+shed-tight, 3 steps, on the two-job topology
// in placement on real processes, checks every run as in the simulator,
// and returns the results and their directory.
func realTwoJobs(t *testing.T, placement string) (*results.File, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	o := twoJobOptions("forgive+shed-tight")
	o.Placement, o.Steps = placement, 3
	o.Out = t.TempDir()
	f, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if got := runKeys(f.Runs); got != "forgive+shed-tight/1 forgive+idle/1 idle+shed-tight/1" {
		t.Fatalf("runs %s", got)
	}
	checkTwoJobRuns(t, f, o.Steps, o.Out)
	return f, o.Out
}

// countersReader is a hostReader whose counters are given.
type countersReader struct {
	ct  hostapi.Counters
	err error
}

func (c countersReader) Counters(context.Context) (hostapi.Counters, error) { return c.ct, c.err }
func (c countersReader) Steps(context.Context, int) ([]hostapi.StepRecord, error) {
	return nil, nil
}

// An idle job's figures are what its own ranks' hosts sent: the runs
// above hold them to zero, so the sum must see bytes where there are
// some, and only on the job's ranks.
func TestIdleJobCountsWhatItsHostsSent(t *testing.T) {
	sent := func(tx, data uint64) hostReader {
		var ct hostapi.Counters
		ct.Host.TxBytes = tx
		ct.Flows = []hostapi.FlowCounters{{Values: hostapi.FlowStats{DataBytes: data}}, {Values: hostapi.FlowStats{DataBytes: 1}}}
		return countersReader{ct: ct}
	}
	readers := []hostReader{sent(1000, 7), sent(1, 1), sent(20, 3), sent(300, 5)}
	jr, err := idleJob(context.Background(), "b", []int{0, 2}, readers)
	if err != nil {
		t.Fatal(err)
	}
	if jr.Job != "b" || jr.Policy != Idle || !jr.IsIdle() || jr.HostTxBytes != 1020 || jr.DataBytes != 12 {
		t.Errorf("idle job %+v, want job b idle, 1020 bytes sent, 12 data bytes", jr)
	}
	readers[2] = countersReader{err: errors.New("gone")}
	if _, err := idleJob(context.Background(), "b", []int{0, 2}, readers); err == nil || !strings.Contains(err.Error(), "idle rank 2: gone") {
		t.Errorf("a host that cannot be read: %v", err)
	}
}

// Two jobs in network namespaces: every switch and host in its own
// namespace, the same checks as on loopback.
func TestNetnsTwoJobs(t *testing.T) {
	needRoot(t)
	f, _ := realTwoJobs(t, "netns")
	for _, r := range f.Runs {
		if r.Placement != "netns" {
			t.Errorf("%s: placement %q", r.Policy, r.Placement)
		}
	}
}
