package workload

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
)

// fakeLoop runs the fake fabric as an event loop in virtual time: each
// fabric step takes a microsecond, timers fire in time order, and every
// completion goes to its host API's handler as soon as the step that made it
// is over. One goroutine: nothing depends on scheduling.
type fakeLoop struct {
	f      *fakeFabric
	now    time.Duration
	timers []fakeTimer
	seq    int
	apis   []*eventHost
}

type fakeTimer struct {
	at  time.Duration
	seq int
	fn  func()
}

// eventHost is a fake daemon whose completions the loop hands over.
type eventHost struct {
	*fakeHost
	handler func(hostapi.Completion)
}

func (e *eventHost) OnCompletion(fn func(hostapi.Completion)) { e.handler = fn }

func (l *fakeLoop) Now() time.Duration { return l.now }

func (l *fakeLoop) At(t time.Duration, fn func()) {
	l.seq++
	l.timers = append(l.timers, fakeTimer{max(t, l.now), l.seq, fn})
	slices.SortFunc(l.timers, func(a, b fakeTimer) int {
		if a.at != b.at {
			return int(a.at - b.at)
		}
		return a.seq - b.seq
	})
}

var errFakeIdle = errors.New("fake loop: idle")

func (l *fakeLoop) RunUntil(done func() bool, limit time.Duration) error {
	for !done() {
		if len(l.timers) > 0 && l.timers[0].at <= l.now {
			t := l.timers[0]
			l.timers = l.timers[1:]
			t.fn()
			continue
		}
		l.f.mu.Lock()
		moved := l.f.step(nil)
		l.f.mu.Unlock()
		if l.deliver() || moved {
			l.now += time.Microsecond
		} else if len(l.timers) > 0 {
			l.now = l.timers[0].at
		} else {
			return errFakeIdle
		}
		if l.now > limit {
			return fmt.Errorf("fake loop: past %v", limit)
		}
	}
	return nil
}

// deliver hands every queued completion to its host API's handler.
func (l *fakeLoop) deliver() bool {
	any := false
	for _, p := range l.apis {
		for p.handler != nil {
			c, ok := p.TryPoll()
			if !ok {
				break
			}
			any = true
			p.handler(c)
		}
	}
	return any
}

func runEventsFake(t helper, f *fakeFabric, cfg Config, obs Observer) (*Result, *fakeLoop, error) {
	t.Helper()
	hosts := hostIDs(len(f.hosts))
	l := &fakeLoop{f: f}
	ranks := make([]EventRank, len(hosts))
	for i, h := range hosts {
		e := &eventHost{fakeHost: f.hosts[h]}
		l.apis = append(l.apis, e)
		ranks[i] = EventRank{API: e, Host: h}
	}
	res, err := RunEvents(context.Background(), cfg, ranks, l, obs)
	return res, l, err
}

// The event-driven ranks keep every rule of the fabric (no pending send's
// memory is overwritten, nothing is left posted) with any delivery order,
// forgiveness and shedding, and their sums are exact.
func TestEventRanksKeepTheFabricsRules(t *testing.T) {
	for seed := range uint64(6) {
		n := 2 + int(seed)%5
		f := newFakeFabric(seed, hostIDs(n)...)
		f.forgive = forgiveGradient(0.2)
		cfg := baseConfig()
		cfg.TPBytes, cfg.PPBytes = 300, 200
		cfg.Burst = BurstConfig{Bytes: 100, Steps: []int{2}}
		cfg.Compute = 3 * time.Millisecond
		if seed%2 == 0 {
			cfg.Shed = &ShedConfig{PHigh: 0.3, Seed: seed}
		}
		res, l, err := runEventsFake(t, f, cfg, nil)
		if err != nil {
			t.Fatalf("seed %d, %d ranks: %v", seed, n, err)
		}
		checkFabric(t, f)
		if res.Mismatches != 0 || !res.NonGradientExact || res.ForgivenBytes != f.forgivenSent {
			t.Fatalf("seed %d: %d mismatches, non-gradient exact %v, forgave %d of %d", seed, res.Mismatches, res.NonGradientExact, res.ForgivenBytes, f.forgivenSent)
		}
		// Virtual time: every step spans its compute phase, and the run's
		// clock is the loop's.
		var sum time.Duration
		for _, s := range res.Steps {
			sum += s.Duration
			if s.Duration <= cfg.Compute || s.End > l.now {
				t.Fatalf("seed %d: step %+v on a loop at %v", seed, s, l.now)
			}
		}
		if res.TrainingTime != sum {
			t.Fatalf("training time %v, sum of steps %v", res.TrainingTime, sum)
		}
	}
}

