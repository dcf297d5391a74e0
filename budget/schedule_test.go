package budget

import (
	"errors"
	"slices"
	"testing"
)

func TestDefaultSchedule(t *testing.T) {
	// "I treat steps 1, 2, 3 and 20 of the 20 as critical."
	s := DefaultSchedule()
	if s.Len() != 20 {
		t.Fatalf("Len = %d, want 20", s.Len())
	}
	for step := StepID(1); step <= 20; step++ {
		want := step <= 3 || step == 20
		if got := s.Critical(step); got != want {
			t.Errorf("step %d: critical %v, want %v", step, got, want)
		}
	}
	if got := s.CriticalSteps(); !slices.Equal(got, []StepID{1, 2, 3, 20}) {
		t.Fatalf("CriticalSteps = %v", got)
	}
}

func TestScheduleOutsideRangeIsCritical(t *testing.T) {
	// "One that classifies a non-critical step as critical only loses the
	// time saving."
	s, err := NewSchedule(5, 2)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []StepID{0, 6, 1 << 40} {
		if !s.Critical(step) {
			t.Errorf("step %d outside 1..5 not critical", step)
		}
	}
	if s.Critical(1) || !s.Critical(2) {
		t.Fatal("steps inside the schedule misclassified")
	}
}

func TestNewScheduleValidates(t *testing.T) {
	for _, tc := range []struct {
		length int
		steps  []StepID
	}{{0, nil}, {-1, nil}, {MaxScheduleSteps + 1, nil}, {20, []StepID{0}}, {20, []StepID{21}}} {
		if _, err := NewSchedule(tc.length, tc.steps...); !errors.Is(err, ErrSchedule) {
			t.Errorf("NewSchedule(%d, %v): %v, want ErrSchedule", tc.length, tc.steps, err)
		}
	}
	s, err := NewSchedule(3, 2, 2)
	if err != nil || !slices.Equal(s.CriticalSteps(), []StepID{2}) {
		t.Fatalf("repeated step: %v, %v", s.CriticalSteps(), err)
	}
}
