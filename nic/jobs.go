package nic

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/forgive-emu/forgive/budget"
)

// JobID names a training job on a host: its steps are its own. FORGIVE's
// ledger is per receiving rank and its step ids are one job's sequence
// (the ledger refuses a step not above one it forgot), so two jobs on one
// host each need a ledger, and a detector, of their own: step 7 of one
// job is not step 7 of another. Job 0 is the host's default job, the
// only one of a simulated host and of a daemon whose clients declare
// none. A flow's gradient bytes count in its job's ledger (FlowSpec.Job).
type JobID uint32

// MaxJobs bounds the jobs with a ledger on one engine, or one group of
// engines, at a time, job 0 included.
const MaxJobs = 1024

// jobBudget is one job's loss budget: its ledger, its critical-regime
// detector and the steps it began, most recent last (at most
// budget.HistorySteps).
type jobBudget struct {
	ledger   *budget.Ledger
	detector *budget.Detector
	steps    []budget.StepID
}

// jobBudgets are the budgets of an engine's jobs, shared by the engines
// of a group under their budget lock.
type jobBudgets struct {
	cfg   Config
	byJob map[JobID]*jobBudget
}

func newJobBudgets(cfg Config, rng *rand.Rand) (*jobBudgets, error) {
	ledger, err := budget.NewLedger(cfg.Budget, rng)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	det, err := budget.NewDetector(cfg.Eta)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return &jobBudgets{cfg: cfg, byJob: map[JobID]*jobBudget{0: {ledger: ledger, detector: det}}}, nil
}

// get returns job j's budget, made on first use: its ledger draws from a
// generator of its own, seeded by the host's seed and the job, so a job's
// forgiveness does not depend on the others'.
func (b *jobBudgets) get(j JobID) (*jobBudget, error) {
	if jb := b.byJob[j]; jb != nil {
		return jb, nil
	}
	if len(b.byJob) >= MaxJobs {
		return nil, fmt.Errorf("%w: job %d: %d jobs have a loss budget on this host, the most it keeps", ErrBadRequest, j, MaxJobs)
	}
	rng := rand.New(rand.NewPCG(b.cfg.Seed^uint64(j)<<20, uint64(b.cfg.Host)<<32|0x6a6f62))
	ledger, err := budget.NewLedger(b.cfg.Budget, rng)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	det, err := budget.NewDetector(b.cfg.Eta)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	jb := &jobBudget{ledger: ledger, detector: det}
	b.byJob[j] = jb
	return jb, nil
}

// ledgerOf is the ledger of job j, or nil for a job without one (a flow
// of a forgotten job has none to count into).
func (e *Engine) ledgerOf(j JobID) *budget.Ledger {
	if jb := e.jobs.byJob[j]; jb != nil {
		return jb.ledger
	}
	return nil
}

// EndJobStep is EndStep for job j's step.
func (e *Engine) EndJobStep(now time.Duration, j JobID, step budget.StepID) {
	now = e.observe(now)
	e.lockBudget()
	defer e.unlockBudget()
	if l := e.ledgerOf(j); l != nil {
		l.OnAllReduceCompleteAt(now, step)
	}
}

// JobStepRecord is StepRecord for job j's step.
func (e *Engine) JobStepRecord(j JobID, step budget.StepID) (budget.StepRecord, bool) {
	e.lockBudget()
	defer e.unlockBudget()
	if l := e.ledgerOf(j); l != nil {
		return l.Record(step)
	}
	return budget.StepRecord{}, false
}

// JobSteps is Steps for job j.
func (e *Engine) JobSteps(j JobID) []budget.StepRecord {
	e.lockBudget()
	defer e.unlockBudget()
	jb := e.jobs.byJob[j]
	if jb == nil {
		return nil
	}
	out := make([]budget.StepRecord, 0, len(jb.steps))
	for _, s := range jb.steps {
		if r, ok := jb.ledger.Record(s); ok {
			out = append(out, r)
		}
	}
	return out
}

// ForgetJob drops job j's budget once the job is gone (its flows
// destroyed), so that the jobs a host has seen do not hold state for
// ever; job 0 is kept.
func (e *Engine) ForgetJob(j JobID) {
	if j == 0 {
		return
	}
	e.lockBudget()
	delete(e.jobs.byJob, j)
	e.unlockBudget()
}