// A message that never arrives fails the step when the loop has nothing
// left to run, naming the step, the rank and the work it waited for.
func TestEventRanksReportAStuckStep(t *testing.T) {
	hosts := hostIDs(3)
	f := newFakeFabric(8, hosts...)
	f.hold = func(flow hostapi.FlowID, _ hostapi.HostID, k int) bool { return flow == 1001 && k == 2*2+1 }
	_, _, err := runEventsFake(t, f, baseConfig(), nil)
	if !errors.Is(err, ErrStep) {
		t.Fatalf("error %v, want ErrStep", err)
	}
	for _, want := range []string{"step 2", "rank 2", "went idle", "flow 1001"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("error %q does not mention %q", err, want)
		}
	}
	for _, h := range f.hosts {
		if len(h.flows) != 0 || len(h.regions) != 0 {
			t.Fatalf("host %d keeps flows or regions after a failed run", h.id)
		}
	}
}

// A host API that is not on an event loop is refused before anything starts.
func TestRunEventsNeedsALoop(t *testing.T) {
	f := newFakeFabric(1, hostIDs(2)...)
	ranks := []EventRank{{API: &eventHost{fakeHost: f.hosts[10]}, Host: 10}, {API: &eventHost{fakeHost: f.hosts[11]}, Host: 11}}
	if _, err := RunEvents(context.Background(), baseConfig(), ranks, nil, nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("no loop: %v", err)
	}
	if _, err := run(context.Background(), baseConfig(), f.apis(hostIDs(2)...), hostIDs(2), nil, &loopDriver{loop: &fakeLoop{f: f}}); !errors.Is(err, ErrConfig) {
		t.Fatalf("poll ports on a loop: %v", err)
	}
}

// timedHost records when its rank began each step, posted each send and
// saw each completion, on the loop's clock.
type timedHost struct {
	*eventHost
	now    func() time.Duration
	begins []time.Duration // per step
	sends  []timedWR
	comps  []timedWR
}

type timedWR struct {
	at   time.Duration
	step int
	kind wrKind
}

func (h *timedHost) BeginStep(ctx context.Context, req hostapi.StepReq) error {
	h.begins = append(h.begins, h.now())
	return h.eventHost.BeginStep(ctx, req)
}

func (h *timedHost) PostSend(ctx context.Context, req hostapi.SendReq) error {
	_, step, kind, _ := splitWR(req.WRID)
	h.sends = append(h.sends, timedWR{h.now(), step, kind})
	return h.eventHost.PostSend(ctx, req)
}

func (h *timedHost) OnCompletion(fn func(hostapi.Completion)) {
	if fn == nil {
		h.eventHost.OnCompletion(nil)
		return
	}
	h.eventHost.OnCompletion(func(c hostapi.Completion) {
		_, step, kind, _ := splitWR(c.WRID)
		h.comps = append(h.comps, timedWR{h.now(), step, kind})
		fn(c)
	})
}

// runTimed runs cfg on a fake fabric of n ranks whose host APIs record times.
func runTimed(t *testing.T, n int, cfg Config) (*Result, []*timedHost) {
	t.Helper()
	f := newFakeFabric(3, hostIDs(n)...)
	l := &fakeLoop{f: f}
	var hosts []*timedHost
	var ranks []EventRank
	for _, h := range hostIDs(n) {
		e := &eventHost{fakeHost: f.hosts[h]}
		l.apis = append(l.apis, e)
		th := &timedHost{eventHost: e, now: l.Now}
		hosts = append(hosts, th)
		ranks = append(ranks, EventRank{API: th, Host: h})
	}
	res, err := RunEvents(context.Background(), cfg, ranks, l, nil)
	if err != nil {
		t.Fatal(err)
	}
	checkFabric(t, f)
	if res.Mismatches != 0 || !res.NonGradientExact {
		t.Fatalf("%s: %d mismatches, non-gradient exact %v", cfg.ModelParallel, res.Mismatches, res.NonGradientExact)
	}
	return res, hosts
}

