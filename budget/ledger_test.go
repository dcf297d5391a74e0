package budget

import (
	"errors"
	"testing"
)

// scriptedRand returns its values in turn, cycling, and counts the draws.
type scriptedRand struct {
	vals  []float64
	calls int
}

func (r *scriptedRand) Float64() float64 {
	v := r.vals[r.calls%len(r.vals)]
	r.calls++
	return v
}

// always returns a Rand whose every draw is v.
func always(v float64) *scriptedRand { return &scriptedRand{vals: []float64{v}} }

func newLedger(t testing.TB, cfg Config, r Rand) *Ledger {
	t.Helper()
	l, err := NewLedger(cfg, r)
	if err != nil {
		t.Fatalf("NewLedger(%+v): %v", cfg, err)
	}
	return l
}

func begin(t testing.TB, l *Ledger, step StepID, critical bool, expected int64) {
	t.Helper()
	if err := l.OnStepBegin(step, critical, expected); err != nil {
		t.Fatalf("OnStepBegin(%d, %v, %d): %v", step, critical, expected, err)
	}
}

func arrive(t testing.TB, l *Ledger, step StepID, newlyReceived, fromOutstanding int64) {
	t.Helper()
	if err := l.OnArrival(step, newlyReceived, fromOutstanding); err != nil {
		t.Fatalf("OnArrival(%d, %d, %d): %v", step, newlyReceived, fromOutstanding, err)
	}
}

func record(t testing.TB, l *Ledger, step StepID) StepRecord {
	t.Helper()
	r, ok := l.Record(step)
	if !ok {
		t.Fatalf("Record(%d): step unknown", step)
	}
	if !r.InvariantHeld {
		t.Fatalf("step %d: invariant broken: %v", step, l.CheckInvariants(step))
	}
	return r
}

func wantDecision(t testing.TB, got Decision, forgive, counted bool, reason Reason) {
	t.Helper()
	want := Decision{Forgive: forgive, Counted: counted, Reason: reason}
	if got != want {
		t.Fatalf("decision = %+v, want %+v", got, want)
	}
}

func wantCounts(t testing.TB, r StepRecord, received, forgiven, outstanding int64) {
	t.Helper()
	if r.Received != received || r.Forgiven != forgiven || r.Outstanding != outstanding {
		t.Fatalf("step %d: received/forgiven/outstanding = %d/%d/%d, want %d/%d/%d",
			r.Step, r.Received, r.Forgiven, r.Outstanding, received, forgiven, outstanding)
	}
}

func TestBudgetIsPTimesExpectedBytes(t *testing.T) {
	// "the receiver can size that loss budget before the first byte
	// arrives: the step's tolerance p times those bytes."
	// "entry.budget = Floor(entry.p * ExpectedGradientBytes(step))"
	l := newLedger(t, DefaultConfig(), always(0))
	begin(t, l, 1, true, 1_000_003)
	begin(t, l, 2, false, 1_000_003)
	for _, tc := range []struct {
		step   StepID
		p      float64
		budget int64
	}{{1, 0.005, 5000}, {2, 0.1, 100000}} {
		r := record(t, l, tc.step)
		if r.P != tc.p || r.Budget != tc.budget {
			t.Errorf("step %d: p %v budget %d, want p %v budget %d", tc.step, r.P, r.Budget, tc.p, tc.budget)
		}
	}
}

func TestBudgetFloorIsExact(t *testing.T) {
	// float64(0.3) is slightly below 3/10, so 0.3 × 10 is exactly
	// 2.99999999999999988..., which floating-point multiplication rounds
	// to 3. The budget is the floor of the exact product, so it is 2, and
	// the vesting rule refuses 3 bytes of 10 for the same reason: the rule
	// and the budget never disagree.
	cfg := DefaultConfig()
	cfg.PHigh = 0.3
	l := newLedger(t, cfg, always(0))
	begin(t, l, 1, false, 10)
	if r := record(t, l, 1); r.Budget != 2 {
		t.Fatalf("budget = %d, want floor(0.3 × 10) = 2 exactly", r.Budget)
	}
	arrive(t, l, 1, 7, 0)
	wantDecision(t, l.OnTrim(1, 3, 3), false, true, ReasonVesting)
	wantDecision(t, l.OnTrim(1, 2, 0), true, true, ReasonForgiven)
}

