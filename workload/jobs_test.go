package workload

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
)

// twoJobsFake runs two jobs on one fake loop: job 0 on the first na hosts,
// job 1 on the rest.
func twoJobsFake(t *testing.T, f *fakeFabric, hosts []hostapi.HostID, na int, cfgs [2]Config) ([]*Result, *fakeLoop, error) {
	t.Helper()
	l := &fakeLoop{f: f}
	var jobs [2]EventJob
	for i, h := range hosts {
		e := &eventHost{fakeHost: f.hosts[h]}
		l.apis = append(l.apis, e)
		j := 0
		if i >= na {
			j = 1
		}
		jobs[j].Ranks = append(jobs[j].Ranks, EventRank{API: e, Host: h})
	}
	jobs[0].Config, jobs[1].Config = cfgs[0], cfgs[1]
	res, err := RunEventsJobs(context.Background(), jobs[:], l)
	return res, l, err
}

// Two jobs share one loop: each runs its own steps over its own ranks,
// neither waits for the other, both are exact, and the fabric's rules
// hold.
func TestRunEventsJobsRunsBoth(t *testing.T) {
	hosts := hostIDs(7)
	f := newFakeFabric(3, hosts...)
	f.forgive = forgiveGradient(0.2)
	a, b := baseConfig(), baseConfig()
	a.Steps, b.Steps = 2, 5
	a.Compute, b.Compute = 2*time.Millisecond, time.Millisecond
	b.TPBytes, b.Seed = 300, 7
	res, l, err := twoJobsFake(t, f, hosts, 3, [2]Config{a, b})
	if err != nil {
		t.Fatal(err)
	}
	checkFabric(t, f)
	for j, want := range []int{2, 5} {
		r := res[j]
		if len(r.Steps) != want || r.Mismatches != 0 || !r.NonGradientExact || r.ElementsTested == 0 {
			t.Fatalf("job %d: %d steps, %d mismatches, exact %v", j, len(r.Steps), r.Mismatches, r.NonGradientExact)
		}
		for _, s := range r.Steps {
			if s.End > l.now {
				t.Fatalf("job %d step %d ends at %v on a loop at %v", j, s.Step, s.End, l.now)
			}
		}
	}
	// Job a ended its two steps while job b went on: no job waits for
	// the other's steps.
	if ea, eb := res[0].Steps[1].End, res[1].Steps[4].End; ea >= eb {
		t.Errorf("job a ended at %v, job b at %v", ea, eb)
	}
	if got, want := len(res[1].Steps[0].AllReduce), 4; got != want {
		t.Errorf("job b has %d ranks' all-reduce times, want %d", got, want)
	}
	if res[0].ForgivenBytes+res[1].ForgivenBytes != f.forgivenSent {
		t.Errorf("forgave %d + %d of %d", res[0].ForgivenBytes, res[1].ForgivenBytes, f.forgivenSent)
	}
}

// The same inputs give the same run: the hand-over between the jobs and
// the loop does not depend on goroutine timing.
func TestRunEventsJobsIsDeterministic(t *testing.T) {
	var first []*Result
	for range 3 {
		hosts := hostIDs(6)
		f := newFakeFabric(5, hosts...)
		f.forgive = forgiveGradient(0.3)
		a, b := baseConfig(), baseConfig()
		a.Compute, b.Compute = time.Millisecond, 3*time.Millisecond/2
		res, _, err := twoJobsFake(t, f, hosts, 3, [2]Config{a, b})
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = res
			continue
		}
		for j := range res {
			for s := range res[j].Steps {
				if x, y := first[j].Steps[s], res[j].Steps[s]; x.Start != y.Start || x.End != y.End || x.Forgiven != y.Forgiven {
					t.Fatalf("job %d step %d: %+v, then %+v", j, s+1, x, y)
				}
			}
		}
	}
}

// A job whose step never completes fails, named, and the other job
// still completes every step.
func TestRunEventsJobsOneFails(t *testing.T) {
	hosts := hostIDs(6)
	f := newFakeFabric(8, hosts...)
	// Job b's ring flow from its rank 1, third message: never delivered.
	f.hold = func(flow hostapi.FlowID, h hostapi.HostID, k int) bool { return flow == 1001 && h >= 13 && k == 2*2+1 }
	a, b := baseConfig(), baseConfig()
	a.Steps = 4
	res, _, err := twoJobsFake(t, f, hosts, 3, [2]Config{a, b})
	if !errors.Is(err, ErrStep) || !strings.Contains(err.Error(), "job 1: ") || strings.Contains(err.Error(), "job 0: ") {
		t.Fatalf("error %v, want job 1's ErrStep only", err)
	}
	if res[0] == nil || len(res[0].Steps) != 4 || res[0].Mismatches != 0 {
		t.Fatalf("job 0: %+v", res[0])
	}
	for _, h := range f.hosts {
		if len(h.flows) != 0 || len(h.regions) != 0 {
			t.Fatalf("host %d keeps flows or regions", h.id)
		}
	}
}

// Jobs share no host API, and a run needs a loop and a job.
func TestRunEventsJobsRefuses(t *testing.T) {
	f := newFakeFabric(1, hostIDs(2)...)
	e := &eventHost{fakeHost: f.hosts[10]}
	e2 := &eventHost{fakeHost: f.hosts[11]}
	l := &fakeLoop{f: f}
	jobs := []EventJob{{Config: baseConfig(), Ranks: []EventRank{{API: e, Host: 10}, {API: e2, Host: 11}}},
		{Config: baseConfig(), Ranks: []EventRank{{API: e, Host: 10}}}}
	if _, err := RunEventsJobs(context.Background(), jobs, l); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "job 1: rank 0's port is job 0's too") {
		t.Errorf("shared port: %v", err)
	}
	if _, err := RunEventsJobs(context.Background(), jobs, nil); !errors.Is(err, ErrConfig) {
		t.Errorf("no loop: %v", err)
	}
	if _, err := RunEventsJobs(context.Background(), nil, l); !errors.Is(err, ErrConfig) {
		t.Errorf("no jobs: %v", err)
	}
}
