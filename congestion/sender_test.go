package congestion

import (
	"errors"
	"testing"
	"time"
)

// senderHarness is one flow's sender running DCQCN at 100 Gb/s.
type senderHarness struct {
	t *testing.T
	s *Sender
}

func newSenderHarness(t *testing.T, cfg SenderConfig) *senderHarness {
	t.Helper()
	d, err := NewDCQCN(DefaultDCQCN(100 * G))
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSender(0, d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &senderHarness{t: t, s: s}
}

func (h *senderHarness) wantMode(step string, m Mode) {
	h.t.Helper()
	if h.s.Mode() != m {
		h.t.Errorf("%s: mode %v, want %v", step, h.s.Mode(), m)
	}
}

func (h *senderHarness) wantRate(step string, rate float64) {
	h.t.Helper()
	if !approx(h.s.Rate(), rate) {
		h.t.Errorf("%s: rate %.4f G, want %.4f G", step, h.s.Rate()/G, rate/G)
	}
}

// "Every flow obeys congestion control until the first report arrives,
// one round trip after the flow starts."
func TestSenderObeysUntilFirstReport(t *testing.T) {
	h := newSenderHarness(t, DefaultSenderConfig())
	h.wantMode("flow start", Obeying)
	h.s.OnCongestionNotification(1 * us)
	h.wantRate("CNP before any report", 50*G)
}

// "The latest one wins, so the exemption can end and begin again within
// a step."
func TestSenderLatestReportWins(t *testing.T) {
	h := newSenderHarness(t, DefaultSenderConfig())
	steps := []struct {
		at                  time.Duration
		eligible, exhausted bool
		want                Mode
	}{
		{10 * us, true, false, Exempt},   // eligible, budget left
		{20 * us, true, false, Exempt},   // same flags: no change
		{30 * us, true, true, Obeying},   // budget-exhausted set
		{70 * us, true, false, Exempt},   // cleared again
		{80 * us, false, false, Obeying}, // not eligible
	}
	for _, st := range steps {
		h.s.OnReport(st.at, st.eligible, st.exhausted)
		h.wantMode("report", st.want)
	}
	got := h.s.Stats(100 * us)
	want := SenderStats{
		Reports: 5, ModeChanges: 4, ToExempt: 2, ToObeying: 2,
		ExhaustedChanges: 2, // set at 30 µs, cleared at 70 µs
		EverExempt:       true, ReObeyed: 2,
		ReObeyTime: 40*us + 20*us, // 30→70 µs, and 80→100 µs in progress
		ExemptTime: 20*us + 10*us, // 10→30 µs, 70→80 µs
	}
	if got != want {
		t.Errorf("Stats =\n%+v, want\n%+v", got, want)
	}
}

// "The sender obeys congestion control again when a report sets
// budget-exhausted, and ignores congestion signals again if a later report
// clears the flag."
func TestSenderObeysAgainWhenExhausted(t *testing.T) {
	h := newSenderHarness(t, DefaultSenderConfig())
	h.s.OnReport(1*us, true, false)
	h.s.OnCongestionNotification(2 * us)
	h.wantRate("exempt: CNP ignored", 100*G)
	h.s.OnReport(3*us, true, true)
	h.s.OnCongestionNotification(4 * us)
	h.wantRate("exhausted: CNP cuts", 50*G)
	h.s.OnReport(5*us, true, false)
	h.s.OnCongestionNotification(6 * us)
	h.wantRate("cleared: CNP ignored again", 50*G)
	st := h.s.Stats(6 * us)
	if st.CNPsIgnored != 2 || st.CNPsObeyed != 1 {
		t.Errorf("CNPs ignored %d, obeyed %d; want 2, 1", st.CNPsIgnored, st.CNPsObeyed)
	}
}

// "An exempt sender ignores ECN marks as well as trims. Most of DCQCN's
// slowdown comes from marks."
func TestSenderExemptIgnoresMarksAndTrims(t *testing.T) {
	h := newSenderHarness(t, DefaultSenderConfig())
	h.s.OnReport(1*us, true, false)
	for i := range 10 {
		h.s.OnCongestionNotification(time.Duration(2+i) * us)       // ECN marks
		h.s.OnRetransmissionRequest(time.Duration(2+i)*us, 4096, 0) // trims
	}
	h.wantRate("exempt after 10 CNPs and 10 NACKs", 100*G)
	if cuts := h.s.Controller().Stats().Cuts; cuts != 0 {
		t.Errorf("controller cut %d times while exempt", cuts)
	}
	st := h.s.Stats(20 * us)
	if st.CNPsIgnored != 10 || st.RetxRequests != 10 || st.RetxCuts != 0 {
		t.Errorf("Stats = %+v", st)
	}
}

// "OnReport has already applied this request's flags. A refusal alone does
// not end the exemption."
func TestSenderRefusalAloneDoesNotEndExemption(t *testing.T) {
	h := newSenderHarness(t, DefaultSenderConfig())
	h.s.OnReport(1*us, true, false)
	// The receiver refused to forgive (vesting or the draw) and asks for the
	// range again; its flags still say eligible and not exhausted.
	h.s.OnReport(2*us, true, false)
	h.s.OnRetransmissionRequest(2*us, 4096, 0)
	h.wantMode("after a refusal", Exempt)
	h.wantRate("after a refusal", 100*G)
}

// "if (flow.cc_mode == Obeying): ReduceRate(flow)" on a retransmission
// request, unless the config turns the cut off.
func TestSenderObeyingCutsOnRetransmissionRequest(t *testing.T) {
	h := newSenderHarness(t, DefaultSenderConfig())
	h.s.OnReport(1*us, false, false)
	h.s.OnRetransmissionRequest(2*us, 4096, 0)
	h.wantRate("obeying NACK", 50*G)
	if got := h.s.Stats(2 * us).RetxCuts; got != 1 {
		t.Errorf("RetxCuts = %d, want 1", got)
	}

	cfg := DefaultSenderConfig()
	cfg.CutOnRetransmissionRequest = false
	h = newSenderHarness(t, cfg)
	h.s.OnRetransmissionRequest(2*us, 4096, 0)
	h.wantRate("obeying NACK, cut disabled", 100*G)
}

// An exemption stops cuts, not recovery: a rate cut while obeying keeps
// climbing on DCQCN's timers once the flow is exempt.
func TestSenderExemptFlowKeepsRecovering(t *testing.T) {
	h := newSenderHarness(t, DefaultSenderConfig())
	h.s.OnCongestionNotification(0) // 50 G
	h.s.OnReport(1*us, true, false)
	if at, ok := h.s.NextDeadline(); !ok || at != 55*us {
		t.Fatalf("NextDeadline = %v, %v; want 55µs", at, ok)
	}
	h.s.Advance(55 * us)
	h.wantRate("one fast-recovery step while exempt", 75*G)
}

// The pacer spaces packets at the controller's rate.
func TestSenderPacesAtControllerRate(t *testing.T) {
	h := newSenderHarness(t, SenderConfig{})
	h.s.OnCongestionNotification(0) // 50 Gb/s: 4,096 B take 655.36 ns
	if !h.s.Ready(0) {
		t.Fatal("not ready at start")
	}
	h.s.OnSent(0, 4096)
	if h.s.Ready(654) || !h.s.Ready(655) || h.s.NextSend() != 655 {
		t.Errorf("next departure %v, want 655 ns", h.s.NextSend())
	}
}

func TestNewSenderRejectsBadInput(t *testing.T) {
	if _, err := NewSender(0, nil, DefaultSenderConfig()); !errors.Is(err, ErrNilController) {
		t.Errorf("nil controller: %v", err)
	}
	l, _ := NewLineRate(G)
	if _, err := NewSender(0, l, SenderConfig{Pacer: PacerConfig{Burst: -5}}); !errors.Is(err, ErrConfig) {
		t.Errorf("bad pacer: %v", err)
	}
	if Mode(7).String() != "Mode(7)" || Exempt.String() != "exempt" {
		t.Error("Mode.String")
	}
}

// The line-rate counterfactual: when the exemption begins, a flow cut
// while obeying is back at line rate with fresh state, and its counters
// are kept; while exempt it is not cut, and once obeying again the next
// CNP cuts from line rate with α = 1, as a new flow's first CNP does.
func TestSenderExemptLineRateRestarts(t *testing.T) {
	cfg := DefaultSenderConfig()
	cfg.Exemption = ExemptionLineRate
	h := newSenderHarness(t, cfg)
	h.s.OnCongestionNotification(0) // 50 G, α 1
	h.s.OnCongestionNotification(60 * us)
	h.wantRate("two cuts while obeying", h.s.Rate()) // whatever they left
	cut := h.s.Rate()
	if cut >= 50*G {
		t.Fatalf("two cuts left %v G", cut/G)
	}
	h.s.OnReport(61*us, true, false)
	h.wantMode("eligible", Exempt)
	h.wantRate("exemption began", 100*G)
	d := h.s.Controller().(*DCQCN)
	if d.TargetRate() != 100*G || d.Alpha() != 1 {
		t.Errorf("fresh state: target %v G, α %v; want 100 G, 1", d.TargetRate()/G, d.Alpha())
	}
	if _, ok := h.s.NextDeadline(); ok {
		t.Error("a restarted flow at line rate still asks to be woken")
	}
	if st := d.Stats(); st.CNPs != 2 || st.Cuts != 2 {
		t.Errorf("counters lost: %+v", st)
	}
	h.s.OnCongestionNotification(70 * us)
	h.wantRate("CNP while exempt", 100*G)
	h.s.OnReport(80*us, true, true)
	h.s.OnCongestionNotification(81 * us)
	h.wantRate("obeying again, first cut from line rate", 50*G)
	// Exempt again: a second restart.
	h.s.OnReport(90*us, true, false)
	h.wantRate("second exemption", 100*G)
}

// The engine's rule (hold) keeps the rate obeying left, where line-rate
// restarts it: the same history, two rules.
func TestSenderExemptHoldKeepsTheCutRate(t *testing.T) {
	h := newSenderHarness(t, DefaultSenderConfig())
	h.s.OnCongestionNotification(0)
	h.s.OnReport(1*us, true, false)
	h.wantRate("exempt under hold", 50*G)
}

func TestExemptionRulesFitTheirController(t *testing.T) {
	for _, c := range []struct {
		e    Exemption
		k    Kind
		fits bool
	}{
		{ExemptionHold, KindDCQCN, true}, {ExemptionHold, KindNSCC, true}, {ExemptionHold, KindNone, true},
		{ExemptionLineRate, KindDCQCN, true}, {ExemptionLineRate, KindNone, true}, {ExemptionLineRate, KindNSCC, false},
		{ExemptionNoCut, KindNSCC, true}, {ExemptionNoCut, KindDCQCN, false}, {ExemptionNoCut, KindNone, false},
		{Exemption(9), KindDCQCN, false},
	} {
		err := CheckExemption(c.e, c.k)
		if (err == nil) != c.fits || (err != nil && !errors.Is(err, ErrExemption)) {
			t.Errorf("CheckExemption(%v, %v) = %v, want fits %v", c.e, c.k, err, c.fits)
		}
		ctrl, _ := New(c.k, DefaultDCQCN(100*G))
		_, err = NewSender(0, ctrl, SenderConfig{Exemption: c.e})
		if (err == nil) != c.fits || (err != nil && !errors.Is(err, ErrExemption)) {
			t.Errorf("NewSender(%v, %v) = %v, want fits %v", c.e, c.k, err, c.fits)
		}
	}
	for _, name := range []string{"", "hold", "line-rate", "no-cut"} {
		e, err := ParseExemption(name)
		if err != nil || (name != "" && e.String() != name) {
			t.Errorf("ParseExemption(%q) = %v, %v", name, e, err)
		}
	}
	if _, err := ParseExemption("linerate"); !errors.Is(err, ErrExemption) {
		t.Errorf("ParseExemption(linerate) = %v", err)
	}
}
