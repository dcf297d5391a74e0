package report

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/lab/results"
)

// twoJobFile is a sweep of two jobs with numbers worked out by hand: over
// seeds 1 and 2, job b (dcqcn) beside forgive takes 25 % and 50 % longer
// than alone, its all-reduce p99 doubles and its TP median rises 10 %;
// job a (forgive) takes 0 % and +10 %.
func twoJobFile() *results.File {
	job := func(name, policy string, timeS, p99, tp float64, rtos uint64) results.JobRun {
		return results.JobRun{Job: name, Policy: policy, TrainingTimeS: timeS, AllReduceP99S: p99, TPMedianS: tp, RTOs: rtos,
			BudgetInvariantHeld: true, ChecksHeld: true}
	}
	idle := func(name string) results.JobRun {
		return results.JobRun{Job: name, Policy: "idle", BudgetInvariantHeld: true, ChecksHeld: true}
	}
	run := func(policy string, seed uint64, a, b results.JobRun) results.Run {
		return results.Run{Policy: policy, Seed: seed, TrainingTimeS: a.TrainingTimeS + b.TrainingTimeS, Jobs: []results.JobRun{a, b},
			BudgetInvariantHeld: true, NonGradientBytesExact: true, GradientSumsExact: true}
	}
	return &results.File{
		Version: 1, Topology: "two-jobs-2x4-4to1", Ranks: 8, Steps: 20, Seeds: []uint64{1, 2},
		Policies: []string{"forgive+dcqcn", "forgive+idle", "idle+dcqcn"},
		Runs: []results.Run{
			run("forgive+dcqcn", 1, job("a", "forgive", 10, 1, 0.5, 3), job("b", "dcqcn", 25, 4, 1.1, 300)),
			run("forgive+idle", 1, job("a", "forgive", 10, 1, 0.5, 1), idle("b")),
			run("idle+dcqcn", 1, idle("a"), job("b", "dcqcn", 20, 2, 1, 10)),
			run("idle+dcqcn", 2, idle("a"), job("b", "dcqcn", 20, 2, 1, 30)),
			run("forgive+idle", 2, job("a", "forgive", 10, 1, 0.5, 1), idle("b")),
			run("forgive+dcqcn", 2, job("a", "forgive", 11, 1.5, 0.5, 5), job("b", "dcqcn", 30, 4, 1.1, 500)),
		},
	}
}

func TestTwoJobsRows(t *testing.T) {
	rows := TwoJobs(twoJobFile())
	if len(rows) != 2 {
		t.Fatalf("%d rows, want one per job of forgive+dcqcn", len(rows))
	}
	b := rows[1]
	if b.Job != "b" || b.Policy != "dcqcn" || b.Alone != "idle+dcqcn" || !slices.Equal(b.Seeds, []uint64{1, 2}) {
		t.Fatalf("row b: %+v", b)
	}
	near := func(got, want []float64) bool {
		if len(got) != len(want) {
			return false
		}
		for i := range got {
			if d := got[i] - want[i]; d > 1e-12 || d < -1e-12 {
				return false
			}
		}
		return true
	}
	if !near(b.TimeChange, []float64{0.25, 0.5}) || !near(b.AllReduceP99Change, []float64{1, 1}) || !near(b.TPMedianChange, []float64{0.1, 0.1}) {
		t.Errorf("job b changes: time %v, p99 %v, tp %v", b.TimeChange, b.AllReduceP99Change, b.TPMedianChange)
	}
	if b.TimeBesideS != 27.5 || b.TimeAloneS != 20 || b.RTOsBeside != 400 || b.RTOsAlone != 20 || !b.ChecksHeld {
		t.Errorf("job b means: %+v", b)
	}
	if a := rows[0]; !near(a.TimeChange, []float64{0, 0.1}) || !near(a.AllReduceP99Change, []float64{0, 0.5}) {
		t.Errorf("job a changes: %v, %v", a.TimeChange, a.AllReduceP99Change)
	}
}

func TestTwoJobsTable(t *testing.T) {
	f := twoJobFile()
	var b bytes.Buffer
	if err := Table(&b, f); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	i := strings.Index(out, "two jobs: each job beside the other")
	if i < 0 {
		t.Fatalf("no two-job section:\n%s", out)
	}
	section := out[i:]
	cells := func(job string) []string {
		for _, line := range strings.Split(section, "\n") {
			if strings.HasPrefix(line, "forgive+dcqcn  "+job+" ") {
				return regexp.MustCompile(`\s{2,}`).Split(strings.TrimSpace(line), -1)
			}
		}
		return nil
	}
	for job, want := range map[string][]string{
		"a": {"forgive+dcqcn", "a", "forgive", "10.5 / 10.0", "+5.0 (0.0..+10.0)", "+25.0 (0.0..+50.0)", "0.0", "4 / 1", "yes"},
		"b": {"forgive+dcqcn", "b", "dcqcn", "27.5 / 20.0", "+37.5 (+25.0..+50.0)", "+100", "+10.0", "400 / 20", "yes"},
	} {
		if got := cells(job); !slices.Equal(got, want) {
			t.Errorf("job %s: cells %q, want %q", job, got, want)
		}
	}
	// A job whose checks failed says so.
	f.Runs[0].Jobs[1].BudgetInvariantHeld = false
	b.Reset()
	if err := Table(&b, f); err != nil {
		t.Fatal(err)
	}
	section = b.String()[strings.Index(b.String(), "two jobs: each job"):]
	if got := cells("b"); len(got) != 9 || got[8] != "NO" {
		t.Errorf("a failed invariant does not show: %q", got)
	}
	// A file of one job has no such section.
	b.Reset()
	if err := Table(&b, handFile()); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "two jobs") {
		t.Error("a file of one job prints a two-job section")
	}
}

func TestTwoJobsPlot(t *testing.T) {
	dir := t.TempDir()
	written, err := Plots(dir, twoJobFile())
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, TwoJobsPNG)
	if !slices.Contains(written, path) {
		t.Fatalf("wrote %v, no %s", written, TwoJobsPNG)
	}
	if data, err := os.ReadFile(path); err != nil || !bytes.HasPrefix(data, []byte("\x89PNG")) {
		t.Fatalf("%s: %d bytes, %v", path, len(data), err)
	}
	// One job: no two-job plot.
	dir = t.TempDir()
	if _, err := Plots(dir, handFile()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, TwoJobsPNG)); !os.IsNotExist(err) {
		t.Errorf("a file of one job has a two-job plot: %v", err)
	}
}
