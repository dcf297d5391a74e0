package report

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/lab/results"
)

// phaseRun is a run of two steps sampled every millisecond: step 1
// (critical) over [0, 10 ms], step 2 over [10, 20 ms], each with 4 ms of
// compute, a 1 ms tail and the all-reduce; the queue is 1 KiB during a
// step's compute phase and 5 KiB in its all-reduce, and every sample in an
// all-reduce brings one more cut, two CNPs and 100 trimmed uplink bytes.
func phaseRun(policy string, cutsFrom uint64) results.Run {
	r := results.Run{Policy: policy, Seed: 1}
	for k := range 2 {
		t0 := float64(k) * 0.010
		r.Steps = append(r.Steps, results.Step{Step: k + 1, Critical: k == 0, TimeS: 0.010,
			StartS: t0, ComputeEndS: t0 + 0.004, AllReduceFirstS: t0 + 0.005, AllReduceLastS: t0 + 0.006, EndS: t0 + 0.010})
	}
	var cuts, cnps uint64 = cutsFrom, 0
	var trimmed int64
	for i := range 21 {
		t := float64(i) * 0.001
		q := 1024.0
		if m := i % 10; m >= 5 || i > 0 && m == 0 {
			q = 5 * 1024
			cuts, cnps, trimmed = cuts+1, cnps+2, trimmed+100
		}
		r.Occupancy = append(r.Occupancy, results.QueuePoint{TS: t, Bytes: q})
		r.Signals = append(r.Signals, results.SignalPoint{TS: t, RateCuts: cuts, CNPs: cnps, TrimmedUplink: trimmed})
	}
	return r
}

func phaseFile() *results.File {
	return &results.File{Version: Version, Runs: []results.Run{phaseRun("dcqcn", 0), phaseRun("forgive", 7), {Policy: "shed-tight", Seed: 1}}}
}

// Each sample falls in the phase of its instant, with the counts since
// the sample before; runs without samples are left out; a counter that
// went back counts nothing.
func TestPhaseRowsAttributeSamplesToPhases(t *testing.T) {
	f := phaseFile()
	rows := PhaseRows(f, 2)
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 3 phases x 2 sampled policies: %+v", len(rows), rows)
	}
	// Step 2: samples at 10..20 ms: 10..13 in its compute phase (10 ms,
	// its start, brings step 1's last counts), 14 in the tail, 15..20 in
	// its all-reduce.
	want := map[string]PhaseRow{
		PhaseCompute:   {Samples: 4, QueueMean: 2 * 1024, QueueMax: 5 * 1024, RateCuts: 1, CNPs: 2, TrimmedUplink: 100},
		PhaseTail:      {Samples: 1, QueueMean: 1024, QueueMax: 1024},
		PhaseAllReduce: {Samples: 6, QueueMean: 5 * 1024, QueueMax: 5 * 1024, RateCuts: 6, CNPs: 12, TrimmedUplink: 600},
	}
	for _, r := range rows[:3] {
		w := want[r.Phase]
		if r.Policy != "dcqcn" || r.Step != 2 || r.Samples != w.Samples || r.QueueMean != w.QueueMean || r.QueueMax != w.QueueMax ||
			r.RateCuts != w.RateCuts || r.CNPs != w.CNPs || r.TrimmedUplink != w.TrimmedUplink {
			t.Errorf("%s: %+v, want %+v", r.Phase, r, w)
		}
	}
	if rows[0].Phase != PhaseCompute || rows[2].Phase != PhaseAllReduce || rows[3].Policy != "forgive" {
		t.Errorf("rows out of order: %+v", rows)
	}
	if got := sub(3, 5); got != 0 {
		t.Errorf("sub(3, 5) = %d, want 0", got)
	}
	var buf bytes.Buffer
	if err := WritePhaseRows(&buf, rows); err != nil || !strings.Contains(buf.String(), "all-reduce") {
		t.Errorf("table: %v\n%s", err, buf.String())
	}
}

// The plot shows the first non-critical step every sampled run recorded;
// a file without samples has no such plot, and Plots writes it beside the
// others when there is one.
func TestStepPhasesPlot(t *testing.T) {
	f := phaseFile()
	if s := PhaseStep(f); s != 2 {
		t.Fatalf("PhaseStep = %d, want 2, the first non-critical step", s)
	}
	dir := t.TempDir()
	paths, err := Plots(dir, f)
	if err != nil || !strings.HasSuffix(paths[len(paths)-1], StepPhasesPNG) {
		t.Fatalf("Plots: %v, %v", paths, err)
	}
	if data, err := os.ReadFile(filepath.Join(dir, StepPhasesPNG)); err != nil || !bytes.HasPrefix(data, []byte("\x89PNG")) {
		t.Fatalf("%s: %v", StepPhasesPNG, err)
	}
	if err := WriteStepPhasesPNG(filepath.Join(dir, "x.png"), f, 9); !errors.Is(err, ErrNoPhases) {
		t.Errorf("a step not recorded: %v, want ErrNoPhases", err)
	}
	bare := &results.File{Version: Version, Runs: []results.Run{{Policy: "dcqcn", Seed: 1, Steps: f.Runs[0].Steps}}}
	if s := PhaseStep(bare); s != 0 {
		t.Errorf("PhaseStep without samples = %d, want 0", s)
	}
	if err := WriteStepPhasesPNG(filepath.Join(dir, "y.png"), bare, 0); !errors.Is(err, ErrNoPhases) {
		t.Errorf("no samples: %v, want ErrNoPhases", err)
	}
}
