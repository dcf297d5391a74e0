package lab

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/lab/launch"
	"github.com/forgive-emu/forgive/lab/report"
)

// A short lab on real processes: 4 ranks, 4 steps, two policies. Every
// field the results promise is there and the invariants hold.
func TestShortLab(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 8 processes for two runs; skipped with -short")
	}
	out := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, err := Run(ctx, Options{Ranks: 4, Steps: 4, Policies: []string{"dcqcn", "forgive"}, Out: out,
		Workload: WorkloadOptions{GradientBytes: 512 << 10, Critical: []int{1}}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := report.ReadJSON(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Runs) != 2 || f.Runs[0].Policy != "dcqcn" || f.Runs[1].Policy != "forgive" || f.Ranks != 4 || f.Steps != 4 {
		t.Fatalf("results: %d runs %+v", len(f.Runs), f.Policies)
	}
	for _, r := range f.Runs {
		switch {
		case r.TrainingTimeS <= 0 || len(r.Steps) != 4:
			t.Errorf("%s: training time %v over %d steps", r.Policy, r.TrainingTimeS, len(r.Steps))
		case !r.BudgetInvariantHeld || !r.NonGradientBytesExact || !r.GradientSumsExact:
			t.Errorf("%s: invariant %v, non-gradient exact %v, sums exact %v", r.Policy, r.BudgetInvariantHeld, r.NonGradientBytesExact, r.GradientSumsExact)
		case r.AllReduceMedianCriticalS <= 0 || r.AllReduceMedianNonCriticalS <= 0:
			t.Errorf("%s: all-reduce medians %v / %v", r.Policy, r.AllReduceMedianCriticalS, r.AllReduceMedianNonCriticalS)
		case r.DataBytes <= 0 || r.GradientBytes <= 0 || r.ElementsTested <= 0:
			t.Errorf("%s: data %d gradient %d tested %d", r.Policy, r.DataBytes, r.GradientBytes, r.ElementsTested)
		case r.Profile != "loopback" || r.Topology != "leaf-spine-2x4":
			t.Errorf("%s: profile %q topology %q", r.Policy, r.Profile, r.Topology)
		}
		if r.ForgivenBytes > 0 && r.Policy == "dcqcn" {
			t.Errorf("dcqcn forgave %d bytes", r.ForgivenBytes)
		}
		// The queue samples come from the switch's /queues, the socket
		// drops from /proc/net/udp: a loopback run has both.
		if len(r.Occupancy) == 0 {
			t.Errorf("%s: no queue samples", r.Policy)
		}
		if r.SocketDrops == nil {
			t.Errorf("%s: no socket_drops on loopback", r.Policy)
		} else {
			t.Logf("%s: %d socket drops", r.Policy, *r.SocketDrops)
		}
		checkDecisions(t, r)
	}
	if f.Runs[1].ExemptFlows == 0 {
		t.Error("forgive: no sender was ever exempt")
	}
	if len(f.Summary) != 2 || f.Summary[0].Policy != "dcqcn" {
		t.Fatalf("summary %+v", f.Summary)
	}
	for _, name := range []string{"results.csv", report.StepTimePNG, report.AllReduceCDFPNG} {
		if st, err := os.Stat(filepath.Join(out, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// "A bad topology or profile names the field and exits non-zero before
// starting anything."
func TestBadInputStartsNothing(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("kind: leaf-spine\nname: x\nleaves: 2\nhosts_per_leaf: 4\nspines: 1\noversubscription: two\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := map[string]Options{
		"oversubscription": {Topology: bad},
		"nonexistent":      {Profile: "nonexistent"},
		"unknown policy":   {Policies: []string{"tcp-reno"}},
		"--ranks":          {Ranks: 7},
	}
	for want, o := range cases {
		o.BinDir = "/nonexistent" // finding binaries comes after validation
		_, err := Run(context.Background(), o)
		if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want ErrInput naming %q", want, err, want)
		}
	}
}

// A daemon that dies mid-run stops the run with an error naming it, and
// the rest of the fabric is stopped.
func TestDeadDaemonStopsTheRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real processes; skipped with -short")
	}
	bins, err := launch.Binaries(context.Background(), "", "forgived", "trimswitch")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	// host3's daemon kills itself 1.5 s after it starts.
	script := "#!/bin/sh\ncase \"$*\" in *host3*) ( sleep 1.5; kill -9 $$ ) & ;; esac\nexec " + bins["forgived"] + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(dir, "forgived"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(bins["trimswitch"], filepath.Join(dir, "trimswitch")); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	start := time.Now()
	_, err = Run(ctx, Options{Ranks: 4, Steps: 50, Policies: []string{"dcqcn"}, BinDir: dir})
	if err == nil || !strings.Contains(err.Error(), "host3") {
		t.Fatalf("Run = %v, want an error naming host3", err)
	}
	t.Logf("run stopped after %v: %v", time.Since(start).Round(time.Millisecond), err)
}
