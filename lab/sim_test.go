package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/forgivedrv"
	"github.com/forgive-emu/forgive/lab/fabric"
	"github.com/forgive-emu/forgive/lab/results"
	"github.com/forgive-emu/forgive/lab/topo"
	"github.com/forgive-emu/forgive/trimswitchdrv"
	"github.com/forgive-emu/forgive/workload"
)

// simOptions is a small lab in the simulator: 4 ranks on the default
// leaf-spine, 4 steps, a small workload with the burst on step 2.
func simOptions(policies ...string) Options {
	return Options{Placement: PlacementSim, Ranks: 4, Steps: 4, Policies: policies,
		Workload: WorkloadOptions{GradientBytes: 256 << 10, TPBytes: 64 << 10, PPBytes: 64 << 10,
			BurstBytes: 64 << 10, BurstSteps: []int{2}, Critical: []int{1}}}
}

// congestedYAML is a 4-rank leaf-spine at 4:1 with one-BDP buffers:
// the small workload trims there, so forgiveness has something to do.
const congestedYAML = "name: congested\nkind: leaf-spine\nleaves: 2\nhosts_per_leaf: 2\nspines: 1\noversubscription: \"4:1\"\n" +
	"switch: {buffer_bdp: 1}\n"

// congestedTopology writes congestedYAML in the test's directory and
// returns the file's path.
func congestedTopology(t *testing.T) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "congested.yaml")
	if err := os.WriteFile(file, []byte(congestedYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}

// Every policy runs end to end in the simulator, through the engines
// built from the daemons' configurations: the FORGIVE invariants hold at
// every rank on every step, every untouched gradient element is the exact
// sum, and every tensor, pipeline and burst byte arrives as sent.
func TestSimLabEveryPolicy(t *testing.T) {
	if raceDetector {
		// As TestFidelitySeedRelations: deterministic simulator runs,
		// whose figures the race detector does not change, and whose
		// engines the other simulator tests run under it. Here every
		// policy took 177 s of the lab package's wall time under -race at
		// a load average of about 20 (commit 78b9baa); .ci/run runs this
		// test without -race, after the README's test command.
		t.Skip("deterministic simulator runs of every policy, checked without -race (.ci/run): under -race they took a third of the package's time")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	o := simOptions("all")
	o.Topology, o.Ranks = congestedTopology(t), 0
	o.Workload.GradientBytes = 512 << 10
	f, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if f.Placement != PlacementSim || f.Scale != 1 || len(f.Runs) != len(Policies()) {
		t.Fatalf("placement %q scale %v, %d runs", f.Placement, f.Scale, len(f.Runs))
	}
	byName := map[string]results.Run{}
	for _, r := range f.Runs {
		byName[r.Policy] = r
		switch {
		case r.Placement != PlacementSim || r.Scale != 1:
			t.Errorf("%s: placement %q scale %v", r.Policy, r.Placement, r.Scale)
		case !r.BudgetInvariantHeld || !r.NonGradientBytesExact || !r.GradientSumsExact:
			t.Errorf("%s: invariant %v, non-gradient exact %v, sums exact %v", r.Policy, r.BudgetInvariantHeld, r.NonGradientBytesExact, r.GradientSumsExact)
		case r.TrainingTimeS <= 0 || len(r.Steps) != 4 || r.ElementsTested <= 0 || r.DataBytes < r.GradientBytes/2:
			t.Errorf("%s: time %v over %d steps, %d elements tested, %d data bytes", r.Policy, r.TrainingTimeS, len(r.Steps), r.ElementsTested, r.DataBytes)
		case r.SimEvents == 0 || r.SimPacketHops == 0 || len(r.Rate) == 0 || len(r.Occupancy) == 0:
			t.Errorf("%s: %d events, %d hops, %d rate and %d queue samples", r.Policy, r.SimEvents, r.SimPacketHops, len(r.Rate), len(r.Occupancy))
		}
		for _, s := range r.Steps {
			// forgiven <= budget, summed over the ranks, on every step.
			if !s.Invariant || s.Forgiven > s.Budget {
				t.Errorf("%s step %d: invariant %v, forgave %d of a budget of %d", r.Policy, s.Step, s.Invariant, s.Forgiven, s.Budget)
			}
		}
		if pol := policyNamed(t, r.Policy); (!pol.Forgive || pol.P == 0) && r.ForgivenBytes != 0 {
			t.Errorf("%s forgave %d bytes", r.Policy, r.ForgivenBytes)
		}
		// Every rank opened every step before its first byte, and a
		// policy that promises identical replicas keeps them.
		if pol := policyNamed(t, r.Policy); r.UnbudgetedBytes != 0 || pol.ReplicasIdentical() != slices.Contains(r.Checks, checkReplicas) ||
			pol.ReplicasIdentical() && (!r.ReplicasIdentical || r.ReplicaMismatches != 0) || !r.ChecksHeld() {
			t.Errorf("%s: %d unbudgeted bytes, checks %v, replicas identical %v (%d elements differ)", r.Policy, r.UnbudgetedBytes, r.Checks, r.ReplicasIdentical, r.ReplicaMismatches)
		}
		checkFifths(t, r)
	}
	// The trim-level accounting sees forgive's trims, and nothing of the
	// policies that never ask the ledger.
	if fg := byName["forgive"]; fg.FirstFifthTrimmedBytes+fg.LastFifthTrimmedBytes == 0 || fg.FirstFifthForgivenBytes+fg.LastFifthForgivenBytes == 0 ||
		fg.TrafficFirstFifthTrimmedBytes == 0 {
		t.Errorf("forgive: fifths %+v", fg)
	}
	for _, name := range []string{"dcqcn", "shed-tight", "trim-nocc", "gbn"} {
		if r := byName[name]; r.FirstFifthTrimmedBytes != 0 || r.LastFifthTrimmedBytes != 0 {
			t.Errorf("%s: fifths %d, %d trimmed bytes without a ledger", name, r.FirstFifthTrimmedBytes, r.LastFifthTrimmedBytes)
		}
	}
	// The fractions are the report's, as on the real placements.
	if sl := byName["shed-loose"]; sl.GradientBytesGivenUpFrac != float64(sl.ShedBytes)/float64(sl.GradientBytes) {
		t.Errorf("shed-loose gave up %v, shed %d of %d", sl.GradientBytesGivenUpFrac, sl.ShedBytes, sl.GradientBytes)
	}
	if fg := byName["forgive"]; fg.ForgivenBytes == 0 || fg.GradientBytesGivenUpFrac != float64(fg.ForgivenBytes)/float64(fg.GradientBytes) {
		t.Errorf("forgive forgave %d of %d bytes, fraction %v", fg.ForgivenBytes, fg.GradientBytes, fg.GradientBytesGivenUpFrac)
	}
	if nc := byName["trim-nocc"]; nc.TrimmedBytes == 0 || nc.TrimmedBytesFrac != float64(nc.TrimmedBytes)/float64(nc.DataBytes) {
		t.Errorf("trim-nocc trimmed %d of %d bytes, fraction %v", nc.TrimmedBytes, nc.DataBytes, nc.TrimmedBytesFrac)
	}
	if byName["shed-loose"].ShedBytes == 0 || byName["dcqcn"].ShedBytes != 0 {
		t.Errorf("shed-loose shed %d bytes, dcqcn %d", byName["shed-loose"].ShedBytes, byName["dcqcn"].ShedBytes)
	}
	// The exemption's counterfactual rules exempt as the engine's does.
	if byName["forgive-linerate"].ExemptFlows == 0 || byName["forgive-nocut-nscc"].ExemptFlows == 0 {
		t.Errorf("exempt flows: forgive-linerate %d, forgive-nocut-nscc %d", byName["forgive-linerate"].ExemptFlows, byName["forgive-nocut-nscc"].ExemptFlows)
	}
	if byName["forgive"].ExemptFlows == 0 || byName["forgive-noexempt"].ExemptFlows != 0 || byName["dcqcn"].ExemptFlows != 0 {
		t.Errorf("exempt flows: forgive %d, forgive-noexempt %d, dcqcn %d",
			byName["forgive"].ExemptFlows, byName["forgive-noexempt"].ExemptFlows, byName["dcqcn"].ExemptFlows)
	}
	// The gather policies: forgive forgives finished values and the
	// replicas drift apart; forgive-phase forgives none, repairs them and
	// keeps its senders exempt; forgive-owner forgives only the owners'
	// messages and keeps the replicas identical.
	fg, ph, ow := byName["forgive"], byName["forgive-phase"], byName["forgive-owner"]
	if fg.GatheredForgivenBytes == 0 || fg.ReplicaMismatches == 0 || fg.GatherRepairs != 0 {
		t.Errorf("forgive: %d gathered bytes forgiven, %d elements differ between replicas, %d gather repairs", fg.GatheredForgivenBytes, fg.ReplicaMismatches, fg.GatherRepairs)
	}
	if ph.GatheredForgivenBytes != 0 || ph.GatherRepairs == 0 || ph.ExemptFlows == 0 || ph.Gather != "repair" {
		t.Errorf("forgive-phase: %d gathered bytes forgiven, %d gather repairs, %d exempt flows, gather %q",
			ph.GatheredForgivenBytes, ph.GatherRepairs, ph.ExemptFlows, ph.Gather)
	}
	if ow.GatherRepairs == 0 || ow.ExemptFlows == 0 || ow.Gather != "owner" {
		t.Errorf("forgive-owner: %d gather repairs, %d exempt flows, gather %q", ow.GatherRepairs, ow.ExemptFlows, ow.Gather)
	}
	if byName["trim-nocc"].RateCuts != 0 || byName["dcqcn"].RateCuts == 0 {
		t.Errorf("rate cuts: trim-nocc %d, dcqcn %d", byName["trim-nocc"].RateCuts, byName["dcqcn"].RateCuts)
	}
	// NSCC's window cuts count as rate cuts; its FORGIVE policies exempt
	// as DCQCN's do, and forgive under NSCC as under DCQCN.
	if byName["nscc"].RateCuts == 0 || byName["forgive-nscc"].ExemptFlows == 0 || byName["forgive-noexempt-nscc"].ExemptFlows != 0 ||
		byName["forgive-nscc"].ForgivenBytes == 0 || byName["shed-tight-nscc"].ShedBytes == 0 {
		t.Errorf("NSCC: nscc %d cuts, forgive-nscc %d exempt flows and %d bytes forgiven, forgive-noexempt-nscc %d exempt flows, shed-tight-nscc %d bytes shed",
			byName["nscc"].RateCuts, byName["forgive-nscc"].ExemptFlows, byName["forgive-nscc"].ForgivenBytes,
			byName["forgive-noexempt-nscc"].ExemptFlows, byName["shed-tight-nscc"].ShedBytes)
	}
}

// checkFifths checks a run's trim-level accounting against itself: the
// run's totals are its steps' sums, each fifth forgave at most what it
// trimmed, the shares are the quotients, and the two fifths together
// forgave no more than the run did.
func checkFifths(t *testing.T, r results.Run) {
	t.Helper()
	var ft, ff, lt, lf, tft, tff, tlt, tlf int64
	for _, s := range r.Steps {
		if s.TrafficFirstFifthForgiven > s.TrafficFirstFifthTrimmed || s.TrafficLastFifthForgiven > s.TrafficLastFifthTrimmed {
			t.Errorf("%s step %d: traffic fifths %d/%d, %d/%d", r.Policy, s.Step, s.TrafficFirstFifthForgiven, s.TrafficFirstFifthTrimmed, s.TrafficLastFifthForgiven, s.TrafficLastFifthTrimmed)
		}
		tft, tff, tlt, tlf = tft+s.TrafficFirstFifthTrimmed, tff+s.TrafficFirstFifthForgiven, tlt+s.TrafficLastFifthTrimmed, tlf+s.TrafficLastFifthForgiven
		if s.FirstFifthForgiven > s.FirstFifthTrimmed || s.LastFifthForgiven > s.LastFifthTrimmed || s.FirstFifthForgiven < 0 || s.LastFifthForgiven < 0 {
			t.Errorf("%s step %d: fifths %d/%d, %d/%d", r.Policy, s.Step, s.FirstFifthForgiven, s.FirstFifthTrimmed, s.LastFifthForgiven, s.LastFifthTrimmed)
		}
		ft, ff, lt, lf = ft+s.FirstFifthTrimmed, ff+s.FirstFifthForgiven, lt+s.LastFifthTrimmed, lf+s.LastFifthForgiven
	}
	if ft != r.FirstFifthTrimmedBytes || ff != r.FirstFifthForgivenBytes || lt != r.LastFifthTrimmedBytes || lf != r.LastFifthForgivenBytes {
		t.Errorf("%s: run fifths %d/%d, %d/%d; steps sum to %d/%d, %d/%d", r.Policy,
			r.FirstFifthForgivenBytes, r.FirstFifthTrimmedBytes, r.LastFifthForgivenBytes, r.LastFifthTrimmedBytes, ff, ft, lf, lt)
	}
	if tft != r.TrafficFirstFifthTrimmedBytes || tff != r.TrafficFirstFifthForgivenBytes || tlt != r.TrafficLastFifthTrimmedBytes || tlf != r.TrafficLastFifthForgivenBytes {
		t.Errorf("%s: run traffic fifths differ from the steps' sums", r.Policy)
	}
	if tff+tlf > r.ForgivenBytes {
		t.Errorf("%s: the traffic fifths forgave %d bytes, the run %d", r.Policy, tff+tlf, r.ForgivenBytes)
	}
	if ff+lf > r.ForgivenBytes {
		t.Errorf("%s: the fifths forgave %d bytes, the run %d", r.Policy, ff+lf, r.ForgivenBytes)
	}
	if ft > 0 && r.FirstFifthForgivenFrac != float64(ff)/float64(ft) || lt > 0 && r.LastFifthForgivenFrac != float64(lf)/float64(lt) {
		t.Errorf("%s: shares %v, %v", r.Policy, r.FirstFifthForgivenFrac, r.LastFifthForgivenFrac)
	}
	checkDecisions(t, r)
}

// checkDecisions checks the run's ledger verdicts and its trims by port
// role: every counted trim was forgiven or refused for exactly one
// reason, and the roles add up to the switches' total.
func checkDecisions(t *testing.T, r results.Run) {
	t.Helper()
	d := r.Decisions
	if d.Trims != d.Forgives+d.VestingRefusals+d.BudgetRefusals+d.DrawRefusals {
		t.Errorf("%s: %d trims, but %d forgiven + %d vesting + %d budget + %d draw refusals", r.Policy,
			d.Trims, d.Forgives, d.VestingRefusals, d.BudgetRefusals, d.DrawRefusals)
	}
	if r.ForgivenBytes > 0 && d.Forgives == 0 {
		t.Errorf("%s: %d bytes forgiven by no forgiving verdict", r.Policy, r.ForgivenBytes)
	}
	var roles int64
	for role, n := range r.TrimmedBytesByRole {
		if n <= 0 {
			t.Errorf("%s: role %s listed with %d trimmed bytes", r.Policy, role, n)
		}
		roles += n
	}
	if roles != r.TrimmedBytes {
		t.Errorf("%s: trims by role %v sum to %d, the run trimmed %d", r.Policy, r.TrimmedBytesByRole, roles, r.TrimmedBytes)
	}
}

func policyNamed(t *testing.T, name string) Policy {
	t.Helper()
	ps, err := LookupPolicies([]string{name})
	if err != nil {
		t.Fatal(err)
	}
	return ps[0]
}

// wallFree is results.json without the fields that depend on the machine
// and the moment.
func wallFree(t *testing.T, f *results.File) []byte {
	t.Helper()
	c := *f
	c.Created, c.Wall = time.Time{}, results.Wall{}
	b, err := json.MarshalIndent(&c, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The same inputs give the same results.json, byte for byte, apart from
// the wall-clock fields: in the simulator nothing depends on goroutine
// timing or the real clock (run with -race too).
// Trims are attributed to the port that made them: on the 4:1 leaf-spine
// the uplinks trim, on a star (no uplinks) the host ports do.
func TestSimTrimsByPortRole(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for _, tc := range []struct {
		topology string
		ranks    int
		role     string
	}{{congestedTopology(t), 0, "uplink"}, {"star-8", 8, "host"}} {
		o := simOptions("trim-nocc")
		o.Topology, o.Ranks, o.Steps = tc.topology, tc.ranks, 2
		f, err := Run(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		r := f.Runs[0]
		checkDecisions(t, r)
		if r.TrimmedBytes == 0 || r.TrimmedBytesByRole[tc.role] == 0 {
			t.Errorf("%s: trimmed %d, by role %v: want trims at the %s ports", tc.topology, r.TrimmedBytes, r.TrimmedBytesByRole, tc.role)
		}
	}
}

// The model-parallel schedule reaches the workload and the results: with
// the exchanges during the compute phase a step takes less than its
// compute phase plus the tensor-parallel exchange, which it cannot after
// the phase.
func TestSimModelParallelSchedule(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	times := map[string]float64{}
	for _, mp := range []workload.ModelParallel{workload.AfterCompute, workload.WithCompute} {
		o := simOptions("dcqcn")
		o.Workload.ModelParallel = mp
		o.Workload.Compute = 2 * time.Millisecond
		o.Workload.TPBytes = 1 << 20
		f, err := Run(ctx, o)
		if err != nil {
			t.Fatal(err)
		}
		r := f.Runs[0]
		if f.ModelParallel != string(mp) || f.Entropy != "single" || !r.BudgetInvariantHeld || !r.NonGradientBytesExact || !r.GradientSumsExact {
			t.Fatalf("%s: file says %q; invariant %v, exact %v %v", mp, f.ModelParallel, r.BudgetInvariantHeld, r.NonGradientBytesExact, r.GradientSumsExact)
		}
		times[string(mp)] = r.TrainingTimeS
	}
	if times["with-compute"] >= times["after-compute"] {
		t.Errorf("training time with the exchanges during compute %v s, after it %v s", times["with-compute"], times["after-compute"])
	}
}

func TestSimLabIsDeterministic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	o := simOptions("dcqcn", "forgive")
	o.Seeds = 2
	a, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	ja, jb := wallFree(t, a), wallFree(t, b)
	if !bytes.Equal(ja, jb) {
		t.Fatalf("two runs with the same inputs differ:\n%s\n---\n%s", ja, jb)
	}
	if len(a.Wall.Runs) != 4 || a.Wall.Seconds <= 0 {
		t.Fatalf("wall: %+v", a.Wall)
	}
	// A different seed is a different run.
	if a.Runs[0].SimEvents == a.Runs[2].SimEvents && a.Runs[0].TrainingTimeS == a.Runs[2].TrainingTimeS {
		t.Fatalf("seeds 1 and 2 gave the same run: %d events, %v s", a.Runs[0].SimEvents, a.Runs[0].TrainingTimeS)
	}
}

// A configuration a daemon would refuse is refused by the sim placement,
// with the daemon's own error; so is a fabric whose addresses do not
// connect.
func TestSimRefusesWhatTheDaemonsRefuse(t *testing.T) {
	prof, err := topo.FindProfile("loopback")
	if err != nil {
		t.Fatal(err)
	}
	tp, err := topo.FindTopology("leaf-spine-2x4")
	if err != nil {
		t.Fatal(err)
	}
	place := func() *topo.Plan {
		plan, err := topo.Place(tp, prof, topo.PlaceOptions{Net: simNet, Dir: simDir, Seed: 1, Host: topo.DefaultHostPolicy()})
		if err != nil {
			t.Fatal(err)
		}
		return plan
	}
	if _, err := fabric.BuildSim(place(), false); err != nil {
		t.Fatalf("the plan as placed: %v", err)
	}
	edit := func(yaml []byte, old, new string) []byte {
		t.Helper()
		if !bytes.Contains(yaml, []byte(old)) {
			t.Fatalf("no %q in\n%s", old, yaml)
		}
		return bytes.Replace(yaml, []byte(old), []byte(new), 1)
	}
	cases := map[string]struct {
		mutate func(*topo.Plan)
		want   error
	}{
		"host: unknown congestion control": {func(p *topo.Plan) { p.Hosts[2].ConfigYAML = edit(p.Hosts[2].ConfigYAML, "cc: dcqcn", "cc: reno") }, forgivedrv.ErrConfig},
		"host: unknown key":                {func(p *topo.Plan) { p.Hosts[0].ConfigYAML = append(p.Hosts[0].ConfigYAML, "colour: blue\n"...) }, forgivedrv.ErrConfig},
		"switch: route to no port": {func(p *topo.Plan) {
			p.Switches[0].ConfigYAML = edit(p.Switches[0].ConfigYAML, "default_route: [up1]", "default_route: [up9]")
		}, trimswitchdrv.ErrConfig},
		"host cabled to a port that sends elsewhere": {func(p *topo.Plan) {
			p.Hosts[1].ConfigYAML = edit(p.Hosts[1].ConfigYAML, "switch: "+p.Hosts[1].SwitchAddr, "switch: "+p.Hosts[3].SwitchAddr)
		}, fabric.ErrSimWiring},
	}
	for name, c := range cases {
		plan := place()
		c.mutate(plan)
		if _, err := fabric.BuildSim(plan, false); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}

// A cable that is down for good fails the step in virtual time: the
// senders give up after the profile's fail_after, the completions carry
// the error, and the run stops naming the step, the rank and the work it
// waited for.
func TestSimDeadLinkFailsTheStep(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cut.yaml")
	topoYAML := "name: cut\nkind: leaf-spine\nleaves: 2\nhosts_per_leaf: 2\nspines: 1\noversubscription: \"2:1\"\n" +
		"faults:\n  - {switch: leaf1, port: up1, down_from: 0s, down_until: 1000h}\n"
	if err := os.WriteFile(file, []byte(topoYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	o := simOptions("dcqcn")
	o.Topology, o.Ranks = file, 0
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, err := Run(ctx, o)
	if !errors.Is(err, workload.ErrStep) {
		t.Fatalf("Run over a cut cable: %v, want workload.ErrStep", err)
	}
	t.Logf("%v", err)
	for _, want := range []string{"step 1", "rank", "outstanding"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// --tensor-parallel local keeps the tensor-parallel exchanges off the
// fabric: every payload byte the tensor pairs sent on the network is
// missing from the wire, and nothing else is; no step records a
// tensor-parallel completion; the results and the sweep say so, and the
// runs go through the worker processes (--jobs 2) with the option intact.
// The FORGIVE invariants and the byte checks hold.
func TestSimTensorParallelOffTheNetwork(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	o := simOptions("dcqcn", "forgive")
	onNet, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	o.Workload.TensorParallel, o.Jobs = workload.TPLocal, 2
	local, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if onNet.TensorParallel != "" || onNet.Sweep.Options.TensorParallel != "" {
		t.Errorf("network run records tensor_parallel %q, sweep %q: want it absent", onNet.TensorParallel, onNet.Sweep.Options.TensorParallel)
	}
	if local.TensorParallel != "local" || local.Sweep.Options.TensorParallel != "local" || local.Sweep.ID == onNet.Sweep.ID {
		t.Errorf("local run records tensor_parallel %q, sweep %q, id %s (network's %s)", local.TensorParallel, local.Sweep.Options.TensorParallel, local.Sweep.ID, onNet.Sweep.ID)
	}
	if local.Sweep.Options.TPBytes != o.Workload.TPBytes {
		t.Errorf("local sweep records %d tensor-parallel bytes, want the job's %d", local.Sweep.Options.TPBytes, o.Workload.TPBytes)
	}
	tpWire := int64(local.Ranks * o.Steps * o.Workload.TPBytes) // every rank sends its partner TPBytes a step
	for i, l := range local.Runs {
		n := onNet.Runs[i]
		if l.Policy != n.Policy || !l.BudgetInvariantHeld || !l.NonGradientBytesExact || !l.GradientSumsExact || !l.MessageAccountingHeld {
			t.Fatalf("%s: invariant %v, exact %v %v, accounting %v", l.Policy, l.BudgetInvariantHeld, l.NonGradientBytesExact, l.GradientSumsExact, l.MessageAccountingHeld)
		}
		if got := (n.DataBytes - n.RetxBytes) - (l.DataBytes - l.RetxBytes); got != tpWire {
			t.Errorf("%s: first transmissions fell by %d bytes off the network, want the tensor pairs' %d", l.Policy, got, tpWire)
		}
		if l.TPCompletionMedianS != 0 || n.TPCompletionMedianS == 0 {
			t.Errorf("%s: tensor-parallel median %v s off the network, %v s on it", l.Policy, l.TPCompletionMedianS, n.TPCompletionMedianS)
		}
		for _, s := range l.Steps {
			if len(s.TPS) != 0 {
				t.Fatalf("%s step %d: tensor-parallel completions %v off the network", l.Policy, s.Step, s.TPS)
			}
		}
	}
}

// --workers runs each simulated run on several goroutines to the same
// results: the file is byte for byte the one-worker file (wall times
// aside), the recorder's samples of the bottleneck queue included (that
// queue is on a leaf, in the hosts' process here; sim's
// TestParallelMatchesSerial samples every queue); and the fabric does
// split (hosts and leaves, the spine: the lab's host links have no delay).
func TestSimLabOnWorkersIsTheSame(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	o := simOptions("forgive")
	o.Topology, o.Ranks, o.Steps, o.Profile = congestedTopology(t), 0, 2, "seed-400g-paper"
	one, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	o.Workers = 3
	p, err := check(o)
	if err != nil {
		t.Fatal(err)
	}
	f, err := p.openSim(p.policies[0], 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Loop.RunUntil(func() bool { return true }, 0); err != nil || f.Loop.Workers() < 2 {
		t.Fatalf("the lab's fabric runs on %d workers (%v), want several", f.Loop.Workers(), err)
	}
	many, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if a, b := wallFree(t, one), wallFree(t, many); !bytes.Equal(a, b) {
		t.Fatalf("one worker and three differ:\n%s\n---\n%s", a, b)
	}
	if len(one.Runs) != 1 || len(one.Runs[0].Occupancy) == 0 {
		t.Fatalf("%d runs, no queue samples: the comparison does not cover the sampler", len(one.Runs))
	}
	o.Placement = "loopback"
	if _, err := check(o); !errors.Is(err, ErrInput) {
		t.Errorf("--workers 3 on the loopback placement: %v, want ErrInput", err)
	}
}
