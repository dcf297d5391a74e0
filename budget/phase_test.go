package budget

import (
	"errors"
	"testing"
	"time"
)

// The gather policies and the step opened before its classification, as
// narratives on a ledger at the seed's parameters. Every test checks the
// loss-budget invariants through record.

func gatherLedger(t *testing.T, g GatherPolicy) *Ledger {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Gather = g
	return newLedger(t, cfg, always(0))
}

func TestGatherForgiveForgivesFinishedValuesAsTheSeedDoes(t *testing.T) {
	// The default policy is the seed's: a gathered range is gradient
	// bytes like any other.
	l := gatherLedger(t, GatherForgive)
	begin(t, l, 1, false, 100_000)
	arrive(t, l, 1, 90_000, 0)
	wantDecision(t, l.OnTrimPhaseAt(0, 1, PhaseGather, 4096, 4096), true, true, ReasonForgiven)
	wantDecision(t, l.OnTrimPhaseAt(0, 1, PhaseUnspecified, 10, 10), true, true, ReasonForgiven)
	r := record(t, l, 1)
	wantCounts(t, r, 90_000, 4106, 0)
	if r.GatheredForgiven != 4096 || r.GatherRepairs != 0 {
		t.Fatalf("gathered forgiven %d, gather repairs %d, want 4096 and 0", r.GatheredForgiven, r.GatherRepairs)
	}
}

func TestGatherRepairNeverForgivesAFinishedValue(t *testing.T) {
	// Policy repair: a trimmed range of the all-gather is repaired
	// whatever the budget holds, and counts nothing in outstanding, so
	// budget-exhausted stays clear and the flow keeps its exemption. The
	// reduce phase still forgives within the budget.
	l := gatherLedger(t, GatherRepair)
	begin(t, l, 1, false, 100_000) // budget 10,000
	arrive(t, l, 1, 50_000, 0)
	for _, ph := range []Phase{PhaseGather, PhaseGatherOwner} {
		wantDecision(t, l.OnTrimPhaseAt(0, 1, ph, 4096, 4096), false, false, ReasonGather)
	}
	if _, exhausted := l.Flags(1); exhausted {
		t.Fatal("a repaired finished value set budget-exhausted")
	}
	r := record(t, l, 1)
	wantCounts(t, r, 50_000, 0, 0)
	if r.GatherRepairs != 2 || r.GatherRepairBytes != 8192 || r.Trims != 0 {
		t.Fatalf("gather repairs %d (%d bytes), trims %d; want 2 (8192), 0", r.GatherRepairs, r.GatherRepairBytes, r.Trims)
	}
	// The repaired bytes arrive as ordinary, uncounted ones.
	arrive(t, l, 1, 8192, 0)
	wantDecision(t, l.OnTrimPhaseAt(0, 1, PhaseReduce, 4096, 4096), true, true, ReasonForgiven)
	wantDecision(t, l.OnTrimPhaseAt(0, 1, PhaseUnspecified, 100, 100), true, true, ReasonForgiven)
	r = record(t, l, 1)
	wantCounts(t, r, 58_192, 4196, 0)
	if r.GatheredForgiven != 0 {
		t.Fatalf("gathered forgiven %d under repair", r.GatheredForgiven)
	}
}

