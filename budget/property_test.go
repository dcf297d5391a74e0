package budget

import (
	"math/big"
	"math/rand/v2"
	"testing"

	"pgregory.net/rapid"
)

// byteState is the model's view of one byte of the step, as the
// reliability scoreboard would hold it.
type byteState uint8

const (
	absent    byteState = iota
	counted             // Requested, counted in the step's outstanding
	uncounted           // Requested after the step closed: never counted
	received
	forgiven
)

// stepModel simulates the scoreboard of one step's bytes and derives the
// counts the NIC would pass to the ledger.
type stepModel struct {
	bytes []byteState
}

func (m *stepModel) count(s byteState) int64 {
	var n int64
	for _, b := range m.bytes {
		if b == s {
			n++
		}
	}
	return n
}

// trimCounts returns Count(Unsettled(range)) and the bytes of it not yet
// counted outstanding.
func (m *stepModel) trimCounts(lo, hi int) (missing, newly int64) {
	for _, b := range m.bytes[lo:hi] {
		switch b {
		case absent, uncounted:
			missing++
			newly++
		case counted:
			missing++
		}
	}
	return missing, newly
}

// arrivalCounts returns the bytes that first become Received, and how many
// of them were counted outstanding. Payload over Forgiven bytes is discarded.
func (m *stepModel) arrivalCounts(lo, hi int) (newly, fromOutstanding int64) {
	for _, b := range m.bytes[lo:hi] {
		switch b {
		case absent, uncounted:
			newly++
		case counted:
			newly++
			fromOutstanding++
		}
	}
	return newly, fromOutstanding
}

// mark sets every byte of the range in state from to state to.
func (m *stepModel) mark(lo, hi int, to byteState, from ...byteState) {
	for i := lo; i < hi; i++ {
		for _, f := range from {
			if m.bytes[i] == f {
				m.bytes[i] = to
				break
			}
		}
	}
}

type ledgerHarness struct {
	t      *rapid.T
	l      *Ledger
	cfg    Config
	step   StepID
	p      float64
	budget int64
	model  stepModel
}

func TestLedgerInvariantsUnderRandomInterleavings(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := newHarness(rt)
		for i, n := 0, rapid.IntRange(0, 150).Draw(rt, "events"); i < n; i++ {
			lo, hi := h.drawRange()
			switch rapid.IntRange(0, 19).Draw(rt, "event") {
			case 0:
				h.l.OnAllReduceComplete(h.step)
			case 1, 2, 3, 4, 5, 6, 7, 8:
				h.trim(lo, hi)
			default:
				h.arrive(lo, hi)
			}
			h.checkAgainstModel()
		}
		// Deliver everything still missing: the step completes.
		h.arrive(0, len(h.model.bytes))
		h.checkAgainstModel()
		r, _ := h.l.Record(h.step)
		// "At step completion, received + forgiven equals the step's
		// expected bytes, so forgiven <= p × expected still holds"
		if r.Received+r.Forgiven != r.Expected || r.Outstanding != 0 {
			rt.Fatalf("completed step: received %d + forgiven %d != expected %d (outstanding %d)",
				r.Received, r.Forgiven, r.Expected, r.Outstanding)
		}
		if !leq(rat(r.Forgiven), new(big.Rat).Mul(ratP(h.p), rat(r.Expected))) {
			rt.Fatalf("forgiven %d > p × expected = %v × %d", r.Forgiven, h.p, r.Expected)
		}
	})
}

func newHarness(rt *rapid.T) *ledgerHarness {
	cfg := Config{
		PLow:        genProbability().Draw(rt, "PLow"),
		PHigh:       genProbability().Draw(rt, "PHigh"),
		P:           rapid.OneOf(rapid.SampledFrom([]float64{0, 0.25, 1}), rapid.Float64Range(0, 1)).Draw(rt, "P"),
		PacketBytes: rapid.Int64Range(1, 512).Draw(rt, "PacketBytes"),
		NoVesting:   rapid.Bool().Draw(rt, "NoVesting"),
		NoExemption: rapid.Bool().Draw(rt, "NoExemption"),
	}
	seed := rapid.Uint64().Draw(rt, "seed")
	l, err := NewLedger(cfg, rand.New(rand.NewPCG(seed, seed^0x5eed)))
	if err != nil {
		rt.Fatalf("NewLedger: %v", err)
	}
	h := &ledgerHarness{t: rt, l: l, cfg: cfg}
	h.step = StepID(rapid.Uint64Range(1, 100).Draw(rt, "step"))
	critical := rapid.Bool().Draw(rt, "critical")
	expected := rapid.IntRange(1, 3000).Draw(rt, "expected")
	if err := l.OnStepBegin(h.step, critical, int64(expected)); err != nil {
		rt.Fatalf("OnStepBegin: %v", err)
	}
	h.p = cfg.PHigh
	if critical {
		h.p = cfg.PLow
	}
	h.budget = ratFloor(h.p, int64(expected))
	h.model.bytes = make([]byteState, expected)
	return h
}

