package workload

import (
	"context"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/hostapi"
)

// These tests drive Run through the in-process fake fabric: fast, and
// able to see what a real daemon cannot (memory a pending send reads being
// overwritten, a receive posted for a message nobody sends).

func hostIDs(n int) []hostapi.HostID {
	out := make([]hostapi.HostID, n)
	for i := range out {
		out[i] = hostapi.HostID(10 + i) // not the rank numbers, so a mix-up shows
	}
	return out
}

// helper is what the checks need of *testing.T and *rapid.T.
type helper interface {
	Helper()
	Errorf(format string, args ...any)
}

func runFake(t helper, f *fakeFabric, cfg Config, obs Observer) (*Result, error) {
	t.Helper()
	hosts := hostIDs(len(f.hosts))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	return run(ctx, cfg, f.apis(hosts...), hosts, obs, newPollDriver())
}

// checkFabric fails the test if the workload broke a rule of the fabric or
// left anything behind.
func checkFabric(t helper, f *fakeFabric) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, v := range f.violations {
		t.Errorf("fabric rule broken: %s", v)
	}
	if f.leftover != 0 {
		t.Errorf("%d work requests were still posted at teardown (a receive for a message nobody sent?)", f.leftover)
	}
	for _, h := range f.hosts {
		if len(h.flows) != 0 || len(h.regions) != 0 {
			t.Errorf("host %d keeps %d flows and %d regions after the run", h.id, len(h.flows), len(h.regions))
		}
	}
}

func baseConfig() Config {
	return Config{Steps: 3, GradientBytes: 4 * 1000, Seed: 42, Critical: func(int) bool { return false },
		StepTimeout: 10 * time.Second}
}

// forgiveGradient forgives one random range of some gradient messages, as
// a receiver would after a trim.
func forgiveGradient(prob float64) func(*rand.Rand, hostapi.Class, int) []hostapi.Range {
	return func(r *rand.Rand, class hostapi.Class, n int) []hostapi.Range {
		if class != hostapi.ClassGradient || r.Float64() >= prob {
			return nil
		}
		off := r.IntN(n)
		return []hostapi.Range{{Start: uint64(off), End: uint64(off + 1 + r.IntN(n-off))}}
	}
}

// expectedShed recomputes DBLP's draws independently of the workload.
func expectedShed(cfg Config, n int) int64 {
	chunk := roundUp(cfg.GradientBytes, 4*n) / n
	var total int64
	for s := 1; s <= cfg.Steps; s++ {
		p := cfg.Shed.PHigh
		if cfg.Critical(s) {
			p = cfg.Shed.PLow
		}
		for k := range n {
			for m := range 2 * (n - 1) {
				if budget.Shed(cfg.Shed.Seed, budget.StepID(s), uint64(k), uint64(m), p) {
					total += int64(chunk)
				}
			}
		}
	}
	return total
}

// With nothing forgiven or shed, the ring all-reduce leaves the exact sum
// of every rank's gradient in every element at every rank.
func TestRingAllReduceSumsEveryElementExactly(t *testing.T) {
	for _, n := range []int{2, 3, 4, 5, 8} {
		f := newFakeFabric(uint64(n), hostIDs(n)...)
		f.acksLast = true
		cfg := baseConfig()
		cfg.TPBytes, cfg.PPBytes = 3000, 2000
		res, err := runFake(t, f, cfg, nil)
		if err != nil {
			t.Fatalf("%d ranks: %v", n, err)
		}
		checkFabric(t, f)
		padded := roundUp(cfg.GradientBytes, 4*n)
		all := int64(cfg.Steps * n * padded / 4)
		if res.ElementsTested != all || res.Mismatches != 0 || res.ForgivenBytes != 0 || !res.NonGradientExact {
			t.Fatalf("%d ranks: tested %d of %d elements, %d mismatches, %d forgiven, non-gradient exact %v",
				n, res.ElementsTested, all, res.Mismatches, res.ForgivenBytes, res.NonGradientExact)
		}
		if want := int64(cfg.Steps * n * 2 * (n - 1) * padded / n); res.GradientBytesExpected != want {
			t.Fatalf("%d ranks: expected %d gradient bytes, want 2(N-1) chunks per rank and step = %d", n, res.GradientBytesExpected, want)
		}
	}
}

