package workload

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/hostapi"
)

// These tests run the workload through real forgived daemons and a
// trimswitch on loopback.

func runReal(t *testing.T, f *fabric, cfg Config, obs Observer) (*Result, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return Run(ctx, cfg, f.ranks(), obs)
}

func logSteps(t *testing.T, res *Result) {
	t.Helper()
	for _, s := range res.Steps {
		t.Logf("step %d (critical %v): %v; all-reduce %v; TP %v; forgiven %d, shed %d of %d",
			s.Step, s.Critical, s.Duration.Round(time.Millisecond), roundAll(s.AllReduce), roundAll(s.TP), s.Forgiven, s.Shed, s.Expected)
	}
	t.Logf("training time %v; %d elements tested, %d mismatches", res.TrainingTime.Round(time.Millisecond), res.ElementsTested, res.Mismatches)
}

func roundAll(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(100 * time.Microsecond)
	}
	return out
}

// stepRecords reads the daemons' ledger records of steps 1..steps, per rank.
func stepRecords(t *testing.T, f *fabric, steps int) [][]hostapi.StepRecord {
	t.Helper()
	out := make([][]hostapi.StepRecord, f.n)
	for i, c := range f.clients {
		recs, err := c.Steps(context.Background(), 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != steps {
			t.Fatalf("rank %d's daemon has %d step records, want %d", i, len(recs), steps)
		}
		out[i] = recs
	}
	return out
}

// Without FORGIVE, under DCQCN, nothing is lost: every element of every
// rank is the exact sum, and every other byte arrives as sent.
func TestDaemonsLosslessRunIsExact(t *testing.T) {
	f := newFabric(t, 4, fabricOpts{})
	cfg := Config{Steps: 3, GradientBytes: 1 << 20, Compute: 10 * time.Millisecond,
		TPBytes: 256 << 10, PPBytes: 256 << 10, Seed: 1, StepTimeout: 15 * time.Second}
	res, err := runReal(t, f, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	logSteps(t, res)
	all := int64(cfg.Steps * 4 * cfg.GradientBytes / 4)
	if res.ElementsTested != all || res.Mismatches != 0 || res.ForgivenBytes != 0 || res.ShedBytes != 0 || !res.NonGradientExact {
		t.Fatalf("tested %d of %d elements, %d mismatches, %d forgiven, %d shed, non-gradient exact %v",
			res.ElementsTested, all, res.Mismatches, res.ForgivenBytes, res.ShedBytes, res.NonGradientExact)
	}
	for _, s := range res.Steps {
		if s.Duration < cfg.Compute || len(s.AllReduce) != 4 || len(s.TP) != 4 {
			t.Fatalf("step %+v", s)
		}
		for _, d := range append(s.AllReduce, s.TP...) {
			if d <= 0 || d > s.Duration {
				t.Fatalf("step %d: communication time %v outside (0, %v]", s.Step, d, s.Duration)
			}
		}
	}
	for i, c := range f.clients {
		ct, err := settledCounters(c)
		if err != nil {
			t.Fatal(err)
		}
		if ct.Client.Flows != 0 || ct.Client.Regions != 0 || ct.Client.Outstanding != 0 {
			t.Fatalf("rank %d left %d flows, %d regions, %d work requests on its daemon", i, ct.Client.Flows, ct.Client.Regions, ct.Client.Outstanding)
		}
	}
}

// With FORGIVE on, no congestion control and a 32 KiB switch queue, trims
// happen and some gradient bytes are forgiven; the untainted sums are
// still exact, and each receiving rank's ledger kept "forgiven bytes never
// exceed the loss budget" on every step, with the smaller budget on the
// critical step.
func TestDaemonsForgiveWithinBudget(t *testing.T) {
	f := newFabric(t, 4, fabricOpts{forgive: true, cc: "none", dataQueue: 32 << 10, pHigh: 0.1})
	cfg := Config{Steps: 3, GradientBytes: 1 << 20, Compute: 10 * time.Millisecond,
		TPBytes: 256 << 10, PPBytes: 256 << 10, Seed: 2, StepTimeout: 15 * time.Second,
		Critical: func(s int) bool { return s == 1 },
		Burst:    BurstConfig{Bytes: 256 << 10, Steps: []int{2, 3}}}
	res, err := runReal(t, f, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	logSteps(t, res)
	if res.ForgivenBytes == 0 {
		t.Fatal("nothing forgiven: the fabric did not trim gradient bytes")
	}
	if !res.NonGradientExact {
		t.Fatal("non-gradient bytes were not exact")
	}
	chunk := int64(cfg.GradientBytes / 4)
	var ledgerForgiven int64
	for i, recs := range stepRecords(t, f, cfg.Steps) {
		for _, r := range recs {
			ledgerForgiven += r.Forgiven
			p := 0.1
			if r.Step == 1 {
				p = 0.005
			}
			switch {
			case r.Critical != (r.Step == 1) || r.P != p:
				t.Fatalf("rank %d step %d: critical %v with p %v", i, r.Step, r.Critical, r.P)
			case r.Expected != 2*3*chunk || r.Received+r.Forgiven != r.Expected:
				t.Fatalf("rank %d step %d: expected %d, received %d + forgiven %d; want 2(N-1) chunks = %d",
					i, r.Step, r.Expected, r.Received, r.Forgiven, 2*3*chunk)
			case !r.InvariantHeld || r.Forgiven > r.Budget || float64(r.Forgiven) > p*float64(r.Expected) || r.Open:
				t.Fatalf("rank %d step %d breaks the budget: %+v", i, r.Step, r)
			}
			t.Logf("rank %d step %d: budget %d, forgiven %d, trims %d, vesting refusals %d",
				i, r.Step, r.Budget, r.Forgiven, r.Trims, r.VestingRefusals)
		}
	}
	if ledgerForgiven != res.ForgivenBytes {
		t.Fatalf("completions listed %d forgiven bytes, the ledgers counted %d", res.ForgivenBytes, ledgerForgiven)
	}
}

// shedCheck looks at the daemons after every step: nothing is left
// posted, and each ring flow carried exactly the messages the draws kept.
type shedCheck struct {
	t    *testing.T
	f    *fabric
	cfg  Config
	kept []uint64 // per rank: ring messages not shed so far
}

// settledCounters reads a client's counters once its daemon has stopped
// counting delivered completions as outstanding: the daemon decrements the
// count just after writing a completion, so a client that acts on the
// completion at once can read the count a moment too early.
func settledCounters(c *hostapi.Client) (hostapi.Counters, error) {
	// 30 s: a guard, long enough for a loaded machine.
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		ct, err := c.Counters(context.Background())
		if err != nil || ct.Client.Outstanding == 0 {
			return ct, err
		}
	}
	return c.Counters(context.Background())
}

func (c *shedCheck) StepStarted(int, bool) {}

func (c *shedCheck) StepDone(step int, _ StepResult) {
	n := c.f.n
	for k := range n {
		for m := range 2 * (n - 1) {
			if !budget.Shed(c.cfg.Shed.Seed, budget.StepID(step), uint64(k), uint64(m), c.cfg.Shed.PHigh) || c.cfg.Critical(step) {
				c.kept[k]++ // PLow is 0 here: a critical step sheds nothing
			}
		}
	}
	for i, cl := range c.f.clients {
		ct, err := settledCounters(cl)
		if err != nil {
			c.t.Error(err)
			return
		}
		if ct.Client.Outstanding != 0 {
			c.t.Errorf("after step %d rank %d has %d work requests posted: a receive for a shed message?", step, i, ct.Client.Outstanding)
		}
		for _, fl := range ct.Flows {
			if fl.Flow == hostapi.FlowID(ringIDs+i) && fl.Values.SendsDone != c.kept[i] {
				c.t.Errorf("after step %d rank %d sent %d ring messages, the draws kept %d", step, i, fl.Values.SendsDone, c.kept[i])
			}
			if pred := (i + n - 1) % n; fl.Flow == hostapi.FlowID(ringIDs+pred) && fl.Values.RecvsDone != c.kept[pred] {
				c.t.Errorf("after step %d rank %d received %d ring messages, its predecessor kept %d", step, i, fl.Values.RecvsDone, c.kept[pred])
			}
		}
	}
}

// DBLP's shedding at P_high 0.5: the shed messages are neither sent nor
// received nor waited for, the bytes are counted, and every element no
// shed message touched is exact.
func TestDaemonsShedding(t *testing.T) {
	f := newFabric(t, 4, fabricOpts{})
	cfg := Config{Steps: 4, GradientBytes: 512 << 10, Seed: 3, StepTimeout: 15 * time.Second,
		Critical: func(s int) bool { return s == 1 },
		Shed:     &ShedConfig{PLow: 0, PHigh: 0.5, Seed: 11}}
	check := &shedCheck{t: t, f: f, cfg: cfg, kept: make([]uint64, 4)}
	res, err := runReal(t, f, cfg, check)
	if err != nil {
		t.Fatal(err)
	}
	logSteps(t, res)
	if want := expectedShed(cfg, 4); res.ShedBytes != want || want == 0 {
		t.Fatalf("shed %d bytes, the draws shed %d", res.ShedBytes, want)
	}
	if all := int64(cfg.Steps * 4 * cfg.GradientBytes / 4); res.ElementsTested == 0 || res.ElementsTested >= all {
		t.Fatalf("tested %d of %d elements", res.ElementsTested, all)
	}
}

// killer kills a daemon while a step communicates.
type killer struct {
	f     *fabric
	step  int
	after time.Duration
	wg    sync.WaitGroup
	err   error
}

func (k *killer) StepStarted(step int, _ bool) {
	if step != k.step {
		return
	}
	k.wg.Go(func() {
		time.Sleep(k.after)
		k.err = k.f.group.Kill("host3")
	})
}

func (k *killer) StepDone(int, StepResult) {}

// A peer daemon killed in the middle of a step makes Run fail promptly,
// naming the step, instead of hanging.
func TestDaemonsKilledPeerFailsTheStep(t *testing.T) {
	f := newFabric(t, 4, fabricOpts{})
	cfg := Config{Steps: 3, GradientBytes: 4 << 20, Compute: 20 * time.Millisecond, Seed: 4, StepTimeout: 8 * time.Second}
	k := &killer{f: f, step: 2, after: 150 * time.Millisecond}
	start := time.Now()
	res, err := runReal(t, f, cfg, k)
	took := time.Since(start)
	k.wg.Wait()
	if k.err != nil {
		t.Fatal(k.err)
	}
	t.Logf("Run returned after %v: %v", took.Round(time.Millisecond), err)
	if !errors.Is(err, ErrStep) || !strings.Contains(err.Error(), "step 2") {
		t.Fatalf("error %v, want a failed step 2", err)
	}
	if res == nil || len(res.Steps) != 1 {
		t.Fatalf("result %+v, want step 1 only", res)
	}
	// Promptly: the step failed on the peer's death, not on its timeout
	// (which a loaded machine would make a verdict on wall time).
	if strings.Contains(err.Error(), "timed out") {
		t.Fatalf("error %v: step 2 waited for its timeout instead of failing on the killed peer", err)
	}
}
