package budget

import (
	"errors"
	"fmt"
)

// ErrSchedule reports an invalid schedule.
var ErrSchedule = errors.New("budget: invalid schedule")

// MaxScheduleSteps bounds a schedule's length.
const MaxScheduleSteps = 1 << 20

// Schedule is a fixed list of critical steps, standing in for a detector
// where there are no gradients to read: "ASTRA-sim simulates communication
// and compute times, not the model, so Accordion has no gradient norms to
// read. I treat steps 1, 2, 3 and 20 of the 20 as critical." Steps are
// numbered from 1.
type Schedule struct {
	critical []bool // critical[i] is step i+1
}

// DefaultSchedule is the seed's: steps 1, 2, 3 and 20 of 20 are critical.
func DefaultSchedule() Schedule {
	s, _ := NewSchedule(20, 1, 2, 3, 20) // constant input, cannot fail
	return s
}

// NewSchedule returns a schedule of length steps with the given steps
// critical. Every critical step must lie in 1..length; repeats are allowed.
func NewSchedule(length int, critical ...StepID) (Schedule, error) {
	if length < 1 || length > MaxScheduleSteps {
		return Schedule{}, fmt.Errorf("%w: length %d, want 1..%d", ErrSchedule, length, MaxScheduleSteps)
	}
	s := Schedule{critical: make([]bool, length)}
	for _, step := range critical {
		if step < 1 || step > StepID(length) {
			return Schedule{}, fmt.Errorf("%w: critical step %d outside 1..%d", ErrSchedule, step, length)
		}
		s.critical[step-1] = true
	}
	return s, nil
}

// Len returns the number of steps the schedule covers.
func (s Schedule) Len() int { return len(s.critical) }

// Critical reports whether the step is critical. A step outside 1..Len is
// treated as critical: the smaller budget is the safe side, since "a
// detector that classifies a critical step as non-critical lets 10 percent
// of its gradient bytes be forgiven where the schedule allows 0.5 percent.
// One that classifies a non-critical step as critical only loses the time
// saving."
func (s Schedule) Critical(step StepID) bool {
	if step < 1 || step > StepID(len(s.critical)) {
		return true
	}
	return s.critical[step-1]
}

// CriticalSteps lists the critical steps in increasing order.
func (s Schedule) CriticalSteps() []StepID {
	var out []StepID
	for i, c := range s.critical {
		if c {
			out = append(out, StepID(i+1))
		}
	}
	return out
}