// "The sums are checked for every byte that was not forgiven": forgiven
// ranges are zero-filled, so their elements are left out, and every other
// element must still be exact.
func TestForgivenRangesAreLeftOutOfTheCheck(t *testing.T) {
	f := newFakeFabric(3, hostIDs(4)...)
	f.forgive = forgiveGradient(0.3)
	cfg := baseConfig()
	cfg.Steps = 5
	res, err := runFake(t, f, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkFabric(t, f)
	all := int64(cfg.Steps * 4 * cfg.GradientBytes / 4)
	if res.ForgivenBytes == 0 || res.ForgivenBytes != f.forgivenSent {
		t.Fatalf("result counts %d forgiven bytes, the fabric forgave %d", res.ForgivenBytes, f.forgivenSent)
	}
	if res.ElementsTested == 0 || res.ElementsTested >= all || res.ElementsTested%4 != 0 {
		t.Fatalf("tested %d of %d elements; want fewer than all, the same elements at each of the 4 ranks", res.ElementsTested, all)
	}
}

// A gradient corrupted without a forgiven range is a failure that Run
// reports, never a silent loss.
func TestSilentCorruptionIsAMismatch(t *testing.T) {
	f := newFakeFabric(4, hostIDs(3)...)
	f.corrupt = func(class hostapi.Class, data []byte) {
		if class == hostapi.ClassGradient {
			data[0] ^= 0x80 // a low mantissa bit: a slightly different value
		}
	}
	res, err := runFake(t, f, baseConfig(), nil)
	if !errors.Is(err, ErrMismatch) || res == nil || res.Mismatches == 0 {
		t.Fatalf("run over a corrupting fabric: result %+v, error %v; want ErrMismatch", res, err)
	}
	if !strings.Contains(err.Error(), "element") {
		t.Fatalf("error %q does not say which element", err)
	}
}

// "Neither tensor-parallel nor pipeline-parallel traffic is eligible": a
// forgiven range on such a receive fails the run.
func TestForgivenTensorBytesFailTheRun(t *testing.T) {
	f := newFakeFabric(5, hostIDs(4)...)
	f.forgive = func(_ *rand.Rand, class hostapi.Class, n int) []hostapi.Range {
		if class == hostapi.ClassTensor {
			return []hostapi.Range{{Start: 0, End: 8}}
		}
		return nil
	}
	cfg := baseConfig()
	cfg.TPBytes = 4096
	res, err := runFake(t, f, cfg, nil)
	if !errors.Is(err, ErrNonGradient) || res.NonGradientExact {
		t.Fatalf("forgiven tensor bytes: non-gradient exact %v, error %v; want ErrNonGradient", res.NonGradientExact, err)
	}
	checkFabric(t, f)
}

// Pipeline and burst payloads are compared byte for byte.
func TestCorruptPipelineAndBurstPayloadsFail(t *testing.T) {
	for _, class := range []hostapi.Class{hostapi.ClassPipeline, hostapi.ClassOther} {
		f := newFakeFabric(6, hostIDs(4)...)
		f.corrupt = func(c hostapi.Class, data []byte) {
			if c == class {
				data[len(data)-1]++
			}
		}
		cfg := baseConfig()
		cfg.PPBytes = 1000
		cfg.Burst = BurstConfig{Bytes: 1500, Steps: []int{2}}
		_, err := runFake(t, f, cfg, nil)
		if !errors.Is(err, ErrNonGradient) || !strings.Contains(err.Error(), "step") {
			t.Fatalf("corrupt %v payload: error %v, want ErrNonGradient naming the step", class, err)
		}
	}
}

// DBLP: "A hash draw at the sender sheds whole gradient messages". The
// receiver draws the same hash, so it posts no receive for a shed message
// (none is left posted at teardown) and waits for none (the run ends).
func TestShedMessagesAreNeitherSentNorAwaited(t *testing.T) {
	f := newFakeFabric(7, hostIDs(5)...)
	cfg := baseConfig()
	cfg.Steps = 4
	cfg.Critical = func(s int) bool { return s == 1 }
	cfg.Shed = &ShedConfig{PLow: 0.005, PHigh: 0.5, Seed: 9}
	res, err := runFake(t, f, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkFabric(t, f)
	if want := expectedShed(cfg, 5); res.ShedBytes != want || want == 0 {
		t.Fatalf("shed %d bytes, the draws shed %d", res.ShedBytes, want)
	}
	all := int64(cfg.Steps * 5 * cfg.GradientBytes / 4)
	if res.ElementsTested >= all {
		t.Fatalf("tested all %d elements although messages were shed", all)
	}
	// The receiver's expected bytes leave out what its predecessor sheds.
	h := f.hosts[hostIDs(5)[2]]
	for _, b := range h.begins {
		if b.ExpectedGradientBytes > uint64(2*4*cfg.GradientBytes/5) || b.Critical == nil {
			t.Fatalf("begin_step %+v: expected bytes above 2(N-1) chunks, or no classification", b)
		}
	}
}

// Any order of deliveries across flows, any forgiveness and any shedding:
// the untainted sums are exact, no pending send's memory changes, nothing
// is left posted, and the counts agree with the fabric and the draws.
func TestRingPropertyAnyOrderAnyLoss(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 7).Draw(rt, "ranks")
		f := newFakeFabric(rapid.Uint64().Draw(rt, "fabric seed"), hostIDs(n)...)
		f.acksLast = rapid.Bool().Draw(rt, "acks last")
		if rapid.Bool().Draw(rt, "forgive") {
			f.forgive = forgiveGradient(rapid.Float64Range(0, 1).Draw(rt, "forgive prob"))
		}
		cfg := baseConfig()
		cfg.Steps = rapid.IntRange(1, 3).Draw(rt, "steps")
		cfg.GradientBytes = rapid.IntRange(1, 3000).Draw(rt, "gradient bytes")
		cfg.TPBytes = rapid.IntRange(0, 100).Draw(rt, "tp bytes")
		cfg.Seed = rapid.Uint64().Draw(rt, "seed")
		if rapid.Bool().Draw(rt, "shed") {
			cfg.Shed = &ShedConfig{PHigh: rapid.Float64Range(0, 1).Draw(rt, "p_high"), Seed: cfg.Seed}
		}
		res, err := runFake(rt, f, cfg, nil)
		if err != nil {
			rt.Fatal(err)
		}
		checkFabric(rt, f)
		all := int64(cfg.Steps * n * roundUp(cfg.GradientBytes, 4*n) / 4)
		if res.ElementsTested%int64(n) != 0 || res.ElementsTested > all || res.Mismatches != 0 {
			rt.Fatalf("tested %d of %d elements, %d mismatches", res.ElementsTested, all, res.Mismatches)
		}
		if res.ForgivenBytes != f.forgivenSent {
			rt.Fatalf("result counts %d forgiven bytes, the fabric forgave %d", res.ForgivenBytes, f.forgivenSent)
		}
		if f.forgive == nil && cfg.Shed == nil && res.ElementsTested != all {
			rt.Fatalf("lossless run tested %d of %d elements", res.ElementsTested, all)
		}
		if cfg.Shed != nil && res.ShedBytes != expectedShed(cfg, n) {
			rt.Fatalf("shed %d bytes, the draws shed %d", res.ShedBytes, expectedShed(cfg, n))
		}
	})
}

