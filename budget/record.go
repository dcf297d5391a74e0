package budget

import (
	"fmt"
	"time"
)

// Reason says why OnTrim decided as it did.
type Reason uint8

// Reasons. Only ReasonForgiven forgives; every other reason means Repair.
const (
	ReasonForgiven     Reason = iota + 1 // passed vesting, budget and draw
	ReasonNoStep                         // the step has no loss budget
	ReasonStepClosed                     // the step's all-reduce completed
	ReasonVesting                        // the vesting rule refused the range
	ReasonBudget                         // forgiving would exceed the budget
	ReasonDraw                           // the draw with probability P refused
	ReasonInconsistent                   // the caller's counts were impossible
	ReasonGather                         // the gather policy repairs a finished value
)

var reasonNames = [...]string{"", "forgiven", "no-step", "step-closed", "vesting", "budget", "draw", "inconsistent", "gather"}

func (r Reason) String() string {
	if r > 0 && int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return fmt.Sprintf("Reason(%d)", uint8(r))
}

// Decision is the ledger's answer to one trimmed header.
type Decision struct {
	// Forgive: mark the missing bytes Forgiven and acknowledge past them.
	// Otherwise Repair: request the range again.
	Forgive bool
	// Counted: the missing bytes are counted in the step's outstanding, so
	// the caller marks them Requested as counted. False when the step is
	// unknown or closed, the report was inconsistent, or the gather policy
	// repairs the range: nothing was counted and the caller repairs.
	Counted bool
	Reason  Reason
}

// StepRecord is one step's ledger state and counters.
type StepRecord struct {
	Step     StepID
	Critical bool
	// Classified is false while a step opened before its classification
	// (OnStepOpenAt) waits for it; it counts as critical until then.
	Classified bool
	P          float64 // P_low or P_high, by the step's classification
	Expected   int64   // gradient bytes the step brings this rank
	Budget     int64   // floor(P × Expected)

	Received    int64 // distinct bytes received
	Forgiven    int64 // bytes acknowledged without receiving
	Outstanding int64 // distinct trimmed bytes neither received nor forgiven
	Open        bool  // true until OnAllReduceComplete

	TrimmedBytes    int64 // distinct bytes a trim counted outstanding
	Trims           int64 // trimmed headers decided while open
	Forgives        int64 // trimmed headers forgiven
	VestingRefusals int64 // trimmed headers refused by the vesting rule
	BudgetRefusals  int64 // trimmed headers refused by the budget bound
	DrawRefusals    int64 // trimmed headers refused by the draw
	LateTrims       int64 // trimmed headers after the step closed
	Inconsistent    int64 // reports refused as inconsistent

	// UnbudgetedBytes are the distinct bytes of the step that arrived
	// before it was opened, with no budget to count into; Received
	// includes them from the open on. A host that opens every step before
	// any neighbour can send into it keeps this at 0.
	UnbudgetedBytes int64
	// GatheredForgiven is the part of Forgiven that was a finished value
	// (a PhaseGather or PhaseGatherOwner receive).
	GatheredForgiven int64
	// GatherRepairs counts the trimmed headers of finished values the
	// gather policy repaired without consulting the budget, and
	// GatherRepairBytes their missing bytes (a range trimmed again counts
	// at each trim).
	GatherRepairs     int64
	GatherRepairBytes int64

	// The seed's trim-level accounting, filled when the step closes. Span
	// is the step's span at this rank, from OnStepBeginAt to
	// OnAllReduceCompleteAt. FirstFifthTrimmed is the missing bytes of the
	// trimmed headers decided while the step was open that reached the
	// receiver in the first fifth of the span, [begin, begin + Span/5), and
	// FirstFifthForgiven the part of them forgiven; LastFifth* the same for
	// the last fifth, [end - Span/5, end]. A retrimmed range counts at each
	// trim. Trims are placed to within 2/1024 of the span (fifths.go).
	Span               time.Duration
	FirstFifthTrimmed  int64
	FirstFifthForgiven int64
	LastFifthTrimmed   int64
	LastFifthForgiven  int64
	// The same over the step's gradient traffic: TrafficSpan runs from the
	// first gradient byte or trimmed header that reached this rank while
	// the step was open to OnAllReduceCompleteAt, so a compute phase
	// between the step's begin and its first gradient byte is left out.
	TrafficSpan               time.Duration
	TrafficFirstFifthTrimmed  int64
	TrafficFirstFifthForgiven int64
	TrafficLastFifthTrimmed   int64
	TrafficLastFifthForgiven  int64

	// InvariantHeld is CheckInvariants' verdict when the record was taken.
	InvariantHeld bool
}