func TestGatherOwnerForgivesOnlyWhereTheOwnerSent(t *testing.T) {
	// Policy owner: a finished value is forgivable only in the receive
	// from its owner; one forwarded by any other rank is repaired.
	l := gatherLedger(t, GatherOwner)
	begin(t, l, 1, false, 100_000)
	arrive(t, l, 1, 60_000, 0)
	wantDecision(t, l.OnTrimPhaseAt(0, 1, PhaseGather, 4096, 4096), false, false, ReasonGather)
	wantDecision(t, l.OnTrimPhaseAt(0, 1, PhaseGatherOwner, 4096, 4096), true, true, ReasonForgiven)
	wantDecision(t, l.OnTrimPhaseAt(0, 1, PhaseReduce, 1000, 1000), true, true, ReasonForgiven)
	r := record(t, l, 1)
	wantCounts(t, r, 60_000, 5096, 0)
	if r.GatheredForgiven != 4096 || r.GatherRepairs != 1 {
		t.Fatalf("gathered forgiven %d, gather repairs %d; want 4096, 1", r.GatheredForgiven, r.GatherRepairs)
	}
	// The owner's finished value still goes through vesting: 9,192
	// forgiven would exceed 0.1/0.9 × 60,000 received.
	wantDecision(t, l.OnTrimPhaseAt(0, 1, PhaseGatherOwner, 4096, 4096), false, true, ReasonVesting)
}

func TestGatherPolicyComesAfterTheStepChecks(t *testing.T) {
	// A closed or unknown step repairs for its own reason, counted as
	// before; the gather policy does not hide a late trim.
	l := gatherLedger(t, GatherRepair)
	wantDecision(t, l.OnTrimPhaseAt(0, 7, PhaseGather, 10, 10), false, false, ReasonNoStep)
	begin(t, l, 1, false, 1000)
	l.OnAllReduceComplete(1)
	wantDecision(t, l.OnTrimPhaseAt(0, 1, PhaseGather, 10, 10), false, false, ReasonStepClosed)
	if r := record(t, l, 1); r.LateTrims != 1 || r.GatherRepairs != 0 {
		t.Fatalf("late trims %d, gather repairs %d; want 1, 0", r.LateTrims, r.GatherRepairs)
	}
}

func TestParsePhaseAndGatherPolicy(t *testing.T) {
	for _, ph := range []Phase{PhaseUnspecified, PhaseReduce, PhaseGather, PhaseGatherOwner} {
		if got, err := ParsePhase(ph.String()); err != nil || got != ph {
			t.Fatalf("ParsePhase(%q) = %v, %v", ph.String(), got, err)
		}
	}
	if _, err := ParsePhase("scatter"); !errors.Is(err, ErrConfig) {
		t.Fatalf("ParsePhase(scatter) = %v, want ErrConfig", err)
	}
	for _, g := range []GatherPolicy{GatherForgive, GatherRepair, GatherOwner} {
		if got, err := ParseGatherPolicy(g.String()); err != nil || got != g {
			t.Fatalf("ParseGatherPolicy(%q) = %v, %v", g.String(), got, err)
		}
	}
	if g, err := ParseGatherPolicy(""); err != nil || g != GatherForgive {
		t.Fatalf(`ParseGatherPolicy("") = %v, %v; want forgive`, g, err)
	}
	if _, err := ParseGatherPolicy("drop"); !errors.Is(err, ErrConfig) {
		t.Fatalf("ParseGatherPolicy(drop) = %v, want ErrConfig", err)
	}
	cfg := DefaultConfig()
	cfg.Gather = NumGatherPolicies
	if err := cfg.Validate(); !errors.Is(err, ErrConfig) {
		t.Fatalf("Validate(Gather %d) = %v, want ErrConfig", cfg.Gather, err)
	}
}