// A message that never arrives makes the step time out; the error names
// the step, the rank and the work it waited for, and Run returns promptly.
func TestStepTimeoutNamesTheStepAndTheOutstandingWork(t *testing.T) {
	hosts := hostIDs(4)
	f := newFakeFabric(8, hosts...)
	held := hostapi.FlowID(1000 + 2) // rank 2 -> rank 3
	f.hold = func(flow hostapi.FlowID, from hostapi.HostID, k int) bool {
		return flow == held && k == 2*3+1 // step 2's second message
	}
	cfg := baseConfig()
	cfg.StepTimeout = 300 * time.Millisecond
	// Run returns at all: a timeout that never fired would hang the test
	// (and go test's own timeout would fail it); how soon is the machine's.
	res, err := runFake(t, f, cfg, nil)
	if !errors.Is(err, ErrStep) {
		t.Fatalf("error %v, want ErrStep", err)
	}
	for _, want := range []string{"step 2", "rank 3", "timed out", "flow 1002"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not mention %q", err, want)
		}
	}
	if len(res.Steps) != 1 {
		t.Fatalf("%d steps recorded, want step 1 only", len(res.Steps))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, h := range f.hosts {
		if len(h.flows) != 0 || len(h.regions) != 0 {
			t.Fatalf("host %d keeps flows or regions after a failed run", h.id)
		}
	}
}

