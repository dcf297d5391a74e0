package lab

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
)

// One lab scenario, on the congested fabric so that FORGIVE forgives and
// the shedding baseline sheds, runs with payload bytes and without them:
// every counter, completion and time is the same, and only the checks
// that need bytes differ, as results.json says.
func TestSimPayloadFreeRunsAsWithPayloads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	o := simOptions("dcqcn", "shed-tight", "forgive")
	o.Topology, o.Ranks = congestedTopology(t), 0
	o.Workload.GradientBytes = 512 << 10
	o.PayloadFree = PayloadsOff
	with, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	o.PayloadFree = PayloadsOn
	without, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	var forgiven, shed int64
	for i, r := range with.Runs {
		forgiven, shed = forgiven+r.ForgivenBytes, shed+r.ShedBytes
		if r.PayloadFree || !r.GradientSumsExact || !r.NonGradientBytesExact || !r.MessageAccountingHeld || !r.BudgetInvariantHeld ||
			!slices.Equal(r.Checks, withReplicas(r.Policy, checkBudget, checkCompletion, checkAccounting, checkInTime, checkSums, checkNonGrad)) {
			t.Fatalf("run %d with payloads: payload-free %v, checks %v, sums %v, non-gradient %v, accounting %v, invariants %v",
				i, r.PayloadFree, r.Checks, r.GradientSumsExact, r.NonGradientBytesExact, r.MessageAccountingHeld, r.BudgetInvariantHeld)
		}
		p := without.Runs[i]
		if !p.PayloadFree || p.GradientSumsExact || p.NonGradientBytesExact || p.ElementsTested != 0 || !p.MessageAccountingHeld || !p.BudgetInvariantHeld ||
			!slices.Equal(p.Checks, []string{checkBudget, checkCompletion, checkAccounting, checkInTime}) {
			t.Fatalf("run %d payload-free: payload-free %v, checks %v, sums %v, non-gradient %v, %d elements tested, accounting %v, invariants %v",
				i, p.PayloadFree, p.Checks, p.GradientSumsExact, p.NonGradientBytesExact, p.ElementsTested, p.MessageAccountingHeld, p.BudgetInvariantHeld)
		}
		// Apart from the checks, the runs are the same.
		p.PayloadFree, p.Checks, p.GradientSumsExact, p.NonGradientBytesExact, p.ElementsTested, p.ReplicasIdentical, p.ReplicaMismatches =
			r.PayloadFree, r.Checks, r.GradientSumsExact, r.NonGradientBytesExact, r.ElementsTested, r.ReplicasIdentical, r.ReplicaMismatches
		without.Runs[i] = p
	}
	if forgiven == 0 || shed == 0 {
		t.Fatalf("the scenario must forgive and shed to test both: %d bytes forgiven, %d shed", forgiven, shed)
	}
	// The summaries are made from the runs: the byte checks' aggregates
	// are the fields that may differ.
	for i := range without.Summary {
		s, w := &without.Summary[i], with.Summary[i]
		s.GradientSumsExact, s.NonGradientExact, s.PayloadFree = w.GradientSumsExact, w.NonGradientExact, w.PayloadFree
	}
	a, b := strings.Split(string(wallFree(t, with)), "\n"), strings.Split(string(wallFree(t, without)), "\n")
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			t.Fatalf("the payload-free runs differ from the runs with payloads at line %d of results.json:\nwith payloads %s\npayload-free  %s", i+1, a[i], b[i])
		}
	}
	if len(a) != len(b) {
		t.Fatalf("results.json with payloads has %d lines, payload-free %d", len(a), len(b))
	}
}

// The auto mode goes payload-free when the registered memory would pass
// half the machine's, in the simulator only; on goes payload-free in the
// simulator and is refused elsewhere.
func TestPayloadModes(t *testing.T) {
	o := simOptions("dcqcn")
	o.defaults()
	p, err := check(o)
	if err != nil {
		t.Fatal(err)
	}
	hosts := []hostapi.HostID{}
	for _, h := range p.dry.Hosts {
		hosts = append(hosts, hostapi.HostID(h.ID))
	}
	need, err := p.workloadConfig(p.policies[0], 1).RegisteredBytes(hosts)
	if err != nil || need <= 0 {
		t.Fatalf("registered bytes %d, %v", need, err)
	}
	for _, tc := range []struct {
		mode  string
		sim   bool
		total int64
		want  bool
		err   error
		jobs  int
	}{
		{PayloadsAuto, true, 2*need + 1, true, nil, 2}, // two runs at once share the machine
		{PayloadsAuto, true, 4*need + 1, false, nil, 2},
		{PayloadsAuto, true, 2*need + 1, false, nil, 1},
		{PayloadsAuto, true, 2*need - 2, true, nil, 1},
		{"", true, 2*need - 2, true, nil, 1},
		{PayloadsAuto, false, 1, false, nil, 1},
		{PayloadsOn, true, 1 << 40, true, nil, 1},
		{PayloadsOff, true, 1, false, nil, 1},
		{PayloadsOn, false, 1 << 40, false, ErrInput, 1},
		{"maybe", true, 1 << 40, false, ErrInput, 1},
	} {
		q := *p
		q.opts.PayloadFree, q.sim, q.payloadFree, q.opts.Jobs = tc.mode, tc.sim, false, tc.jobs
		err := q.choosePayloads(hosts, func() (int64, error) { return tc.total, nil })
		if !errors.Is(err, tc.err) || q.payloadFree != tc.want || err == nil && q.registered != need {
			t.Errorf("mode %q, sim %v, %d jobs, machine %d B for %d registered (%d recorded): payload-free %v, %v; want %v, %v",
				tc.mode, tc.sim, tc.jobs, tc.total, need, q.registered, q.payloadFree, err, tc.want, tc.err)
		}
	}
	// Without a reading of the machine, auto keeps every byte real.
	q := *p
	if err := q.choosePayloads(hosts, func() (int64, error) { return 0, errors.New("no /proc") }); err != nil || q.payloadFree {
		t.Errorf("auto with no reading of the machine: payload-free %v, %v", q.payloadFree, err)
	}
	if m, err := machineMemory(); err != nil || m < 1<<20 {
		t.Errorf("machineMemory: %d, %v", m, err)
	}
}

// withReplicas is the checks of a payload run of the policy: the replica
// check too for a policy that keeps the replicas identical.
func withReplicas(policy string, checks ...string) []string {
	for _, p := range Policies() {
		if p.Name == policy && p.ReplicasIdentical() {
			return append(checks, checkReplicas)
		}
	}
	return checks
}
