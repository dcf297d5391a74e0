package budget

import (
	"fmt"
	"time"
)

// StepID identifies a training step. Schedules number steps from 1.
type StepID uint64

// Rand is the source of the forgiveness draw. *math/rand/v2.Rand satisfies
// it. Float64 must return a value in [0, 1).
type Rand interface{ Float64() float64 }

// Ledger is one receiving rank's loss budgets, one per training step:
// "FORGIVE gives each receiving rank one loss budget per training step ...
// Each receiving rank owns its loss budget, and all flows to that rank share
// it." "No rank reads another's."
type Ledger struct {
	cfg         Config
	rand        Rand
	pLow, pHigh fraction
	steps       map[StepID]*entry // open steps and the kept history

	open int // open steps in steps

	// history holds the closed steps still kept, oldest at head.
	history [HistorySteps]StepID
	head    int
	closed  int

	// forgotten is set once a closed step has left the history;
	// forgottenMax is the highest such step.
	forgotten    bool
	forgottenMax StepID

	// early holds the bytes of steps not yet opened that arrived anyway
	// (at most MaxOpenSteps steps; the rest count only in unbudgeted),
	// moved into the step's record when it opens. unbudgeted counts every
	// such byte.
	early      map[StepID]int64
	unbudgeted int64

	// now is the latest time a caller passed in; the methods without a
	// time use it.
	now time.Duration
}

// entry is one step's state: the record the ledger reports plus p held
// exactly.
type entry struct {
	StepRecord
	p     fraction
	trims fifths
}

// NewLedger returns an empty ledger. r is drawn from once for each trimmed
// header that passes the vesting rule and the budget bound.
func NewLedger(cfg Config, r Rand) (*Ledger, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if r == nil {
		return nil, fmt.Errorf("%w: nil Rand", ErrConfig)
	}
	return &Ledger{
		cfg:   cfg,
		rand:  r,
		pLow:  exactFraction(cfg.PLow),
		pHigh: exactFraction(cfg.PHigh),
		steps: make(map[StepID]*entry),
		early: make(map[StepID]int64),
	}, nil
}

// Config returns the ledger's configuration.
func (l *Ledger) Config() Config { return l.cfg }

// OnStepBegin opens the step's loss budget. It is Receiver::OnStepBegin with
// the detector's classification and ExpectedGradientBytes(step) passed in:
//
//	entry.p = critical ? P_low : P_high
//	entry.budget = Floor(entry.p * ExpectedGradientBytes(step))
//
// "The collective schedule already says how many gradient bytes a step will
// bring a rank, so the receiver can size that loss budget before the first
// byte arrives." The floor is exact (see exact.go). Beginning a step that is
// open, closed, or older than the kept history is an error: "a closed loss
// budget never reopens."
func (l *Ledger) OnStepBegin(step StepID, critical bool, expectedBytes int64) error {
	return l.OnStepBeginAt(l.now, step, critical, expectedBytes)
}

// observe keeps the ledger's time monotonic and returns it.
func (l *Ledger) observe(now time.Duration) time.Duration {
	if now > l.now {
		l.now = now
	}
	return l.now
}

// OnStepBeginAt is OnStepBegin at time now: the step's span, over which its
// trims are placed in fifths (StepRecord.FirstFifthTrimmed and the rest),
// starts at now. A step opened by OnStepOpenAt and not yet classified is
// classified instead (OnStepClassifyAt, expectedBytes as there).
func (l *Ledger) OnStepBeginAt(now time.Duration, step StepID, critical bool, expectedBytes int64) error {
	if e := l.steps[step]; e != nil && e.Open && !e.Classified {
		return l.OnStepClassifyAt(now, step, critical, expectedBytes)
	}
	return l.open1(now, step, true, critical, expectedBytes)
}

// OnStepOpenAt opens the step's loss budget before the step is
// classified, so that bytes arriving before the classification are
// budgeted: the step counts as critical until OnStepClassifyAt, with p =
// P_low (or P_high, if the configuration makes it the smaller), the
// tighter budget. "A step the detector never classified has no loss
// budget" still holds in the sense that matters: an unclassified step
// never has more budget than the classification will give it.
func (l *Ledger) OnStepOpenAt(now time.Duration, step StepID, expectedBytes int64) error {
	return l.open1(now, step, false, true, expectedBytes)
}

