package workload

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
)

// driver runs the ranks' state machines: it owns the clock and decides who
// reacts to what, when. The ranks' logic is the same under every driver.
type driver interface {
	now() time.Duration
	// check refuses host APIs the driver cannot run.
	check(apis []HostAPI) error
	attach(j *job)
	detach(j *job)
	// step runs step s at every rank: begin, the compute phase, every
	// receive posted, then (once every rank has posted) the sends, and
	// every completion until each rank has finished its work of the step.
	step(ctx context.Context, j *job, s int, critical bool) error
}

// pollDriver runs real daemons: each rank on a goroutine of its own that
// sleeps through the compute phase and blocks in Poll for its
// completions, on the real clock.
type pollDriver struct{ epoch time.Time }

func newPollDriver() *pollDriver { return &pollDriver{epoch: time.Now()} }

func (d *pollDriver) now() time.Duration { return time.Since(d.epoch) }

func (d *pollDriver) check(apis []HostAPI) error {
	for i, p := range apis {
		if _, ok := p.(pollHostAPI); !ok {
			return fmt.Errorf("%w: rank %d's port cannot wait for completions", ErrConfig, i)
		}
	}
	return nil
}

func (d *pollDriver) attach(*job) {}
func (d *pollDriver) detach(*job) {}

func (d *pollDriver) step(ctx context.Context, j *job, s int, critical bool) error {
	ctx, cancel := context.WithTimeout(ctx, j.p.cfg.StepTimeout)
	defer cancel()
	with := j.p.cfg.ModelParallel == WithCompute
	err := parallel(ctx, j.ranks, func(ctx context.Context, r *rank) error {
		if err := r.begin(ctx, s, critical); err != nil {
			return err
		}
		if !with {
			if err := sleep(ctx, j.p.cfg.Compute); err != nil {
				return r.fail("compute phase: %w", err)
			}
		}
		return r.postReceives(ctx)
	})
	if err != nil {
		return err
	}
	commStart := d.now()
	return parallel(ctx, j.ranks, func(ctx context.Context, r *rank) error {
		if err := r.start(ctx, commStart); err != nil {
			return err
		}
		computeEnd := d.epoch.Add(r.st.begin + j.p.cfg.Compute)
		for !r.st.done {
			pollCtx, cancelPoll := ctx, context.CancelFunc(func() {})
			if !r.st.computeDone {
				// The compute phase runs beside the model-parallel
				// exchanges: wait for a completion or for its end.
				pollCtx, cancelPoll = context.WithDeadline(ctx, computeEnd)
			}
			comp, err := r.api.(pollHostAPI).Poll(pollCtx)
			cancelPoll()
			if err != nil && !r.st.computeDone && ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
				if err := r.computeFinished(ctx); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				if errors.Is(err, context.DeadlineExceeded) {
					return r.fail("timed out after %v", j.p.cfg.StepTimeout)
				}
				return r.fail("poll: %w", err)
			}
			if err := r.complete(ctx, comp); err != nil {
				return err
			}
		}
		return nil
	})
}

