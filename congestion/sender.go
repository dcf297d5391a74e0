package congestion

import (
	"errors"
	"fmt"
	"time"
)

// Mode is FORGIVE's per-flow cc_mode at the sender.
type Mode uint8

const (
	// Obeying: congestion signals cut the rate, as congestion control
	// always does.
	Obeying Mode = iota
	// Exempt: the receiver reports the flow eligible and its loss budget
	// not exhausted, so the sender ignores congestion signals.
	Exempt
)

// String names the mode.
func (m Mode) String() string {
	switch m {
	case Obeying:
		return "obeying"
	case Exempt:
		return "exempt"
	default:
		return fmt.Sprintf("Mode(%d)", uint8(m))
	}
}

// SenderConfig configures a Sender.
type SenderConfig struct {
	// CutOnRetransmissionRequest makes an obeying sender cut its rate on
	// every retransmission request, as the seed's
	// Sender::OnRetransmissionRequest does ("if (flow.cc_mode == Obeying):
	// ReduceRate(flow)"). The cut is the controller's CNP reaction. Plain
	// DCQCN does not react to NACKs; turn this off to compare.
	CutOnRetransmissionRequest bool
	Pacer                      PacerConfig
	// Exemption is what the controller does when an exemption begins:
	// ExemptionHold (the default) keeps everything as it was, except
	// that NSCC holds its window at the ceiling; ExemptionLineRate and
	// ExemptionNoCut are the named counterfactuals.
	Exemption Exemption
}

// Exemption says what a flow's controller does while FORGIVE exempts it.
// The seed says only that an exempt sender "ignores congestion signals".
type Exemption uint8

const (
	// ExemptionHold is the engine's rule: a rate controller (DCQCN) is
	// not cut while exempt, and a rate cut before the exemption began
	// keeps recovering on the controller's own timers; a window
	// controller (NSCC) holds its window at the ceiling.
	ExemptionHold Exemption = iota
	// ExemptionLineRate: when an exemption begins a rate controller
	// restarts at line rate with fresh state (α, target, timers, stage
	// counts), its counters kept, as a new queue pair starts; while
	// exempt it is not cut. A rate controller only.
	ExemptionLineRate
	// ExemptionNoCut: while exempt a window controller's window follows
	// its own increase rules and is never cut (no multiplicative
	// decrease, quick adapt or NACK cut); it is neither raised to the
	// ceiling when the exemption begins nor reset when it ends. A window
	// controller only.
	ExemptionNoCut
)

var exemptionNames = [...]string{ExemptionHold: "hold", ExemptionLineRate: "line-rate", ExemptionNoCut: "no-cut"}

// String names the exemption rule.
func (e Exemption) String() string {
	if int(e) < len(exemptionNames) {
		return exemptionNames[e]
	}
	return fmt.Sprintf("Exemption(%d)", uint8(e))
}

// ParseExemption reads an exemption rule's name; empty is hold.
func ParseExemption(s string) (Exemption, error) {
	if s == "" {
		return ExemptionHold, nil
	}
	for i, n := range exemptionNames {
		if n == s {
			return Exemption(i), nil
		}
	}
	return 0, fmt.Errorf("%w: exemption %q (want hold, line-rate or no-cut)", ErrExemption, s)
}

// ErrExemption is returned for an exemption rule that does not exist or
// does not fit the controller.
var ErrExemption = errors.New("congestion: exemption rule")

// restarter is a rate controller that can start over at line rate.
type restarter interface {
	Restart(now time.Duration)
}

// CheckExemption reports whether the rule fits a controller of kind k:
// line-rate needs a rate controller (dcqcn or none), no-cut a window
// controller (nscc).
func CheckExemption(e Exemption, k Kind) error {
	switch {
	case e > ExemptionNoCut:
		return fmt.Errorf("%w: %v", ErrExemption, e)
	case e == ExemptionLineRate && k == KindNSCC:
		return fmt.Errorf("%w: line-rate restarts a rate controller; nscc is a window (its hold rule already raises the window to the ceiling; no-cut is its counterfactual)", ErrExemption)
	case e == ExemptionNoCut && k != KindNSCC:
		return fmt.Errorf("%w: no-cut is a window controller's rule; %v is a rate controller, whose hold rule already only stops cuts (line-rate is its counterfactual)", ErrExemption, k)
	}
	return nil
}

// DefaultSenderConfig follows the seed: cut on retransmission requests
// while obeying, default pacer burst.
func DefaultSenderConfig() SenderConfig {
	return SenderConfig{CutOnRetransmissionRequest: true, Pacer: DefaultPacerConfig()}
}