// OnStepClassifyAt classifies a step opened by OnStepOpenAt: p becomes
// P_low or P_high and the budget floor(p × expected). expectedBytes is 0
// (keep the open's) or the open's; anything else is ErrBadCount. The
// bytes already received, forgiven and outstanding stay as they are:
// nothing is charged again. The classification never lowers p (the open
// used the smaller of P_low and P_high), so forgiven, which was at most
// the smaller budget and p/(1-p) × received at the smaller p, stays within
// both bounds at the new one.
func (l *Ledger) OnStepClassifyAt(now time.Duration, step StepID, critical bool, expectedBytes int64) error {
	l.observe(now)
	e := l.steps[step]
	switch {
	case e == nil:
		return fmt.Errorf("%w: step %d was never opened", ErrUnknownStep, step)
	case !e.Open:
		return fmt.Errorf("%w: step %d cannot be classified after it closed", ErrStepClosed, step)
	case e.Classified:
		return fmt.Errorf("%w: step %d is already classified", ErrStepOpen, step)
	case expectedBytes != 0 && expectedBytes != e.Expected:
		return fmt.Errorf("%w: step %d was opened expecting %d bytes, classified expecting %d", ErrBadCount, step, e.Expected, expectedBytes)
	}
	p, frac := l.classP(critical)
	e.p, e.P, e.Critical, e.Classified = frac, p, critical, true
	e.Budget = int64(frac.mulFloor(uint64(e.Expected)))
	return nil
}

// classP is the classification's p, as the config gives it and exactly.
func (l *Ledger) classP(critical bool) (float64, fraction) {
	if critical {
		// "A critical step can afford less loss."
		return l.cfg.PLow, l.pLow
	}
	return l.cfg.PHigh, l.pHigh
}

// open1 opens a step, classified or not.
func (l *Ledger) open1(now time.Duration, step StepID, classified, critical bool, expectedBytes int64) error {
	now = l.observe(now)
	if expectedBytes < 0 || expectedBytes > MaxStepBytes {
		return fmt.Errorf("%w: step %d expects %d bytes, want 0..%d", ErrBadCount, step, expectedBytes, int64(MaxStepBytes))
	}
	if e := l.steps[step]; e != nil {
		if e.Open {
			return fmt.Errorf("%w: step %d", ErrStepOpen, step)
		}
		return fmt.Errorf("%w: step %d cannot begin again", ErrStepClosed, step)
	}
	if l.forgotten && step <= l.forgottenMax {
		return fmt.Errorf("%w: step %d is not above forgotten step %d, so it may have closed", ErrStepTooOld, step, l.forgottenMax)
	}
	if l.open >= MaxOpenSteps {
		return fmt.Errorf("%w: %d open, step %d refused", ErrTooManyOpen, l.open, step)
	}
	p, frac := l.classP(critical)
	if !classified && l.cfg.PHigh < l.cfg.PLow {
		p, frac = l.cfg.PHigh, l.pHigh
	}
	early := l.early[step]
	delete(l.early, step)
	if early > MaxStepBytes {
		early = MaxStepBytes
	}
	l.steps[step] = &entry{
		p:     frac,
		trims: fifths{begin: now},
		StepRecord: StepRecord{
			Step:       step,
			Critical:   critical,
			Classified: classified,
			P:          p,
			Expected:   expectedBytes,
			Budget:     int64(frac.mulFloor(uint64(expectedBytes))),
			Open:       true,
			// The bytes that came before the budget are received bytes
			// of the step all the same; they were never charged.
			Received:        early,
			UnbudgetedBytes: early,
		},
	}
	l.open++
	return nil
}

// OnAllReduceComplete closes the step: "The step is over. Any range trimmed
// later is requested for retransmission." Closing an unknown or closed step
// does nothing. The closed step's record stays readable for the next
// HistorySteps closes.
func (l *Ledger) OnAllReduceComplete(step StepID) { l.OnAllReduceCompleteAt(l.now, step) }

// OnAllReduceCompleteAt is OnAllReduceComplete at time now: the step's
// span ends at now, and its record gets the span and the fifths.
func (l *Ledger) OnAllReduceCompleteAt(now time.Duration, step StepID) {
	now = l.observe(now)
	e := l.steps[step]
	if e == nil || !e.Open {
		return
	}
	e.trims.close(now, &e.StepRecord)
	e.Open = false
	l.open--
	l.remember(step)
}