// parallel runs fn for every rank at once and waits for all of them. The
// first failure cancels the others; errors that only report that
// cancellation are dropped when a real one exists, and the rest are
// joined (a timeout fails every rank still waiting, and each says what it
// waited for).
func parallel(ctx context.Context, ranks []*rank, fn func(context.Context, *rank) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make([]error, len(ranks))
	var wg sync.WaitGroup
	for i, r := range ranks {
		wg.Go(func() {
			if err := fn(ctx, r); err != nil {
				errs[i] = err
				cancel()
			}
		})
	}
	wg.Wait()
	var real, canceled []error
	for _, err := range errs {
		switch {
		case err == nil:
		case errors.Is(err, context.Canceled):
			canceled = append(canceled, err)
		default:
			real = append(real, err)
		}
	}
	if len(real) > 0 {
		return errors.Join(real...)
	}
	if len(canceled) > 0 {
		return canceled[0]
	}
	return nil
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loopDriver runs the ranks on an event loop in virtual time. Everything
// happens on the loop's goroutine in the loop's order: a compute phase is
// a timer, each completion is handled as the loop delivers it, and the
// step's timeout is virtual. The real clock decides nothing.
type loopDriver struct {
	loop Loop
	ctx  context.Context // the current step's
	// The current step's progress.
	posted, finished int
	errs             []error
}

func (d *loopDriver) now() time.Duration { return d.loop.Now() }

func (d *loopDriver) check(apis []HostAPI) error {
	for i, p := range apis {
		if _, ok := p.(EventHostAPI); !ok {
			return fmt.Errorf("%w: rank %d's port is not on an event loop", ErrConfig, i)
		}
	}
	return nil
}

// attach routes every host API's completions to its rank as they happen.
func (d *loopDriver) attach(j *job) {
	d.ctx = context.Background()
	for _, r := range j.ranks {
		r.api.(EventHostAPI).OnCompletion(func(c hostapi.Completion) { d.deliver(r, c) })
	}
}

// detach queues the host APIs' completions again, for the teardown to drain.
func (d *loopDriver) detach(j *job) {
	for _, r := range j.ranks {
		r.api.(EventHostAPI).OnCompletion(nil)
	}
}

func (d *loopDriver) fail(err error) { d.errs = append(d.errs, err) }

// deliver hands a completion to its rank.
func (d *loopDriver) deliver(r *rank, c hostapi.Completion) {
	if len(d.errs) > 0 {
		return // the step failed; the teardown fails what is left
	}
	if r.idle() {
		if tag, _, _, _ := splitWR(c.WRID); tag != r.tag {
			return // an earlier run's work, failed when its flow was destroyed
		}
		d.fail(r.fail("completion outside a step: %+v", c))
		return
	}
	wasDone := r.st.done
	if err := r.complete(d.ctx, c); err != nil {
		d.fail(err)
		return
	}
	if !wasDone && r.st.done {
		d.finished++
	}
}

func (d *loopDriver) step(ctx context.Context, j *job, s int, critical bool) error {
	cfg := &j.p.cfg
	d.ctx, d.posted, d.finished, d.errs = ctx, 0, 0, nil
	start := d.loop.Now()
	// After the compute phase, a rank posts its receives when it ends;
	// with the model-parallel exchanges during it, at once, and the
	// phase's end is a timer of its own.
	post := start + cfg.Compute
	if cfg.ModelParallel == WithCompute {
		post = start
	}
	for _, r := range j.ranks {
		if err := r.begin(ctx, s, critical); err != nil {
			return err
		}
		d.loop.At(post, func() {
			if len(d.errs) > 0 {
				return
			}
			if err := r.postReceives(ctx); err != nil {
				d.fail(err)
				return
			}
			if d.posted++; d.posted == len(j.ranks) {
				d.startAll(j)
			}
		})
		if cfg.ModelParallel == WithCompute {
			d.loop.At(start+cfg.Compute, func() { d.run(r, r.computeFinished) })
		}
	}
	err := d.loop.RunUntil(func() bool {
		return len(d.errs) > 0 || d.finished == len(j.ranks) || ctx.Err() != nil
	}, start+cfg.StepTimeout)
	switch {
	case len(d.errs) > 0:
		return errors.Join(d.errs...)
	case ctx.Err() != nil:
		return fmt.Errorf("%w: step %d: %w", ErrStep, s, ctx.Err())
	case err != nil:
		// Every rank still waiting says what it waited for.
		why := fmt.Sprintf("timed out after %v of virtual time", cfg.StepTimeout)
		if d.loop.Now() < start+cfg.StepTimeout {
			why = "the fabric went idle"
		}
		var errs []error
		for _, r := range j.ranks {
			if !r.idle() {
				errs = append(errs, r.fail("%s (%w)", why, err))
			}
		}
		return errors.Join(errs...)
	}
	return nil
}

// run applies fn to a rank in a step, counting the rank if fn finished it.
func (d *loopDriver) run(r *rank, fn func(context.Context) error) {
	if len(d.errs) > 0 || r.idle() {
		return
	}
	if err := fn(d.ctx); err != nil {
		d.fail(err)
		return
	}
	if r.st.done {
		d.finished++
	}
}

// startAll starts every rank's sends: the barrier after the last rank
// posted its receives.
func (d *loopDriver) startAll(j *job) {
	commStart := d.loop.Now()
	for _, r := range j.ranks {
		if err := r.start(d.ctx, commStart); err != nil {
			d.fail(err)
			return
		}
		if r.st.done {
			d.finished++
		}
	}
}