// SenderStats counts one flow's reports, signals and mode history. The
// durations include the period in progress at the time Stats was asked.
type SenderStats struct {
	Reports     uint64 // acknowledgements and retransmission requests seen
	ModeChanges uint64 // Obeying↔Exempt transitions
	ToExempt    uint64 // transitions into Exempt
	ToObeying   uint64 // transitions back to Obeying
	// ExhaustedChanges counts reports whose budget-exhausted flag differs
	// from the previous report's: the seed's "set or cleared" count.
	ExhaustedChanges uint64

	CNPsObeyed   uint64 // CNPs passed to the controller
	CNPsIgnored  uint64 // CNPs ignored while exempt
	RetxRequests uint64 // retransmission requests seen
	RetxCuts     uint64 // retransmission requests that cut the rate; for a window controller, those handed to its trim rule while obeying

	// EverExempt is set once the flow has been exempt; the seed's "exempt
	// flows". ReObeyed counts the periods of obeying that followed an
	// exemption and ReObeyTime their total length: the seed's "19 percent
	// of the exempt flows obeyed congestion control again after their
	// exemption began, for 0.17 ms each on average".
	EverExempt bool
	ReObeyed   uint64
	ReObeyTime time.Duration
	ExemptTime time.Duration // total time exempt
}

// Sender is the congestion side of one flow at the sender: the rate
// controller, FORGIVE's cc_mode, and the pacer that turns the rate into
// departure times. It implements the seed's Sender::* handlers.
//
// While exempt the controller still runs its timers and byte counter: an
// exempt flow is not cut, and a rate cut before the exemption began keeps
// recovering as DCQCN would (SenderConfig.Exemption ExemptionLineRate
// restarts it at line rate instead). A window controller (NSCC) is told
// when the exemption begins and ends and defines what it does meanwhile
// (NSCC holds its window at the ceiling, or with ExemptionNoCut only
// stops cutting it).
type Sender struct {
	ctrl Controller
	// line is ctrl when it is a *LineRate, whose Advance and OnSent do
	// nothing and whose rate never changes: the per-packet calls skip the
	// interface for it.
	line *LineRate
	// win is ctrl when it also limits the bytes in flight (NSCC): it
	// takes every ACK and is told when the exemption begins and ends.
	win   WindowController
	cfg   SenderConfig
	pacer Pacer

	mode      Mode
	modeSince time.Duration // when the current mode began

	reported      bool // a report has arrived
	lastExhausted bool // budget-exhausted flag of the latest report

	stats SenderStats
}

// ErrNilController is returned by NewSender without a controller.
var ErrNilController = errors.New("congestion: nil controller")

// NewSender starts a flow at now: Sender::OnFlowStart, "Every flow obeys
// congestion control until the first report arrives".
func NewSender(now time.Duration, ctrl Controller, cfg SenderConfig) (*Sender, error) {
	if ctrl == nil {
		return nil, ErrNilController
	}
	if err := cfg.Pacer.Validate(); err != nil {
		return nil, fmt.Errorf("sender config: %w", err)
	}
	line, _ := ctrl.(*LineRate)
	win, _ := ctrl.(WindowController)
	switch cfg.Exemption {
	case ExemptionHold:
	case ExemptionLineRate:
		if _, ok := ctrl.(restarter); !ok && line == nil {
			return nil, fmt.Errorf("%w: line-rate needs a rate controller that can restart, not %T", ErrExemption, ctrl)
		}
	case ExemptionNoCut:
		n, ok := ctrl.(*NSCC)
		if !ok {
			return nil, fmt.Errorf("%w: no-cut needs a window controller (NSCC), not %T", ErrExemption, ctrl)
		}
		n.noCut = true
	default:
		return nil, fmt.Errorf("%w: %v", ErrExemption, cfg.Exemption)
	}
	return &Sender{
		ctrl:      ctrl,
		line:      line,
		win:       win,
		cfg:       cfg,
		pacer:     NewPacer(cfg.Pacer),
		mode:      Obeying,
		modeSince: now,
	}, nil
}

// OnReport applies the two flags of an acknowledgement or retransmission
// request: Exempt when the flow is eligible and the budget not exhausted,
// Obeying otherwise. The latest report wins.
func (s *Sender) OnReport(now time.Duration, eligible, exhausted bool) {
	s.stats.Reports++
	if s.reported && exhausted != s.lastExhausted {
		s.stats.ExhaustedChanges++
	}
	s.reported, s.lastExhausted = true, exhausted

	next := Obeying
	if eligible && !exhausted {
		next = Exempt
	}
	s.setMode(now, next)
}