// remember appends a closed step to the history, forgetting the oldest one
// when the history is full.
func (l *Ledger) remember(step StepID) {
	if l.closed < HistorySteps {
		l.history[(l.head+l.closed)%HistorySteps] = step
		l.closed++
		return
	}
	old := l.history[l.head]
	delete(l.steps, old)
	if !l.forgotten || old > l.forgottenMax {
		l.forgotten, l.forgottenMax = true, old
	}
	l.history[l.head] = step
	l.head = (l.head + 1) % HistorySteps
}

// OnTrim is the ledger's half of Receiver::OnTrimmedHeader, for one trimmed
// header of a gradient all-reduce flow. The caller has already computed
// missing = Count(Unsettled(flow, range)) > 0, and newlyOutstanding, the
// bytes of missing not yet marked (counted) Requested. The caller then acts
// on the decision: Forgive means mark missing Forgiven and acknowledge past
// it; otherwise Repair. Counted means the missing bytes are now counted in
// the step's outstanding, so the caller marks them Requested as counted
// bytes; it is false when no budget could take them.
//
// It never panics: an inconsistent report (missing <= 0, newlyOutstanding
// outside 0..missing, or a missing range larger than what is outstanding
// after the new bytes) is refused with ReasonInconsistent and counted in
// the step's record, leaving the budget untouched.
func (l *Ledger) OnTrim(step StepID, missing, newlyOutstanding int64) Decision {
	return l.OnTrimAt(l.now, step, missing, newlyOutstanding)
}

// OnTrimAt is OnTrim for a trimmed header that reached the receiver at
// now. A trim decided while the step is open counts its missing bytes in
// the step's timeline, and as forgiven when it was forgiven, for the
// seed's trim-level accounting.
func (l *Ledger) OnTrimAt(now time.Duration, step StepID, missing, newlyOutstanding int64) Decision {
	return l.OnTrimPhaseAt(now, step, PhaseUnspecified, missing, newlyOutstanding)
}

// OnTrimPhaseAt is OnTrimAt for a message the application declared of
// phase ph. A range the gather policy does not let be forgiven (a
// finished value under GatherRepair, a PhaseGather one under GatherOwner)
// is repaired with ReasonGather before the budget sees it: nothing is
// counted, so it adds nothing to the step's outstanding and cannot set
// budget-exhausted, and the flow keeps its sender exemption, like a
// tensor-parallel range on a non-gradient flow.
func (l *Ledger) OnTrimPhaseAt(now time.Duration, step StepID, ph Phase, missing, newlyOutstanding int64) Decision {
	now = l.observe(now)
	e := l.steps[step]
	switch {
	case e == nil:
		// "A step the detector never classified has no loss budget and
		// must go through ordinary loss recovery."
		return Decision{Reason: ReasonNoStep}
	case !e.Open:
		// "No loss budget is open for this step, so there is nothing to
		// charge."
		e.LateTrims++
		return Decision{Reason: ReasonStepClosed}
	case !e.trimConsistent(missing, newlyOutstanding):
		e.Inconsistent++
		return Decision{Reason: ReasonInconsistent}
	case !l.cfg.Gather.Forgivable(ph):
		e.GatherRepairs++
		e.GatherRepairBytes += missing
		return Decision{Reason: ReasonGather}
	}

	// "A range trimmed again is already outstanding. Count only its new
	// bytes."
	e.Outstanding += newlyOutstanding
	e.TrimmedBytes += newlyOutstanding
	e.Trims++

	reason := l.decide(e, missing)
	if reason != ReasonForgiven {
		// "A range the draw refuses charges nothing and stays
		// outstanding." So does a range the vesting rule refuses.
		e.countRefusal(reason)
		e.trims.add(now, missing, false)
		return Decision{Counted: true, Reason: reason}
	}
	// "Forgiving charges the loss budget once."
	e.Forgiven += missing
	e.Outstanding -= missing
	e.Forgives++
	if ph.Gathered() {
		e.GatheredForgiven += missing
	}
	e.trims.add(now, missing, true)
	return Decision{Forgive: true, Counted: true, Reason: ReasonForgiven}
}

