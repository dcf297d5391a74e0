package workload

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/hostapi"
)

// Sentinel errors, returned wrapped with the details.
var (
	// ErrConfig reports an unusable Config or rank list.
	ErrConfig = errors.New("workload: invalid config")
	// ErrMismatch reports a gradient element that differs from the exact
	// sum although nothing forgave or shed it.
	ErrMismatch = errors.New("workload: all-reduce sum mismatch")
	// ErrNonGradient reports tensor-parallel, pipeline-parallel or
	// background bytes that did not arrive exactly, or were forgiven.
	ErrNonGradient = errors.New("workload: non-gradient payload not exact")
	// ErrStep reports a step that failed: a completion with an error, a
	// lost daemon, or a step that exceeded its timeout.
	ErrStep = errors.New("workload: step failed")
)

// Limits of the job and of the work-request ids. MaxRanks is the host
// ids' (16 bits, less the top bit); the flow ids' banks are sized from
// the job itself, and Validate refuses a job whose ids would not fit 32
// bits above its FlowBase.
const (
	MaxRanks = 1 << 15
	MaxSteps = 1<<16 - 1
)

// Defaults.
const (
	DefaultStepTimeout  = 30 * time.Second
	DefaultBurstSenders = 7
)

// Config describes the training job.
type Config struct {
	Steps int // steps to run, numbered from 1
	// GradientBytes is each rank's gradient per step, float32 elements;
	// it is rounded up to a multiple of 4 x ranks so it splits into equal
	// chunks.
	GradientBytes int
	Compute       time.Duration // compute phase before each step's communication
	// TPBytes is the tensor-parallel message each rank of a pair (2k, 2k+1)
	// sends the other on every step; 0 = off.
	TPBytes int
	// PPBytes is the pipeline-parallel message rank i sends rank (i+N/2)%N
	// on every step; 0 = off.
	PPBytes int
	// ModelParallel says when the tensor- and pipeline-parallel exchanges
	// run: AfterCompute (the default) starts them with the all-reduce
	// once the compute phase ends; WithCompute runs them during the
	// compute phase, as a Megatron-style job does in its forward and
	// backward passes, and a rank starts its all-reduce once its compute
	// phase has ended and its own exchanges have completed.
	ModelParallel ModelParallel
	// TensorParallel says where the tensor-parallel exchanges run:
	// TPNetwork (the default) on the fabric, on a flow per pair; TPLocal
	// off it, as on NVLink inside a node: the pair has no flow, no buffer
	// and no message, and the exchange takes no time of the step (the
	// lab's docs/profiles.md, "The seed's fabric and step", says why no
	// time). TPBytes stays the job's size.
	TensorParallel TensorParallel
	Burst          BurstConfig
	// Critical classifies a step (the fixed schedule); used when Norms is
	// nil. nil means budget.DefaultSchedule: steps 1, 2, 3 and 20 critical.
	Critical func(step int) bool
	// Norms, when set, gives per step (Norms[s-1]) the per-layer gradient
	// norms the daemons' detectors classify the step from.
	Norms [][]float64
	// Eta is the daemons' detector threshold, mirrored locally to know the
	// classification of a step (0: budget.DefaultEta).
	Eta float64
	// Shed turns on DBLP's sender-side shedding baseline; nil = off.
	Shed *ShedConfig
	// OwnerNotices runs the application's half of the daemons' gather
	// policy owner (docs/hostapi.md, "Gather policies"). On a compiled
	// schedule (Collective) a finished value's owner may send it to
	// several ranks, which one notice cannot zero alike everywhere: there
	// every finished value is declared gather, so the daemons repair it,
	// and the replicas stay identical as under the policy repair. On the
	// flat ring each rank tells
	// its ring predecessor, the owner of the chunk it received in the
	// all-gather's first round, which ranges of it were forgiven, in a
	// notice on a flow of class other, one per step; the owner zeroes
	// them in its own copy once its send of the chunk has completed, and
	// the step ends at a rank only when its notice is in. Not with Shed.
	OwnerNotices bool
	// Seed picks the gradient values and the non-gradient payloads.
	Seed        uint64
	StepTimeout time.Duration // 0: DefaultStepTimeout

	Entropy  hostapi.Entropy // path policy of every flow; default single path
	Subflows uint8           // with EntropySubflows
	// PayloadFree runs the job without payload bytes, on host APIs whose
	// regions have a length and no memory (the simulator's payload-free
	// mode): nothing is written into a send or read from a receive, so
	// the gradient sums and the non-gradient payloads are not checked
	// (Result.DataChecked is false). Every other check still runs: every
	// completion, and each message's accounting (its length arrived, and
	// nothing forgiven outside the gradients).
	PayloadFree bool
	// FlowBase offsets every flow id (see the package doc).
	FlowBase hostapi.FlowID
	// StepBase offsets the step ids the daemons see: step s is StepBase+s.
	// A daemon's closed steps never reopen, so a second run on the same
	// daemons needs a StepBase past the first run's last step.
	StepBase uint64
	// Collective is the gradient all-reduce's schedule and groups; the
	// zero value is the flat ring over every rank.
	Collective Collective

	groups *groups // Collective compiled by withDefaults; nil for the flat ring
}