func TestCriticalStepHasSmallerBudget(t *testing.T) {
	// "The loss budget tightens during the critical learning regime, so a
	// critical step has a smaller loss budget than a non-critical one."
	l := newLedger(t, DefaultConfig(), always(0))
	begin(t, l, 1, true, 1<<20)
	begin(t, l, 4, false, 1<<20)
	crit, other := record(t, l, 1), record(t, l, 4)
	if !crit.Critical || crit.P != DefaultPLow || other.Critical || other.P != DefaultPHigh {
		t.Fatalf("classification not recorded: %+v / %+v", crit, other)
	}
	if crit.Budget >= other.Budget {
		t.Fatalf("critical budget %d, non-critical %d: want critical smaller", crit.Budget, other.Budget)
	}
}

func TestVestingRefusesEarlyBurstAllowsLater(t *testing.T) {
	// "A loss budget available in full at step start is exhausted by the
	// step's first burst." ... "a missing range of length len may be
	// forgiven only if forgiven + len <= p × (received + forgiven + len)".
	const pkt = 4096
	l := newLedger(t, DefaultConfig(), always(0))
	begin(t, l, 5, false, 100*pkt) // p = 0.1, budget 40960

	// Nothing has arrived: the first trimmed packet cannot be forgiven,
	// though the whole budget would cover it.
	wantDecision(t, l.OnTrim(5, pkt, pkt), false, true, ReasonVesting)
	wantCounts(t, record(t, l, 5), 0, 0, pkt)

	// One byte short of 9 packets received: 4096 > 0.1 × 40959.
	arrive(t, l, 5, 9*pkt-1, 0)
	// "A refused range is requested for retransmission and reconsidered
	// if it is trimmed again." Its bytes are already outstanding.
	wantDecision(t, l.OnTrim(5, pkt, 0), false, true, ReasonVesting)

	// With 9 packets received the packet is a tenth of received+forgiven.
	arrive(t, l, 5, 1, 0)
	wantDecision(t, l.OnTrim(5, pkt, 0), true, true, ReasonForgiven)
	r := record(t, l, 5)
	wantCounts(t, r, 9*pkt, pkt, 0)
	if r.VestingRefusals != 2 || r.Forgives != 1 || r.Trims != 3 {
		t.Fatalf("counters: %+v", r)
	}
}

func TestDrawComesOnlyAfterVesting(t *testing.T) {
	// "A range that passes the vesting rule is then forgiven with
	// probability P, drawn fresh for each trimmed header".
	rnd := always(0)
	l := newLedger(t, DefaultConfig(), rnd)
	begin(t, l, 1, false, 1<<20)
	l.OnTrim(1, 100, 100) // refused by vesting: nothing received yet
	if rnd.calls != 0 {
		t.Fatalf("%d draws for a range the vesting rule refused, want 0", rnd.calls)
	}
	arrive(t, l, 1, 10_000, 0)
	l.OnTrim(1, 100, 0)
	l.OnTrim(1, 50, 50)
	if rnd.calls != 2 {
		t.Fatalf("%d draws for 2 trimmed headers that passed vesting, want 2", rnd.calls)
	}
}

