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
// completion goes to its port's handler as soon as the step that made it
// is over. One goroutine: nothing depends on scheduling.
type fakeLoop struct {
	f      *fakeFabric
	now    time.Duration
	timers []fakeTimer
	seq    int
	ports  []*eventHost
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

// deliver hands every queued completion to its port's handler.
func (l *fakeLoop) deliver() bool {
	any := false
	for _, p := range l.ports {
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
		l.ports = append(l.ports, e)
		ranks[i] = EventRank{Port: e, Host: h}
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

// A port that is not on an event loop is refused before anything starts.
func TestRunEventsNeedsALoop(t *testing.T) {
	f := newFakeFabric(1, hostIDs(2)...)
	ranks := []EventRank{{Port: &eventHost{fakeHost: f.hosts[10]}, Host: 10}, {Port: &eventHost{fakeHost: f.hosts[11]}, Host: 11}}
	if _, err := RunEvents(context.Background(), baseConfig(), ranks, nil, nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("no loop: %v", err)
	}
	if _, err := run(context.Background(), baseConfig(), f.ports(hostIDs(2)...), hostIDs(2), nil, &loopDriver{loop: &fakeLoop{f: f}}); !errors.Is(err, ErrConfig) {
		t.Fatalf("poll ports on a loop: %v", err)
	}
}