// decide applies, in the spec's order, the vesting rule, the budget bound
// and the draw to a missing range of n bytes.
func (l *Ledger) decide(e *entry, n int64) Reason {
	forgiven := uint64(e.Forgiven + n)
	// "a missing range of length len may be forgiven only if
	// forgiven + len <= p * (received + forgiven + len)". Exact: see
	// exact.go. The NoVesting ablation skips it.
	if !l.cfg.NoVesting && !e.p.atMost(forgiven, uint64(e.Received)+forgiven) {
		return ReasonVesting
	}
	// "At all times, forgiven is at most budget." Vesting implies this once
	// received + forgiven reaches expected; checking it keeps the bound
	// when a caller delivers more than expected, and it is the only bound
	// under NoVesting.
	if e.Forgiven+n > e.Budget {
		return ReasonBudget
	}
	// "A range that passes the vesting rule is then forgiven with
	// probability P, drawn fresh for each trimmed header". The draw is
	// taken even when P is 0 or 1, so runs that differ only in P consume
	// the random stream alike.
	if !(l.rand.Float64() < l.cfg.P) {
		return ReasonDraw
	}
	return ReasonForgiven
}

// trimConsistent reports whether a trim's counts can be true of the step.
func (e *entry) trimConsistent(missing, newlyOutstanding int64) bool {
	if missing <= 0 || missing > MaxStepBytes || newlyOutstanding < 0 || newlyOutstanding > missing {
		return false
	}
	// Every missing byte is outstanding once its new bytes are counted;
	// otherwise forgiving it would drive outstanding below zero.
	if e.Outstanding+newlyOutstanding < missing {
		return false
	}
	return e.distinct()+newlyOutstanding <= MaxStepBytes
}

// distinct is the step's distinct bytes settled or trimmed so far.
func (e *entry) distinct() int64 { return e.Received + e.Forgiven + e.Outstanding }

func (e *entry) countRefusal(r Reason) {
	switch r {
	case ReasonVesting:
		e.VestingRefusals++
	case ReasonBudget:
		e.BudgetRefusals++
	case ReasonDraw:
		e.DrawRefusals++
	}
}

// OnArrival is the data path's report for one packet of the step:
// newlyReceived bytes first became Received ("The data path counts a byte
// when it first becomes Received"), and fromOutstanding of them had been
// counted outstanding ("an arrival or a forgiveness takes them off").
// Payload landing on Forgiven bytes is discarded and not reported.
//
// Arrivals still count after the step closes, so a closed record ends with
// received + forgiven = expected. An unknown step returns ErrUnknownStep
// (unwrapped, so the per-packet path never allocates); an inconsistent
// report is refused with ErrBadCount and changes nothing.
func (l *Ledger) OnArrival(step StepID, newlyReceived, fromOutstanding int64) error {
	return l.OnArrivalAt(l.now, step, newlyReceived, fromOutstanding)
}

// OnArrivalAt is OnArrival for a packet that reached the receiver at now;
// the step's first gradient byte starts its traffic span
// (StepRecord.TrafficSpan).
func (l *Ledger) OnArrivalAt(now time.Duration, step StepID, newlyReceived, fromOutstanding int64) error {
	now = l.observe(now)
	e := l.steps[step]
	if e == nil {
		l.arrivedEarly(step, newlyReceived)
		return ErrUnknownStep
	}
	if newlyReceived < 0 || newlyReceived > MaxStepBytes ||
		fromOutstanding < 0 || fromOutstanding > newlyReceived ||
		fromOutstanding > e.Outstanding ||
		e.distinct()+newlyReceived-fromOutstanding > MaxStepBytes {
		e.Inconsistent++
		return fmt.Errorf("%w: step %d: %d bytes received, %d from outstanding %d",
			ErrBadCount, step, newlyReceived, fromOutstanding, e.Outstanding)
	}
	e.Received += newlyReceived
	e.Outstanding -= fromOutstanding
	if e.Open && newlyReceived > 0 {
		e.trims.traffic(now)
	}
	return nil
}