func TestDrawRefusalChargesNothing(t *testing.T) {
	// "A range the draw refuses is requested for retransmission and
	// charges nothing. It stays outstanding until it arrives or a later
	// trim of it is forgiven."
	cfg := DefaultConfig()
	cfg.P = 0.5
	l := newLedger(t, cfg, &scriptedRand{vals: []float64{0.7, 0.2}})
	begin(t, l, 1, false, 1<<20)
	arrive(t, l, 1, 100_000, 0)

	wantDecision(t, l.OnTrim(1, 4096, 4096), false, true, ReasonDraw)
	r := record(t, l, 1)
	wantCounts(t, r, 100_000, 0, 4096)
	if r.DrawRefusals != 1 {
		t.Fatalf("DrawRefusals = %d, want 1", r.DrawRefusals)
	}

	// Trimmed again: the second draw (0.2 < 0.5) forgives it, and the
	// bytes leave outstanding as they are charged.
	wantDecision(t, l.OnTrim(1, 4096, 0), true, true, ReasonForgiven)
	wantCounts(t, record(t, l, 1), 100_000, 4096, 0)
}

func TestPZeroNeverForgivesButKeepsExemption(t *testing.T) {
	// "At P = 0 the receiver forgives nothing and the exemption stays"
	cfg := DefaultConfig()
	cfg.P = 0
	l := newLedger(t, cfg, always(0))
	begin(t, l, 1, false, 1<<20)
	arrive(t, l, 1, 1<<19, 0)
	for range 10 {
		wantDecision(t, l.OnTrim(1, 100, 100), false, true, ReasonDraw)
	}
	if r := record(t, l, 1); r.Forgiven != 0 || r.Outstanding != 1000 {
		t.Fatalf("P = 0 forgave: %+v", r)
	}
	if !l.Eligible(1) {
		t.Fatal("P = 0 step not eligible: the exemption must stay")
	}
}

func TestPOneForgivesWhateverVestingAllows(t *testing.T) {
	// "Those runs forgave every range the vesting rule allowed, P = 1."
	// Draws are in [0, 1), so even the largest is below P = 1.
	l := newLedger(t, DefaultConfig(), always(0.9999999999999999))
	begin(t, l, 1, false, 1<<20)
	arrive(t, l, 1, 9000, 0)
	for i := range 10 {
		wantDecision(t, l.OnTrim(1, 100, 100), true, true, ReasonForgiven)
		if r := record(t, l, 1); r.Forgiven != int64(100*(i+1)) {
			t.Fatalf("forgiven = %d after %d trims", r.Forgiven, i+1)
		}
	}
	// 1000 forgiven, 9000 received: the next byte would pass p of the total.
	wantDecision(t, l.OnTrim(1, 1, 1), false, true, ReasonVesting)
}

func TestExhaustedReservesOnePacket(t *testing.T) {
	// "budget-exhausted is set while forgiven + outstanding + one packet >
	// p × expected, where outstanding counts distinct trimmed bytes
	// neither arrived nor forgiven, and one packet is 4,096 bytes"
	l := newLedger(t, DefaultConfig(), always(0))
	begin(t, l, 1, false, 81920) // budget 8192
	if _, ex := l.Flags(1); ex {
		t.Fatal("exhausted at step start")
	}
	l.OnTrim(1, 4096, 4096) // refused by vesting, outstanding 4096
	if l.Exhausted(1) {
		t.Fatal("exhausted at 0 + 4096 + 4096 = budget; want not (>)")
	}
	l.OnTrim(1, 1, 1)
	if elig, ex := l.Flags(1); !elig || !ex {
		t.Fatalf("Flags = %v, %v at 0 + 4097 + 4096 > 8192; want eligible and exhausted", elig, ex)
	}
	// "ignores congestion signals again if a later report clears the flag"
	arrive(t, l, 1, 4097, 4097)
	if l.Exhausted(1) {
		t.Fatal("still exhausted after the outstanding bytes arrived")
	}
}

func TestForgivenBytesCountTowardExhaustion(t *testing.T) {
	l := newLedger(t, DefaultConfig(), always(0))
	begin(t, l, 1, false, 81920) // budget 8192
	arrive(t, l, 1, 40000, 0)
	wantDecision(t, l.OnTrim(1, 4097, 4097), true, true, ReasonForgiven)
	if !l.Exhausted(1) {
		t.Fatal("4097 forgiven + 4096 > 8192, want exhausted")
	}
}