// A completion with an error status stops the run with the failed work
// named.
func TestErrorCompletionStopsTheRun(t *testing.T) {
	f := newFakeFabric(9, hostIDs(3)...)
	f.fail = func(flow hostapi.FlowID, _ hostapi.HostID, k int) bool { return flow == 1001 && k == 0 }
	_, err := runFake(t, f, baseConfig(), nil)
	if !errors.Is(err, ErrStep) || !strings.Contains(err.Error(), "step 1") || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("error %v, want the failed step and the completion's reason", err)
	}
}

// A run releases its flows and regions, so the same daemons serve a second
// run; its steps continue past the first's, since "a closed loss budget
// never reopens".
func TestSecondRunReusesTheDaemons(t *testing.T) {
	f := newFakeFabric(10, hostIDs(3)...)
	cfg := baseConfig()
	if _, err := runFake(t, f, cfg, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := runFake(t, f, cfg, nil); err == nil {
		t.Fatal("a second run with the same step ids began closed steps again")
	}
	cfg.StepBase = uint64(cfg.Steps)
	if _, err := runFake(t, f, cfg, nil); err != nil {
		t.Fatalf("second run with StepBase %d: %v", cfg.StepBase, err)
	}
	checkFabric(t, f)
}

type recorder struct {
	started []int
	crit    []bool
	done    []StepResult
}

func (r *recorder) StepStarted(step int, critical bool) {
	r.started = append(r.started, step)
	r.crit = append(r.crit, critical)
}
func (r *recorder) StepDone(_ int, s StepResult) { r.done = append(r.done, s) }

// The classification comes from the schedule, or from the gradient norms
// through Accordion's detector, which the daemons run on the same norms.
func TestClassificationFromScheduleOrNorms(t *testing.T) {
	f := newFakeFabric(11, hostIDs(2)...)
	cfg := baseConfig()
	cfg.Steps = 4
	cfg.Critical = nil // the default schedule: steps 1, 2, 3 and 20
	var rec recorder
	if _, err := runFake(t, f, cfg, &rec); err != nil {
		t.Fatal(err)
	}
	if want := []bool{true, true, true, false}; !slices.Equal(rec.crit, want) {
		t.Fatalf("default schedule classified %v, want %v", rec.crit, want)
	}
	for _, b := range f.hosts[hostIDs(2)[0]].begins {
		if b.Critical == nil || *b.Critical != (b.Step <= 3) || b.ExpectedGradientBytes != uint64(2*cfg.GradientBytes/2) {
			t.Fatalf("begin_step %+v", b)
		}
	}

	f = newFakeFabric(12, hostIDs(2)...)
	cfg.Norms = [][]float64{{4, 2}, {4.1, 2}, {1, 2}, {1, 2.05}}
	rec = recorder{}
	if _, err := runFake(t, f, cfg, &rec); err != nil {
		t.Fatal(err)
	}
	// First interval: critical; a 2.5 % change: not; a 75 % drop: critical.
	if want := []bool{true, false, true, false}; !slices.Equal(rec.crit, want) {
		t.Fatalf("detector classified %v, want %v", rec.crit, want)
	}
	for i, b := range f.hosts[hostIDs(2)[1]].begins {
		if b.Critical != nil || len(b.Norms) != 2 || b.Norms[0] != cfg.Norms[i][0] {
			t.Fatalf("begin_step %+v should carry step %d's norms", b, i+1)
		}
	}
	if len(rec.done) != 4 || rec.done[3].Step != 4 || rec.done[3].Duration <= 0 || len(rec.done[3].AllReduce) != 2 {
		t.Fatalf("observer saw %+v", rec.done)
	}
}

// Timings: every step has a positive duration at least the compute phase,
// each rank an all-reduce time within the step, and every tensor message a
// completion time.
func TestTimingsAreRecorded(t *testing.T) {
	f := newFakeFabric(13, hostIDs(4)...)
	cfg := baseConfig()
	cfg.Compute = 5 * time.Millisecond
	cfg.TPBytes = 512
	res, err := runFake(t, f, cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	var sum time.Duration
	for _, s := range res.Steps {
		sum += s.Duration
		if s.Duration < cfg.Compute || s.End <= s.Start || len(s.AllReduce) != 4 || len(s.TP) != 4 {
			t.Fatalf("step %+v", s)
		}
		for _, d := range append(s.AllReduce, s.TP...) {
			if d <= 0 || d > s.Duration {
				t.Fatalf("step %d: a communication time %v outside (0, %v]", s.Step, d, s.Duration)
			}
		}
	}
	if res.TrainingTime != sum || len(res.TPDurations) != 4*cfg.Steps {
		t.Fatalf("training time %v, sum of steps %v; %d TP durations", res.TrainingTime, sum, len(res.TPDurations))
	}
}

func TestConfigRefusals(t *testing.T) {
	good := baseConfig()
	cases := map[string]struct {
		cfg   Config
		hosts []hostapi.HostID
	}{
		"one rank":          {good, hostIDs(1)},
		"shared host":       {good, []hostapi.HostID{3, 4, 3}},
		"no steps":          {func() Config { c := good; c.Steps = 0; return c }(), hostIDs(2)},
		"no gradient":       {func() Config { c := good; c.GradientBytes = 0; return c }(), hostIDs(2)},
		"too few norms":     {func() Config { c := good; c.Norms = [][]float64{{1}}; return c }(), hostIDs(2)},
		"bad probability":   {func() Config { c := good; c.Shed = &ShedConfig{PHigh: 1.5}; return c }(), hostIDs(2)},
		"burst too wide":    {func() Config { c := good; c.Burst = BurstConfig{Senders: 3, Bytes: 1, Steps: []int{1}}; return c }(), hostIDs(3)},
		"timeout too short": {func() Config { c := good; c.Compute = time.Second; c.StepTimeout = time.Second; return c }(), hostIDs(2)},
	}
	for name, c := range cases {
		if _, err := c.cfg.withDefaults(c.hosts); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: error %v, want ErrConfig", name, err)
		}
	}
	cfg, err := good.withDefaults(hostIDs(3))
	if err != nil || cfg.GradientBytes != 4008 || cfg.StepTimeout != good.StepTimeout {
		t.Fatalf("4000 gradient bytes over 3 ranks: %d (%v), want padding to 4008", cfg.GradientBytes, err)
	}
}

// The entropy policy applies to every flow the job creates.
func TestEntropyPolicyAppliesToEveryFlow(t *testing.T) {
	f := newFakeFabric(14, hostIDs(4)...)
	cfg := baseConfig()
	cfg.Steps = 1
	cfg.TPBytes, cfg.PPBytes = 64, 64
	cfg.Entropy, cfg.Subflows = hostapi.EntropySubflows, 4
	cfg.FlowBase = 70000
	if _, err := runFake(t, f, cfg, nil); err != nil {
		t.Fatal(err)
	}
	for _, h := range f.hosts {
		if len(h.created) != 5 { // ring out and in, tensor, pipeline out and in
			t.Fatalf("host %d created %d flows, want 5", h.id, len(h.created))
		}
		for _, s := range h.created {
			if s.Entropy != hostapi.EntropySubflows || s.Subflows != 4 || s.Flow < 71000 {
				t.Fatalf("host %d created %+v", h.id, s)
			}
		}
	}
}

// pollTimedHost is a fake host that records, for each step, when its rank
// posted its first model-parallel send and the end of the compute phase
// as the poll driver set it: the deadline of the step's first Poll.
type pollTimedHost struct {
	*fakeHost
	steps []pollTimedStep
}

type pollTimedStep struct {
	firstMP    time.Time // zero: none yet
	computeEnd time.Time // zero: no Poll yet
}

func (h *pollTimedHost) BeginStep(ctx context.Context, req hostapi.StepReq) error {
	h.steps = append(h.steps, pollTimedStep{})
	return h.fakeHost.BeginStep(ctx, req)
}

func (h *pollTimedHost) PostSend(ctx context.Context, req hostapi.SendReq) error {
	if _, _, kind, _ := splitWR(req.WRID); kind.modelParallel() && len(h.steps) > 0 {
		if st := &h.steps[len(h.steps)-1]; st.firstMP.IsZero() {
			st.firstMP = time.Now()
		}
	}
	return h.fakeHost.PostSend(ctx, req)
}

func (h *pollTimedHost) Poll(ctx context.Context) (hostapi.Completion, error) {
	if len(h.steps) > 0 {
		if st := &h.steps[len(h.steps)-1]; st.computeEnd.IsZero() {
			st.computeEnd, _ = ctx.Deadline()
		}
	}
	return h.fakeHost.Poll(ctx)
}

// The poll driver runs the WithCompute schedule on the real clock: the
// compute phase is a deadline on the rank's wait for completions, the
// exchanges start before it ends and run beside it, and every step still
// spans its compute phase with exact sums and payloads. A driver that
// runs the exchanges after the compute phase posts its first
// model-parallel send after the phase's end by construction; the right
// one posts it as soon as every rank has posted its receives, which the
// 500 ms phase leaves room for even on a loaded machine.
func TestPollDriverModelParallelWithCompute(t *testing.T) {
	f := newFakeFabric(5, hostIDs(4)...)
	f.forgive = forgiveGradient(0.2)
	cfg := baseConfig()
	cfg.Steps = 2
	cfg.TPBytes, cfg.PPBytes = 3000, 2000
	cfg.Compute = 500 * time.Millisecond
	cfg.ModelParallel = WithCompute
	hosts := hostIDs(len(f.hosts))
	var timed []*pollTimedHost
	var apis []HostAPI
	for _, h := range hosts {
		th := &pollTimedHost{fakeHost: f.hosts[h]}
		timed, apis = append(timed, th), append(apis, th)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := run(ctx, cfg, apis, hosts, nil, newPollDriver())
	if err != nil {
		t.Fatal(err)
	}
	checkFabric(t, f)
	if res.Mismatches != 0 || !res.NonGradientExact {
		t.Fatalf("%d mismatches, non-gradient exact %v", res.Mismatches, res.NonGradientExact)
	}
	for _, s := range res.Steps {
		if s.Duration < cfg.Compute {
			t.Errorf("step %d took %v, less than its compute phase %v", s.Step, s.Duration, cfg.Compute)
		}
	}
	for i, h := range timed {
		if len(h.steps) != cfg.Steps {
			t.Fatalf("rank %d began %d steps, want %d", i, len(h.steps), cfg.Steps)
		}
		for s, st := range h.steps {
			if st.firstMP.IsZero() || st.computeEnd.IsZero() {
				t.Fatalf("rank %d step %d: first model-parallel send at %v, compute phase's end %v: want both", i, s+1, st.firstMP, st.computeEnd)
			}
			if !st.firstMP.Before(st.computeEnd) {
				t.Errorf("rank %d step %d: first model-parallel send %v after the compute phase ended: the exchanges did not run beside it",
					i, s+1, st.firstMP.Sub(st.computeEnd))
			}
		}
	}
}