func TestStepOpenedBeforeItsClassificationIsCritical(t *testing.T) {
	// "begin_step may be sent twice": opened with the expected bytes
	// alone, the step's early bytes are budgeted at P_low; the
	// classification then raises p to P_high without charging anything
	// again, and the step's counts carry over.
	l := gatherLedger(t, GatherForgive)
	if err := l.OnStepOpenAt(time.Millisecond, 3, 1_000_000); err != nil {
		t.Fatal(err)
	}
	r := record(t, l, 3)
	if r.Classified || !r.Critical || r.P != DefaultPLow || r.Budget != 5000 {
		t.Fatalf("open step: classified %v critical %v p %v budget %d; want false, true, %v, 5000",
			r.Classified, r.Critical, r.P, r.Budget, DefaultPLow)
	}
	arrive(t, l, 3, 400_000, 0)
	// At P_low, 400,000 received vests floor(0.005/0.995 × 400,000) = 2010.
	wantDecision(t, l.OnTrim(3, 4096, 4096), false, true, ReasonVesting)
	wantDecision(t, l.OnTrim(3, 2000, 0), true, true, ReasonForgiven)
	if err := l.OnStepClassifyAt(2*time.Millisecond, 3, false, 0); err != nil {
		t.Fatal(err)
	}
	r = record(t, l, 3)
	if !r.Classified || r.Critical || r.P != DefaultPHigh || r.Budget != 100_000 {
		t.Fatalf("classified step: classified %v critical %v p %v budget %d; want true, false, %v, 100000",
			r.Classified, r.Critical, r.P, r.Budget, DefaultPHigh)
	}
	wantCounts(t, r, 400_000, 2000, 2096)
	// The 2,096 bytes still outstanding of the refused range now vest.
	wantDecision(t, l.OnTrim(3, 2096, 0), true, true, ReasonForgiven)
	wantCounts(t, record(t, l, 3), 400_000, 4096, 0)
	// A second classification, and a begin of a classified step, are refused.
	if err := l.OnStepClassifyAt(0, 3, true, 0); !errors.Is(err, ErrStepOpen) {
		t.Fatalf("second classification: %v, want ErrStepOpen", err)
	}
	if err := l.OnStepBegin(3, true, 1_000_000); !errors.Is(err, ErrStepOpen) {
		t.Fatalf("begin of a classified step: %v, want ErrStepOpen", err)
	}
}

func TestClassificationAsCriticalKeepsTheTightBudget(t *testing.T) {
	l := gatherLedger(t, GatherForgive)
	if err := l.OnStepOpenAt(0, 1, 200_000); err != nil {
		t.Fatal(err)
	}
	// OnStepBegin classifies an open, unclassified step.
	begin(t, l, 1, true, 200_000)
	r := record(t, l, 1)
	if !r.Classified || !r.Critical || r.Budget != 1000 {
		t.Fatalf("critical step: classified %v critical %v budget %d", r.Classified, r.Critical, r.Budget)
	}
}

func TestClassificationMustKeepTheExpectedBytes(t *testing.T) {
	l := gatherLedger(t, GatherForgive)
	if err := l.OnStepClassifyAt(0, 1, false, 0); !errors.Is(err, ErrUnknownStep) {
		t.Fatalf("classifying a step never opened: %v, want ErrUnknownStep", err)
	}
	if err := l.OnStepOpenAt(0, 1, 200_000); err != nil {
		t.Fatal(err)
	}
	if err := l.OnStepOpenAt(0, 1, 200_000); !errors.Is(err, ErrStepOpen) {
		t.Fatalf("opening twice: %v, want ErrStepOpen", err)
	}
	if err := l.OnStepClassifyAt(0, 1, false, 200_001); !errors.Is(err, ErrBadCount) {
		t.Fatalf("classifying with other expected bytes: %v, want ErrBadCount", err)
	}
	if r := record(t, l, 1); r.Classified || r.Budget != 1000 {
		t.Fatalf("a refused classification changed the step: %+v", r)
	}
	if err := l.OnStepClassifyAt(0, 1, false, 200_000); err != nil {
		t.Fatalf("classifying with the same expected bytes: %v", err)
	}
	l.OnAllReduceComplete(1)
	if err := l.OnStepClassifyAt(0, 1, false, 0); !errors.Is(err, ErrStepClosed) {
		t.Fatalf("classifying a closed step: %v, want ErrStepClosed", err)
	}
}