func TestClosedStepRepairsAndCountsNothing(t *testing.T) {
	// "The step is over. Any range trimmed later is requested for
	// retransmission." "No loss budget is open for this step, so there is
	// nothing to charge."
	l := newLedger(t, DefaultConfig(), always(0))
	begin(t, l, 1, false, 1<<20)
	arrive(t, l, 1, 1<<19, 0)
	l.OnAllReduceComplete(1)
	wantDecision(t, l.OnTrim(1, 100, 100), false, false, ReasonStepClosed)
	r := record(t, l, 1)
	if r.Open || r.Outstanding != 0 || r.LateTrims != 1 || r.Trims != 0 {
		t.Fatalf("closed step changed: %+v", r)
	}
	// "a closed loss budget never reopens."
	if err := l.OnStepBegin(1, false, 1<<20); !errors.Is(err, ErrStepClosed) {
		t.Fatalf("OnStepBegin on a closed step: %v, want ErrStepClosed", err)
	}
}

func TestOpenStepCannotBeginAgain(t *testing.T) {
	l := newLedger(t, DefaultConfig(), always(0))
	begin(t, l, 7, false, 100)
	if err := l.OnStepBegin(7, true, 100); !errors.Is(err, ErrStepOpen) {
		t.Fatalf("second OnStepBegin: %v, want ErrStepOpen", err)
	}
	if r := record(t, l, 7); r.Critical || r.Expected != 100 {
		t.Fatalf("second OnStepBegin changed the step: %+v", r)
	}
}

func TestUnknownStepHasNoBudget(t *testing.T) {
	// "A step the detector never classified has no loss budget and must go
	// through ordinary loss recovery."
	l := newLedger(t, DefaultConfig(), always(0))
	wantDecision(t, l.OnTrim(3, 100, 100), false, false, ReasonNoStep)
	if l.Eligible(3) || !l.Exhausted(3) {
		t.Fatalf("unknown step: eligible %v exhausted %v, want false true", l.Eligible(3), l.Exhausted(3))
	}
	if err := l.OnArrival(3, 10, 0); !errors.Is(err, ErrUnknownStep) {
		t.Fatalf("OnArrival on an unknown step: %v", err)
	}
	if err := l.CheckInvariants(3); !errors.Is(err, ErrUnknownStep) {
		t.Fatalf("CheckInvariants on an unknown step: %v", err)
	}
	if _, ok := l.Record(3); ok {
		t.Fatal("Record of an unknown step")
	}
}

func TestRetrimCountsOnlyNewBytes(t *testing.T) {
	// "A range trimmed again is already outstanding. Count only its new
	// bytes." A re-segmented retransmission overlaps the first range by
	// 3000 bytes and adds 1000 new ones.
	l := newLedger(t, DefaultConfig(), always(0))
	begin(t, l, 1, false, 1<<20)
	l.OnTrim(1, 4000, 4000)
	wantDecision(t, l.OnTrim(1, 4000, 1000), false, true, ReasonVesting)
	r := record(t, l, 1)
	if r.Outstanding != 5000 || r.TrimmedBytes != 5000 {
		t.Fatalf("outstanding %d trimmed %d, want 5000 each", r.Outstanding, r.TrimmedBytes)
	}
	// "A re-segmented retransmission can straddle the cumulative
	// acknowledgement, and its full length would charge the loss budget
	// for bytes already delivered." The caller passes only the bytes still
	// missing, and forgiving charges exactly those.
	arrive(t, l, 1, 100_000, 1000)
	wantDecision(t, l.OnTrim(1, 4000, 0), true, true, ReasonForgiven)
	wantCounts(t, record(t, l, 1), 100_000, 4000, 0)
}