// ModelParallel is when a step's model-parallel exchanges run.
type ModelParallel string

// The two schedules of the model-parallel exchanges.
const (
	AfterCompute ModelParallel = "after-compute"
	WithCompute  ModelParallel = "with-compute"
)

// ParseModelParallel reads a schedule's name; empty is AfterCompute.
func ParseModelParallel(s string) (ModelParallel, error) {
	switch m := ModelParallel(s); m {
	case "", AfterCompute:
		return AfterCompute, nil
	case WithCompute:
		return m, nil
	}
	return "", fmt.Errorf("model-parallel schedule %q: want %s or %s", s, AfterCompute, WithCompute)
}

// TensorParallel is where a step's tensor-parallel exchanges run.
type TensorParallel string

// The two places of the tensor-parallel exchanges.
const (
	TPNetwork TensorParallel = "network"
	TPLocal   TensorParallel = "local"
)

// ParseTensorParallel reads a place's name; empty is TPNetwork.
func ParseTensorParallel(s string) (TensorParallel, error) {
	switch t := TensorParallel(s); t {
	case "", TPNetwork:
		return TPNetwork, nil
	case TPLocal:
		return t, nil
	}
	return "", fmt.Errorf("tensor-parallel placement %q: want %s or %s", s, TPNetwork, TPLocal)
}

// BurstConfig is background incast: Senders ranks (1..Senders) each send
// Bytes to rank 0 on the listed steps.
type BurstConfig struct {
	Senders int // 0: DefaultBurstSenders, at most ranks-1
	Bytes   int // 0 = off
	Steps   []int
}

// ShedConfig is DBLP's shedding: the sender of a gradient message skips it
// iff budget.Shed(Seed, step, rank, message, p), p = PLow on critical steps
// and PHigh on the others.
type ShedConfig struct {
	PLow, PHigh float64
	Seed        uint64
}

// Rank is one training rank: its connection to its host's daemon, and
// that host's id on the fabric.
type Rank struct {
	Client *hostapi.Client
	Host   hostapi.HostID
}

// Observer hears about steps; Run calls it from its own goroutine, between
// steps (StepStarted before a step's BeginStep, StepDone after it was
// verified).
type Observer interface {
	StepStarted(step int, critical bool)
	StepDone(step int, s StepResult)
}

// Validate checks cfg for ranks on hosts as Run will, without running
// anything.
func (cfg Config) Validate(hosts []hostapi.HostID) error {
	_, err := cfg.withDefaults(hosts)
	return err
}

