package workload

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
)

// EventJob is one job of a run of several jobs on one event loop: its own
// configuration, ranks and observer.
type EventJob struct {
	Config   Config
	Ranks    []EventRank
	Observer Observer
}

// RunEventsJobs runs several jobs at once on one event loop, as
// [RunEvents] runs one: each job has its own ranks (on hosts no other job
// uses), its own steps, ring all-reduce, flows and per-step budget, and
// the jobs share the loop's fabric and its virtual clock. A job does not
// wait for the others: it starts its next step when its own last rank
// finishes.
//
// It returns every job's result (nil for a job that failed before its
// first step) and the jobs' errors joined, each naming its job. Nothing
// depends on goroutine timing: each job runs on a goroutine of its own,
// but only one of them, or the loop, runs at any moment, handing over in
// a fixed order, so a deterministic loop gives a deterministic run.
// RunEventsJobs must be called on the loop's goroutine, with the loop not
// running.
func RunEventsJobs(ctx context.Context, jobs []EventJob, loop Loop) ([]*Result, error) {
	if loop == nil {
		return nil, fmt.Errorf("%w: no event loop", ErrConfig)
	}
	if len(jobs) == 0 {
		return nil, fmt.Errorf("%w: no jobs", ErrConfig)
	}
	seen := map[EventHostAPI]int{}
	for j, jb := range jobs {
		for i, r := range jb.Ranks {
			if r.API == nil {
				return nil, fmt.Errorf("%w: job %d: rank %d has no port", ErrConfig, j, i)
			}
			if o, ok := seen[r.API]; ok {
				return nil, fmt.Errorf("%w: job %d: rank %d's port is job %d's too: jobs share no host", ErrConfig, j, i, o)
			}
			seen[r.API] = j
		}
	}
	m := &mux{real: loop, yield: make(chan muxMsg), waits: make([]*muxWait, len(jobs))}
	res := make([]*Result, len(jobs))
	errs := make([]error, len(jobs))
	running := 0
	handle := func(msg muxMsg) {
		if msg.wait != nil {
			m.waits[msg.job] = msg.wait
			return
		}
		m.waits[msg.job] = nil
		res[msg.job], errs[msg.job] = msg.res, msg.err
		running--
	}
	// Each job starts in turn and runs until it first waits on the loop,
	// so the jobs set up in a fixed order.
	for j, jb := range jobs {
		apis := make([]HostAPI, len(jb.Ranks))
		hosts := make([]hostapi.HostID, len(jb.Ranks))
		for i, r := range jb.Ranks {
			apis[i], hosts[i] = r.API, r.Host
		}
		jl := &jobLoop{m: m, job: j}
		running++
		go func() {
			r, err := run(ctx, jb.Config, apis, hosts, jb.Observer, &loopDriver{loop: jl})
			m.yield <- muxMsg{job: j, res: r, err: err}
		}()
		handle(<-m.yield)
	}
	for running > 0 {
		ready := m.ready()
		if len(ready) == 0 {
			limit := time.Duration(1<<63 - 1)
			for _, w := range m.waits {
				if w != nil {
					limit = min(limit, w.limit)
				}
			}
			err := m.real.RunUntil(func() bool { return m.anyDone() }, limit)
			if err != nil {
				// A job whose limit passed times out; a loop gone idle
				// (or livelocked) before any limit fails every waiting job.
				idle := m.real.Now() < limit
				for _, w := range m.waits {
					if w != nil && (idle || w.limit == limit) && !w.done() {
						w.err = err
					}
				}
			}
			ready = m.ready()
		}
		for _, j := range ready {
			w := m.waits[j]
			m.waits[j] = nil
			w.resume <- w.err
			handle(<-m.yield)
		}
	}
	var all []error
	for j, err := range errs {
		if err != nil {
			all = append(all, fmt.Errorf("job %d: %w", j, err))
		}
	}
	return res, errors.Join(all...)
}

// mux hands the loop to one job at a time.
type mux struct {
	real  Loop
	yield chan muxMsg
	waits []*muxWait // by job: what it waits for; nil while it runs or when it is done
}

// muxMsg is a job handing control back: it waits (wait), or it ended.
type muxMsg struct {
	job  int
	wait *muxWait
	res  *Result
	err  error
}

// muxWait is one job's RunUntil.
type muxWait struct {
	done   func() bool
	limit  time.Duration
	err    error
	resume chan error
}

// ready lists, in job order, the waiting jobs to resume: their condition
// holds or their wait failed.
func (m *mux) ready() []int {
	var out []int
	for j, w := range m.waits {
		if w != nil && (w.err != nil || w.done()) {
			out = append(out, j)
		}
	}
	return out
}

func (m *mux) anyDone() bool {
	for _, w := range m.waits {
		if w != nil && w.done() {
			return true
		}
	}
	return false
}

// jobLoop is one job's view of the shared loop: its RunUntil hands the
// loop back to the mux until the job's condition holds.
type jobLoop struct {
	m   *mux
	job int
}

func (l *jobLoop) Now() time.Duration { return l.m.real.Now() }

func (l *jobLoop) At(t time.Duration, fn func()) { l.m.real.At(t, fn) }

func (l *jobLoop) RunUntil(done func() bool, limit time.Duration) error {
	w := &muxWait{done: done, limit: limit, resume: make(chan error)}
	l.m.yield <- muxMsg{job: l.job, wait: w}
	return <-w.resume
}