func (h *ledgerHarness) drawRange() (lo, hi int) {
	n := len(h.model.bytes)
	lo = rapid.IntRange(0, n-1).Draw(h.t, "lo")
	hi = lo + rapid.IntRange(1, min(600, n-lo)).Draw(h.t, "len")
	return lo, hi
}

func (h *ledgerHarness) trim(lo, hi int) {
	missing, newly := h.model.trimCounts(lo, hi)
	if missing == 0 {
		return // "Nothing is missing after all, so acknowledge and charge nothing."
	}
	before, _ := h.l.Record(h.step)
	d := h.l.OnTrim(h.step, missing, newly)
	if !before.Open {
		if d != (Decision{Reason: ReasonStepClosed}) {
			h.t.Fatalf("trim on a closed step: %+v", d)
		}
		h.model.mark(lo, hi, uncounted, absent)
		return
	}
	h.checkDecision(before, d, missing)
	h.model.mark(lo, hi, counted, absent, uncounted)
	if d.Forgive {
		h.model.mark(lo, hi, forgiven, counted)
	}
}

// checkDecision recomputes the decision with big.Rat from the state before
// the trim.
func (h *ledgerHarness) checkDecision(before StepRecord, d Decision, missing int64) {
	if !d.Counted || d.Forgive != (d.Reason == ReasonForgiven) {
		h.t.Fatalf("open step, consistent report: %+v", d)
	}
	after := before.Forgiven + missing
	vests := h.cfg.NoVesting || leq(rat(after), new(big.Rat).Mul(ratP(h.p), rat(before.Received+after)))
	var want []Reason
	switch {
	case !vests:
		want = []Reason{ReasonVesting}
	case after > h.budget:
		want = []Reason{ReasonBudget}
	case h.cfg.P == 1:
		want = []Reason{ReasonForgiven}
	case h.cfg.P == 0:
		want = []Reason{ReasonDraw}
	default:
		want = []Reason{ReasonForgiven, ReasonDraw}
	}
	for _, r := range want {
		if d.Reason == r {
			return
		}
	}
	h.t.Fatalf("decision %v for %d missing with %+v; want one of %v", d.Reason, missing, before, want)
}

func (h *ledgerHarness) arrive(lo, hi int) {
	newly, from := h.model.arrivalCounts(lo, hi)
	if err := h.l.OnArrival(h.step, newly, from); err != nil {
		h.t.Fatalf("OnArrival(%d, %d): %v", newly, from, err)
	}
	h.model.mark(lo, hi, received, absent, counted, uncounted)
}

// checkAgainstModel checks the ledger's counts against the simulated
// scoreboard and the invariants against big.Rat arithmetic.
func (h *ledgerHarness) checkAgainstModel() {
	r, ok := h.l.Record(h.step)
	if !ok {
		h.t.Fatalf("step %d lost", h.step)
	}
	m := &h.model
	if r.Received != m.count(received) || r.Forgiven != m.count(forgiven) || r.Outstanding != m.count(counted) {
		h.t.Fatalf("ledger received/forgiven/outstanding %d/%d/%d, scoreboard %d/%d/%d",
			r.Received, r.Forgiven, r.Outstanding, m.count(received), m.count(forgiven), m.count(counted))
	}
	if r.Budget != h.budget {
		h.t.Fatalf("budget %d, want floor(%v × %d) = %d", r.Budget, h.p, r.Expected, h.budget)
	}
	// "At all times, forgiven is at most budget."
	if r.Forgiven > r.Budget || r.Outstanding < 0 {
		h.t.Fatalf("forgiven %d budget %d outstanding %d", r.Forgiven, r.Budget, r.Outstanding)
	}
	// "forgiven never exceeds p/(1-p) × received", as (1-p) × forgiven <=
	// p × received, which is defined at p = 1.
	oneMinusP := new(big.Rat).Sub(big.NewRat(1, 1), ratP(h.p))
	if !h.cfg.NoVesting && !leq(new(big.Rat).Mul(oneMinusP, rat(r.Forgiven)), new(big.Rat).Mul(ratP(h.p), rat(r.Received))) {
		h.t.Fatalf("forgiven %d > p/(1-p) × received %d, p = %v", r.Forgiven, r.Received, h.p)
	}
	if err := h.l.CheckInvariants(h.step); err != nil || !r.InvariantHeld {
		h.t.Fatalf("CheckInvariants: %v (InvariantHeld %v)", err, r.InvariantHeld)
	}
	wantExhausted := r.Forgiven+r.Outstanding+h.cfg.PacketBytes > r.Budget
	if h.l.Exhausted(h.step) != wantExhausted {
		h.t.Fatalf("Exhausted = %v with %+v", !wantExhausted, r)
	}
	wantEligible := !h.cfg.NoExemption && h.p > 0
	if elig, ex := h.l.Flags(h.step); elig != wantEligible || ex != (wantEligible && wantExhausted) {
		h.t.Fatalf("Flags = %v, %v; want %v, %v", elig, ex, wantEligible, wantEligible && wantExhausted)
	}
}