func TestNoVestingAblationSpendsBudgetAtOnce(t *testing.T) {
	// "With the loss budget available in full at step start ... The first
	// burst of each step exhausted the loss budget."
	cfg := DefaultConfig()
	cfg.NoVesting = true
	l := newLedger(t, cfg, always(0))
	begin(t, l, 1, false, 81920) // budget 8192
	wantDecision(t, l.OnTrim(1, 4096, 4096), true, true, ReasonForgiven)
	wantDecision(t, l.OnTrim(1, 4096, 4096), true, true, ReasonForgiven)
	wantDecision(t, l.OnTrim(1, 1, 1), false, true, ReasonBudget)
	r := record(t, l, 1) // also asserts the (vesting-free) invariant holds
	wantCounts(t, r, 0, 8192, 1)
	if r.BudgetRefusals != 1 {
		t.Fatalf("BudgetRefusals = %d", r.BudgetRefusals)
	}
}

func TestBudgetBoundsVestingWhenMoreThanExpectedArrives(t *testing.T) {
	// "At all times, forgiven is at most budget." Vesting alone implies it
	// only while received + forgiven stays within expected.
	l := newLedger(t, DefaultConfig(), always(0))
	begin(t, l, 1, false, 1000) // budget 100
	arrive(t, l, 1, 5000, 0)
	wantDecision(t, l.OnTrim(1, 101, 101), false, true, ReasonBudget)
	wantDecision(t, l.OnTrim(1, 100, 0), true, true, ReasonForgiven)
}

func TestNoExemptionAblation(t *testing.T) {
	// Forgiveness without exemption: senders obey congestion control, and
	// the receiver still forgives.
	cfg := DefaultConfig()
	cfg.NoExemption = true
	l := newLedger(t, cfg, always(0))
	begin(t, l, 1, false, 1<<20)
	if elig, ex := l.Flags(1); elig || ex {
		t.Fatalf("Flags = %v, %v, want false, false", elig, ex)
	}
	arrive(t, l, 1, 1<<19, 0)
	wantDecision(t, l.OnTrim(1, 4096, 4096), true, true, ReasonForgiven)
}

func TestEligibleNeedsPositiveP(t *testing.T) {
	// "exemption-eligible is fixed when the flow is created: gradient
	// all-reduce payload on a step with p > 0."
	cfg := DefaultConfig()
	cfg.PLow = 0
	l := newLedger(t, cfg, always(0))
	begin(t, l, 1, true, 1<<20)
	begin(t, l, 2, false, 1<<20)
	if l.Eligible(1) || !l.Eligible(2) {
		t.Fatalf("eligible: p=0 step %v, p=0.1 step %v; want false, true", l.Eligible(1), l.Eligible(2))
	}
	arrive(t, l, 1, 1<<19, 0)
	wantDecision(t, l.OnTrim(1, 1, 1), false, true, ReasonVesting)
}

func TestPOneStepMayForgiveEverything(t *testing.T) {
	// With p = 1, forgiven + len <= 1 × (received + forgiven + len) always
	// holds, and p/(1-p) is undefined: the invariant checker must cope.
	cfg := DefaultConfig()
	cfg.PHigh = 1
	l := newLedger(t, cfg, always(0))
	begin(t, l, 1, false, 8192)
	wantDecision(t, l.OnTrim(1, 8192, 8192), true, true, ReasonForgiven)
	wantCounts(t, record(t, l, 1), 0, 8192, 0)
}

func TestInconsistentReportsChangeNothing(t *testing.T) {
	l := newLedger(t, DefaultConfig(), always(0))
	begin(t, l, 1, false, 1<<20)
	arrive(t, l, 1, 1<<19, 0)
	l.OnTrim(1, 100, 100)
	before := record(t, l, 1)

	for _, tc := range []struct{ missing, newly int64 }{
		{0, 0}, {-5, 0}, {10, -1}, {10, 11},
		{300, 100},            // 200 of the missing bytes were never counted
		{MaxStepBytes + 1, 0}, // beyond any step
	} {
		wantDecision(t, l.OnTrim(1, tc.missing, tc.newly), false, false, ReasonInconsistent)
	}
	for _, tc := range []struct{ newly, from int64 }{
		{-1, 0}, {5, 6}, {5, -1}, {200, 101}, // only 100 are outstanding
	} {
		if err := l.OnArrival(1, tc.newly, tc.from); !errors.Is(err, ErrBadCount) {
			t.Errorf("OnArrival(1, %d, %d) = %v, want ErrBadCount", tc.newly, tc.from, err)
		}
	}
	after := record(t, l, 1)
	if after.Inconsistent != 10 {
		t.Fatalf("Inconsistent = %d, want 10", after.Inconsistent)
	}
	after.Inconsistent = before.Inconsistent
	if after != before {
		t.Fatalf("inconsistent reports changed the step:\n before %+v\n after  %+v", before, after)
	}
}