func TestOpenNeverRaisesPAboveTheClassification(t *testing.T) {
	// With P_high below P_low (a configuration the seed does not use),
	// the open step takes the smaller p, so no classification lowers it.
	cfg := DefaultConfig()
	cfg.PLow, cfg.PHigh = 0.2, 0.05
	l := newLedger(t, cfg, always(0))
	if err := l.OnStepOpenAt(0, 1, 100_000); err != nil {
		t.Fatal(err)
	}
	if r := record(t, l, 1); r.P != 0.05 || r.Budget != 5000 {
		t.Fatalf("open step p %v budget %d, want 0.05 and 5000", r.P, r.Budget)
	}
	arrive(t, l, 1, 90_000, 0)
	wantDecision(t, l.OnTrim(1, 4096, 4096), true, true, ReasonForgiven)
	if err := l.OnStepClassifyAt(0, 1, false, 0); err != nil {
		t.Fatal(err)
	}
	if r := record(t, l, 1); r.P != 0.05 || r.Forgiven != 4096 {
		t.Fatalf("classified non-critical: p %v forgiven %d", r.P, r.Forgiven)
	}
}

func TestBytesBeforeTheOpenAreUnbudgeted(t *testing.T) {
	// Bytes that arrive for a step not yet opened have no budget to count
	// into. They are counted, and become the step's received bytes (never
	// charged) when it opens.
	l := gatherLedger(t, GatherForgive)
	if err := l.OnArrival(5, 3000, 0); !errors.Is(err, ErrUnknownStep) {
		t.Fatalf("arrival before the open: %v, want ErrUnknownStep", err)
	}
	if err := l.OnArrival(5, 1000, 0); !errors.Is(err, ErrUnknownStep) {
		t.Fatal(err)
	}
	if got := l.UnbudgetedBytes(); got != 4000 {
		t.Fatalf("UnbudgetedBytes = %d, want 4000", got)
	}
	begin(t, l, 5, false, 100_000)
	r := record(t, l, 5)
	if r.UnbudgetedBytes != 4000 {
		t.Fatalf("step's unbudgeted bytes %d, want 4000", r.UnbudgetedBytes)
	}
	wantCounts(t, r, 4000, 0, 0)
	arrive(t, l, 5, 1000, 0)
	if r := record(t, l, 5); r.UnbudgetedBytes != 4000 || r.Received != 5000 {
		t.Fatalf("after the open: unbudgeted %d received %d", r.UnbudgetedBytes, r.Received)
	}
	// A step opened in time has none.
	begin(t, l, 6, false, 100_000)
	arrive(t, l, 6, 1000, 0)
	if r := record(t, l, 6); r.UnbudgetedBytes != 0 {
		t.Fatalf("step opened in time: unbudgeted %d", r.UnbudgetedBytes)
	}
	if got := l.UnbudgetedBytes(); got != 4000 {
		t.Fatalf("UnbudgetedBytes = %d, want 4000", got)
	}
}

func TestUnbudgetedBytesOfForgottenStepsCountOnlyInTheTotal(t *testing.T) {
	l := gatherLedger(t, GatherForgive)
	for s := StepID(1); s <= HistorySteps+1; s++ {
		begin(t, l, s, false, 1000)
		l.OnAllReduceComplete(s)
	}
	// Step 1 was forgotten: its late bytes count, but nothing may reopen it.
	_ = l.OnArrival(1, 10, 0)
	if got := l.UnbudgetedBytes(); got != 10 {
		t.Fatalf("UnbudgetedBytes = %d, want 10", got)
	}
	if len(l.early) != 0 {
		t.Fatalf("a forgotten step's bytes wait for an open: %v", l.early)
	}
	// The waiting steps are bounded.
	for s := StepID(1000); s < 1000+2*MaxOpenSteps; s++ {
		_ = l.OnArrival(s, 1, 0)
	}
	if len(l.early) != MaxOpenSteps {
		t.Fatalf("%d steps wait, want at most %d", len(l.early), MaxOpenSteps)
	}
}
