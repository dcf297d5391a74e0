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
// recovering as DCQCN would. A window controller (NSCC) is told when the
// exemption begins and ends and defines what it does meanwhile (NSCC
// holds its window at the ceiling).
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