func TestOnStepBeginRejectsBadExpected(t *testing.T) {
	l := newLedger(t, DefaultConfig(), always(0))
	for _, n := range []int64{-1, MaxStepBytes + 1} {
		if err := l.OnStepBegin(1, false, n); !errors.Is(err, ErrBadCount) {
			t.Errorf("OnStepBegin(expected %d) = %v, want ErrBadCount", n, err)
		}
	}
}

func TestHistoryIsBounded(t *testing.T) {
	// Closed steps keep their record for HistorySteps closes, then are
	// forgotten, and a forgotten step can never begin again.
	l := newLedger(t, DefaultConfig(), always(0))
	for s := StepID(1); s <= HistorySteps+1; s++ {
		begin(t, l, s, false, 100)
		l.OnAllReduceComplete(s)
	}
	if _, ok := l.Record(1); ok {
		t.Fatal("step 1 still recorded after HistorySteps later closes")
	}
	if _, ok := l.Record(2); !ok {
		t.Fatal("step 2 forgotten too early")
	}
	if len(l.steps) != HistorySteps {
		t.Fatalf("%d steps kept, want %d", len(l.steps), HistorySteps)
	}
	if err := l.OnStepBegin(1, false, 100); !errors.Is(err, ErrStepTooOld) {
		t.Fatalf("beginning forgotten step 1: %v, want ErrStepTooOld", err)
	}
	begin(t, l, HistorySteps+2, false, 100)
}

func TestOpenStepsAreBounded(t *testing.T) {
	l := newLedger(t, DefaultConfig(), always(0))
	for s := StepID(1); s <= MaxOpenSteps; s++ {
		begin(t, l, s, false, 100)
	}
	if err := l.OnStepBegin(MaxOpenSteps+1, false, 100); !errors.Is(err, ErrTooManyOpen) {
		t.Fatalf("step past MaxOpenSteps: %v, want ErrTooManyOpen", err)
	}
	l.OnAllReduceComplete(1)
	begin(t, l, MaxOpenSteps+1, false, 100)
}

func TestArrivalsAfterCloseStillCount(t *testing.T) {
	// "At step completion, received + forgiven equals the step's expected
	// bytes". Late arrivals keep the closed record honest.
	l := newLedger(t, DefaultConfig(), always(0))
	begin(t, l, 1, false, 1000)
	arrive(t, l, 1, 500, 0)
	wantDecision(t, l.OnTrim(1, 100, 100), false, true, ReasonVesting)
	arrive(t, l, 1, 400, 0)
	l.OnAllReduceComplete(1)
	arrive(t, l, 1, 100, 100)
	if r := record(t, l, 1); r.Received+r.Forgiven != r.Expected || r.Outstanding != 0 {
		t.Fatalf("closed record: %+v", r)
	}
}

func TestNewLedgerValidates(t *testing.T) {
	if _, err := NewLedger(DefaultConfig(), nil); !errors.Is(err, ErrConfig) {
		t.Fatalf("nil Rand: %v", err)
	}
	cfg := DefaultConfig()
	cfg.P = 2
	if _, err := NewLedger(cfg, always(0)); !errors.Is(err, ErrConfig) {
		t.Fatalf("P = 2: %v", err)
	}
}

func TestReasonString(t *testing.T) {
	if ReasonVesting.String() != "vesting" || Reason(0).String() != "Reason(0)" || Reason(99).String() != "Reason(99)" {
		t.Fatalf("Reason strings: %v %v %v", ReasonVesting, Reason(0), Reason(99))
	}
}