// arrivedEarly counts n bytes of a step not open: a step not yet opened
// gets them in its record when it opens. A step that may have closed and
// been forgotten gets nothing, and neither does one past the
// MaxOpenSteps steps already waiting; UnbudgetedBytes counts them all.
func (l *Ledger) arrivedEarly(step StepID, n int64) {
	if n <= 0 || n > MaxStepBytes {
		return
	}
	l.unbudgeted = min(l.unbudgeted+n, MaxStepBytes)
	if l.forgotten && step <= l.forgottenMax {
		return
	}
	if _, ok := l.early[step]; !ok && len(l.early) >= MaxOpenSteps {
		return
	}
	l.early[step] = min(l.early[step]+n, MaxStepBytes)
}

// UnbudgetedBytes is the bytes that arrived for a step before it was
// opened, over every step, since the ledger was made.
func (l *Ledger) UnbudgetedBytes() int64 { return l.unbudgeted }

// Eligible is the step's half of exemption-eligible: "gradient all-reduce
// payload on a step with p > 0". The caller ANDs it with the flow being a
// gradient all-reduce, for the step of the message it reports on (flows
// live across steps: docs/architecture.md, "Exemption eligibility"). An
// unknown step is not eligible, nor is any step under NoExemption.
func (l *Ledger) Eligible(step StepID) bool {
	e := l.steps[step]
	return e != nil && !l.cfg.NoExemption && e.P > 0
}

// Exhausted is the budget-exhausted condition: "set while forgiven +
// outstanding + one packet > p × expected", computed as in Receiver::Flags
// against the floored budget. An unknown step is exhausted: it has no budget.
func (l *Ledger) Exhausted(step StepID) bool {
	e := l.steps[step]
	return e == nil || e.Forgiven+e.Outstanding+l.cfg.PacketBytes > e.Budget
}

// Flags is Receiver::Flags for a gradient all-reduce flow of the step that
// was created eligible: "exhausted = flow.exemption_eligible &&
// entry.forgiven + entry.outstanding + kPacketBytes > entry.budget". A flow
// that is not gradient traffic reports (false, false).
func (l *Ledger) Flags(step StepID) (eligible, exhausted bool) {
	eligible = l.Eligible(step)
	return eligible, eligible && l.Exhausted(step)
}

// Record returns a copy of the step's record, with InvariantHeld filled in,
// while the step is open or in the kept history.
func (l *Ledger) Record(step StepID) (StepRecord, bool) {
	e := l.steps[step]
	if e == nil {
		return StepRecord{}, false
	}
	r := e.StepRecord
	r.InvariantHeld = l.check(e) == nil
	return r, true
}

// CheckInvariants checks the step's loss-budget invariants: the counts are
// not negative, "forgiven is at most budget", and, unless vesting is
// ablated, "forgiven never exceeds p/(1-p) × received", checked exactly in
// the equivalent form forgiven <= p × (received + forgiven), which also
// holds at p = 1 where p/(1-p) is undefined. The check uses the same exact
// arithmetic as the rule, so it never reports a state the rule allowed.
func (l *Ledger) CheckInvariants(step StepID) error {
	e := l.steps[step]
	if e == nil {
		return fmt.Errorf("%w: step %d", ErrUnknownStep, step)
	}
	return l.check(e)
}

func (l *Ledger) check(e *entry) error {
	switch {
	case e.Received < 0 || e.Forgiven < 0 || e.Outstanding < 0:
		return fmt.Errorf("%w: step %d: received %d, forgiven %d, outstanding %d",
			ErrInvariant, e.Step, e.Received, e.Forgiven, e.Outstanding)
	case e.Budget != int64(e.p.mulFloor(uint64(e.Expected))):
		return fmt.Errorf("%w: step %d: budget %d is not floor(%v × %d)",
			ErrInvariant, e.Step, e.Budget, e.P, e.Expected)
	case e.Forgiven > e.Budget:
		return fmt.Errorf("%w: step %d: forgiven %d > budget %d",
			ErrInvariant, e.Step, e.Forgiven, e.Budget)
	case !l.cfg.NoVesting && !e.p.atMost(uint64(e.Forgiven), uint64(e.Received+e.Forgiven)):
		return fmt.Errorf("%w: step %d: forgiven %d > p/(1-p) × received %d, p = %v",
			ErrInvariant, e.Step, e.Forgiven, e.Received, e.P)
	}
	return nil
}