// withDefaults validates cfg for n ranks on hosts and fills its defaults.
func (cfg Config) withDefaults(hosts []hostapi.HostID) (Config, error) {
	n := len(hosts)
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	switch {
	case n < 2 || n > MaxRanks:
		bad("%d ranks, want 2..%d", n, MaxRanks)
	case cfg.Steps < 1 || cfg.Steps > MaxSteps:
		bad("steps %d, want 1..%d", cfg.Steps, MaxSteps)
	case cfg.GradientBytes < 1 || cfg.GradientBytes > 1<<30:
		bad("gradient bytes %d, want 1..%d", cfg.GradientBytes, 1<<30)
	case cfg.TPBytes < 0 || cfg.PPBytes < 0 || cfg.Burst.Bytes < 0 || cfg.Compute < 0 || cfg.StepTimeout < 0:
		bad("negative size or duration")
	case cfg.TPBytes > 1<<30 || cfg.PPBytes > 1<<30 || cfg.Burst.Bytes > 1<<30:
		bad("a message exceeds 1 GiB")
	}
	if len(errs) > 0 {
		return cfg, fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	if m, err := ParseModelParallel(string(cfg.ModelParallel)); err != nil {
		bad("%w", err)
	} else {
		cfg.ModelParallel = m
	}
	if t, err := ParseTensorParallel(string(cfg.TensorParallel)); err != nil {
		bad("%w", err)
	} else {
		cfg.TensorParallel = t
	}
	seen := map[hostapi.HostID]int{}
	for i, h := range hosts {
		if j, dup := seen[h]; dup {
			bad("ranks %d and %d share host %d: each rank needs its own daemon", j, i, h)
		}
		seen[h] = i
	}
	if cfg.OwnerNotices && cfg.Shed != nil {
		bad("owner notices with sender-side shedding: a shed all-gather message has no receive to report on")
	}
	cfg.groups = nil
	if cfg.Collective.Flat() {
		cfg.GradientBytes = roundUp(cfg.GradientBytes, 4*n)
	} else {
		tp := cfg.Collective.tp()
		cfg.GradientBytes = roundUp(cfg.GradientBytes, 4*max(n/tp, 1))
		if cfg.Collective.TPCollective != "" {
			cfg.TPBytes = roundUp(cfg.TPBytes, 4*tp)
			if cfg.TPBytes == 0 || cfg.TensorParallel == TPLocal {
				bad("tp-collective %s: the tensor-parallel exchanges need bytes on the fabric (tp bytes %d, %s)", cfg.Collective.TPCollective, cfg.TPBytes, cfg.TensorParallel)
			}
		}
		if g, err := newGroups(cfg.Collective, n, cfg.GradientBytes, cfg.TPBytes); err != nil {
			bad("collective %v: %w", cfg.Collective, err)
		} else {
			cfg.groups = g
		}
	}
	if cfg.StepTimeout == 0 {
		cfg.StepTimeout = DefaultStepTimeout
	}
	if cfg.StepTimeout <= cfg.Compute {
		bad("step timeout %v does not exceed the compute phase %v", cfg.StepTimeout, cfg.Compute)
	}
	if cfg.Eta == 0 {
		cfg.Eta = budget.DefaultEta
	}
	if cfg.Norms != nil && len(cfg.Norms) < cfg.Steps {
		bad("norms for %d steps, want %d", len(cfg.Norms), cfg.Steps)
	}
	if cfg.Critical == nil {
		cfg.Critical = func(step int) bool { return budget.DefaultSchedule().Critical(budget.StepID(step)) }
	}
	if s := cfg.Shed; s != nil && (!probability(s.PLow) || !probability(s.PHigh)) {
		bad("shedding probabilities %v and %v, want 0..1", s.PLow, s.PHigh)
	}
	if cfg.Burst.Bytes > 0 && len(cfg.Burst.Steps) > 0 {
		if cfg.Burst.Senders == 0 {
			cfg.Burst.Senders = min(DefaultBurstSenders, n-1)
		}
		if cfg.Burst.Senders < 1 || cfg.Burst.Senders > n-1 {
			bad("%d burst senders, want 1..%d", cfg.Burst.Senders, n-1)
		}
	}
	if len(errs) > 0 {
		return cfg, fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	if top := (&plan{cfg: cfg, n: n, groups: cfg.groups}).maxFlowID(); uint64(cfg.FlowBase)+top > math.MaxUint32 {
		bad("flow base %d leaves no room for the flow ids", cfg.FlowBase)
	}
	if len(errs) > 0 {
		return cfg, fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return cfg, nil
}

func probability(p float64) bool { return p >= 0 && p <= 1 }

func roundUp(x, m int) int { return (x + m - 1) / m * m }

// burstOn reports whether step has the background burst.
func (cfg *Config) burstOn(step int) bool {
	if cfg.Burst.Bytes == 0 {
		return false
	}
	for _, s := range cfg.Burst.Steps {
		if s == step {
			return true
		}
	}
	return false
}

// RegisteredBytes is the memory the job registers on its ranks, over all
// of them: what a run with payloads allocates (a payload-free one
// allocates none of it).
func (cfg Config) RegisteredBytes(hosts []hostapi.HostID) (int64, error) {
	cfg, err := cfg.withDefaults(hosts)
	if err != nil {
		return 0, err
	}
	cfg.PayloadFree = true // the layout alone: no payload templates
	p := newPlan(cfg, hosts)
	var n int64
	for i := range hosts {
		n += int64(p.layout(i).size)
	}
	return n, nil
}
