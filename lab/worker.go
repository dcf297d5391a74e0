package lab

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/forgive-emu/forgive/lab/results"
)

// WorkerArg is the first argument that makes a program a sweep's worker:
// with Options.Jobs > 1 the lab starts its own executable with it, once
// per run, and the program must then call ServeWorker (forgivectl has a
// hidden lab-worker command; the lab's tests dispatch in TestMain).
const WorkerArg = "lab-worker"

// workerRequest is what a worker reads on its standard input: the sweep's
// options, its id as the parent derived it, and the run: its policy as the
// value the parent resolved (every kind by its package's name), not a
// name to look up again.
type workerRequest struct {
	Sweep  string               `json:"sweep"`
	Opts   results.SweepOptions `json:"options"`
	Policy Policy               `json:"policy"`
	Seed   uint64               `json:"seed"`
	// PayloadFree is the parent's choice for every run of the sweep.
	PayloadFree bool `json:"payload_free"`
	// Workers is Options.Workers: how the run runs, not what it is.
	Workers int `json:"workers,omitempty"`
}

// workerReply is what it writes on its standard output.
type workerReply struct {
	Run  results.Run     `json:"run"`
	Wall results.WallRun `json:"wall"`
	// Pattern is the run's loss-pattern file (Run.PatternFile, which
	// results.json leaves out).
	Pattern []byte `json:"pattern,omitempty"`
}

// ServeWorker runs the one run the request on r asks for in the simulator
// and writes its results to w. The options are checked as Run checks
// them; options that do not derive the parent's sweep id (a topology,
// profile or trace changed since the sweep started) are refused.
func ServeWorker(ctx context.Context, r io.Reader, w io.Writer) error {
	var req workerRequest
	dec := json.NewDecoder(r)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return fmt.Errorf("lab worker: read the request: %w", err)
	}
	opts, err := optionsFrom(req.Opts)
	if err != nil {
		return err
	}
	if opts.Placement != PlacementSim {
		return fmt.Errorf("%w: lab worker: placement %q: workers run the %s placement only", ErrInput, opts.Placement, PlacementSim)
	}
	opts.PayloadFree = PayloadsOff
	if req.PayloadFree {
		opts.PayloadFree = PayloadsOn
	}
	opts.Workers = req.Workers
	p, err := check(opts)
	if err != nil {
		return err
	}
	so, err := p.sweepOptions()
	if err != nil {
		return err
	}
	if id := results.SweepID(so); id != req.Sweep {
		return fmt.Errorf("lab worker: the options derive sweep %s, not the parent's %s (did a topology, profile or trace file change?)", id, req.Sweep)
	}
	// The policy is run as it came, once it is one of the sweep's.
	ofSweep := slices.ContainsFunc(p.policies, func(q Policy) bool { return reflect.DeepEqual(q, req.Policy) })
	if !ofSweep || req.Seed < 1 || req.Seed > uint64(p.opts.Seeds) {
		return fmt.Errorf("%w: lab worker: policy %q seed %d is no run of the sweep", ErrInput, req.Policy.Name, req.Seed)
	}
	run, wall, err := p.runOne(ctx, req.Policy, req.Seed, 0, nil)
	if err != nil {
		return err
	}
	return json.NewEncoder(w).Encode(workerReply{Run: run, Wall: wall, Pattern: run.PatternFile})
}

// runWorker runs one run of the sweep in a worker process: the running
// executable started with WorkerArg, so memory is per run and a crash
// stops that run only.
func (p *prepared) runWorker(ctx context.Context, id string, so results.SweepOptions, sr sweepRun) (results.Run, results.WallRun, error) {
	self, err := os.Executable()
	if err != nil {
		return results.Run{}, results.WallRun{}, fmt.Errorf("worker: %w", err)
	}
	req, err := json.Marshal(workerRequest{Sweep: id, Opts: so, Policy: sr.policy, Seed: sr.seed, PayloadFree: p.payloadFree, Workers: p.opts.Workers})
	if err != nil {
		return results.Run{}, results.WallRun{}, err
	}
	var stdout bytes.Buffer
	stderr := &tail{max: 4096}
	cmd := exec.CommandContext(ctx, self, WorkerArg)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(req), &stdout, stderr
	// The kernel kills the worker if the lab dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return results.Run{}, results.WallRun{}, ctx.Err()
		}
		msg := strings.TrimSpace(stderr.String())
		if msg == "" {
			msg = "(no output)"
		}
		return results.Run{}, results.WallRun{}, fmt.Errorf("worker %s: %w: %s", self, err, msg)
	}
	var rep workerReply
	dec := json.NewDecoder(&stdout)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		return results.Run{}, results.WallRun{}, fmt.Errorf("worker %s: its results: %w", self, err)
	}
	if rep.Run.Policy != sr.policy.Name || rep.Run.Seed != sr.seed {
		return results.Run{}, results.WallRun{}, fmt.Errorf("worker %s: asked for %s seed %d, answered %s seed %d", self, sr.policy.Name, sr.seed, rep.Run.Policy, rep.Run.Seed)
	}
	rep.Run.PatternFile = rep.Pattern
	return rep.Run, rep.Wall, nil
}

// runParallel runs the sweep's runs in up to jobs workers at once and
// returns their results in the sweep's order. The first run that fails
// stops the others; its error is returned (the earliest in the sweep's
// order if several failed).
func (p *prepared) runParallel(parent context.Context, id string, so results.SweepOptions, runs []sweepRun, jobs int, bar *progress) ([]results.Run, []results.WallRun, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	out := make([]results.Run, len(runs))
	walls := make([]results.WallRun, len(runs))
	errs := make([]error, len(runs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range jobs {
		wg.Go(func() {
			for i := range next {
				sr := runs[i]
				bar.started(sr.policy.Name, sr.seed)
				out[i], walls[i], errs[i] = p.runWorker(ctx, id, so, sr)
				if errs[i] != nil {
					cancel()
					bar.failed(sr.policy.Name, sr.seed)
					continue
				}
				bar.finished(sr.policy.Name, sr.seed, out[i], walls[i])
			}
		})
	}
feed:
	for i := range runs {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	var first error
	for i, err := range errs {
		if err == nil {
			continue
		}
		err = fmt.Errorf("lab: policy %s, seed %d: %w", runs[i].policy.Name, runs[i].seed, err)
		if !errors.Is(err, context.Canceled) {
			return nil, nil, err // the run that stopped the others
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = parent.Err() // cancelled before every run started
	}
	if first != nil {
		return nil, nil, first
	}
	return out, walls, nil
}

// tail keeps the last max bytes written to it.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(b), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