// With the WithCompute schedule the tensor- and pipeline-parallel
// exchanges run during the compute phase, and a rank's all-reduce starts
// only once its compute phase has ended and its own exchanges have
// completed; after the compute phase (the default) everything starts
// together when the phase ends.
func TestModelParallelSchedules(t *testing.T) {
	cfg := baseConfig()
	cfg.TPBytes, cfg.PPBytes = 3000, 2000
	cfg.Burst = BurstConfig{Bytes: 500, Steps: []int{2}}
	// The fake fabric moves one message a microsecond: the exchanges
	// outlast the short compute phase and end well within the long one,
	// so each of the ring's two conditions decides in one of them.
	for _, compute := range []time.Duration{3 * time.Microsecond, time.Millisecond} {
		cfg.Compute = compute
		checkModelParallelSchedules(t, cfg)
	}
}

func checkModelParallelSchedules(t *testing.T, cfg Config) {
	times := map[ModelParallel]time.Duration{}
	for _, mp := range []ModelParallel{AfterCompute, WithCompute} {
		cfg.ModelParallel = mp
		res, hosts := runTimed(t, 4, cfg)
		times[mp] = res.TrainingTime
		for i, h := range hosts {
			for s := 1; s <= cfg.Steps; s++ {
				computeEnd := h.begins[s-1] + cfg.Compute
				var lastMP, firstMP, firstRing time.Duration = 0, -1, -1
				for _, c := range h.comps {
					if c.step == s && c.kind.modelParallel() {
						lastMP = max(lastMP, c.at)
					}
				}
				for _, w := range h.sends {
					switch {
					case w.step != s:
					case w.kind.modelParallel() && firstMP < 0:
						firstMP = w.at
					case (w.kind == wrRingSend || w.kind == wrBurstSend) && firstRing < 0:
						firstRing = w.at
					}
				}
				if firstMP < 0 || firstRing < 0 {
					t.Fatalf("%s rank %d step %d: no model-parallel or ring send", mp, i, s)
				}
				switch mp {
				case AfterCompute:
					if firstMP < computeEnd || firstRing < computeEnd {
						t.Errorf("%s rank %d step %d: sends at %v and %v, before the compute phase ended at %v", mp, i, s, firstMP, firstRing, computeEnd)
					}
				case WithCompute:
					if firstMP >= computeEnd {
						t.Errorf("%s rank %d step %d: model-parallel send at %v, after the compute phase ended at %v", mp, i, s, firstMP, computeEnd)
					}
					if firstRing < computeEnd || firstRing < lastMP {
						t.Errorf("%s rank %d step %d: ring send at %v, before the compute phase's end %v or the last model-parallel completion %v", mp, i, s, firstRing, computeEnd, lastMP)
					}
				}
			}
		}
	}
	t.Logf("training time: %v", times)
	if times[WithCompute] >= times[AfterCompute] {
		t.Errorf("training time %v with the exchanges during compute, %v after it: the phase did not overlap", times[WithCompute], times[AfterCompute])
	}
}

func TestParseModelParallel(t *testing.T) {
	for in, want := range map[string]ModelParallel{"": AfterCompute, "after-compute": AfterCompute, "with-compute": WithCompute} {
		if got, err := ParseModelParallel(in); err != nil || got != want {
			t.Errorf("%q: %v, %v", in, got, err)
		}
	}
	if _, err := ParseModelParallel("during"); err == nil {
		t.Error("an unknown schedule was accepted")
	}
	cfg := baseConfig()
	cfg.ModelParallel = "during"
	if err := cfg.Validate(hostIDs(2)); !errors.Is(err, ErrConfig) {
		t.Errorf("Validate: %v", err)
	}
}