// OnCongestionNotification handles a CNP: an exempt sender ignores it, an
// obeying one cuts its rate.
func (s *Sender) OnCongestionNotification(now time.Duration) {
	if s.mode == Exempt {
		s.stats.CNPsIgnored++
		s.ctrl.Advance(now)
		return
	}
	s.stats.CNPsObeyed++
	s.ctrl.OnCNP(now)
}

// OnRetransmissionRequest handles the congestion side of a
// retransmission request for bytes, with inFlight bytes unacknowledged
// (the caller retransmits). Call OnReport with the request's flags first:
// "OnReport has already applied this request's flags". An obeying sender
// cuts its rate if the config says so; an exempt one does not. A window
// controller takes every request, obeying or not, and applies its own
// trim rule unless it is exempt (CutOnRetransmissionRequest is the rate
// controllers' ReduceRate and does not apply to it).
func (s *Sender) OnRetransmissionRequest(now time.Duration, bytes, inFlight int) {
	s.stats.RetxRequests++
	if s.win != nil {
		if s.mode == Obeying {
			s.stats.RetxCuts++
		}
		s.win.OnNack(now, bytes, inFlight)
		return
	}
	if s.mode == Obeying && s.cfg.CutOnRetransmissionRequest {
		s.stats.RetxCuts++
		s.ctrl.OnCNP(now)
		return
	}
	s.ctrl.Advance(now)
}

// OnAck hands an acknowledgement's signals to a window controller, after
// OnReport has applied its flags; rate controllers take nothing from it.
func (s *Sender) OnAck(now time.Duration, a AckSignal) {
	if s.win != nil {
		s.win.OnAck(now, a)
	}
}

// Window is the congestion window in bytes, and whether the controller
// has one: a flow sends new data only while its unacknowledged bytes and
// the next packet fit in it.
func (s *Sender) Window() (int, bool) {
	if s.win == nil {
		return 0, false
	}
	return s.win.Window(), true
}

// Ready reports whether the pacer lets a packet leave at now.
func (s *Sender) Ready(now time.Duration) bool { return s.pacer.Ready(now) }

// NextSend is the earliest time the pacer lets the next packet leave.
func (s *Sender) NextSend() time.Duration { return s.pacer.NextSend() }

// OnSent records a packet of bytes leaving at now: the pacer spaces the
// next one at the current rate and the controller counts the bytes.
func (s *Sender) OnSent(now time.Duration, bytes int) {
	if s.line != nil {
		s.pacer.OnSend(now, bytes, s.line.rate)
		return
	}
	s.ctrl.Advance(now)
	s.pacer.OnSend(now, bytes, s.ctrl.Rate())
	s.ctrl.OnSent(now, bytes)
}

// Advance runs the controller's timers up to now.
func (s *Sender) Advance(now time.Duration) { s.ctrl.Advance(now) }

// NextDeadline is the controller's next timer. The pacer's NextSend is
// separate: it matters only while the flow has data to send.
func (s *Sender) NextDeadline() (time.Duration, bool) {
	if s.line != nil {
		return 0, false
	}
	return s.ctrl.NextDeadline()
}

// Rate is the controller's current rate in bits/s.
func (s *Sender) Rate() float64 { return s.ctrl.Rate() }

// Mode is the current cc_mode.
func (s *Sender) Mode() Mode { return s.mode }

// Controller returns the flow's rate controller.
func (s *Sender) Controller() Controller { return s.ctrl }

// Stats returns the flow's counters with the mode period in progress
// counted up to now.
func (s *Sender) Stats(now time.Duration) SenderStats {
	st := s.stats
	s.addPeriod(&st, s.mode, now)
	return st
}

// setMode switches the mode at now, closing the period that ends.
func (s *Sender) setMode(now time.Duration, next Mode) {
	if next == s.mode {
		return
	}
	s.addPeriod(&s.stats, s.mode, now)
	s.mode, s.modeSince = next, max(now, s.modeSince)
	s.stats.ModeChanges++
	if s.win != nil {
		s.win.SetExempt(now, next == Exempt)
	}
	if next == Exempt {
		if r, ok := s.ctrl.(restarter); ok && s.cfg.Exemption == ExemptionLineRate {
			r.Restart(now)
		}
		s.stats.ToExempt++
		s.stats.EverExempt = true
		return
	}
	s.stats.ToObeying++
	s.stats.ReObeyed++
}

// addPeriod adds the time spent in mode since modeSince to st. Obeying
// counts only after the flow has been exempt.
func (s *Sender) addPeriod(st *SenderStats, mode Mode, now time.Duration) {
	d := max(now-s.modeSince, 0)
	switch {
	case mode == Exempt:
		st.ExemptTime += d
	case s.stats.EverExempt:
		st.ReObeyTime += d
	}
}
