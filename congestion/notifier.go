package congestion

import (
	"fmt"
	"time"
)

// DefaultCNPInterval is N in "at most one per flow every N = 50 µs".
const DefaultCNPInterval = 50 * time.Microsecond

// NotifierConfig configures a notification point.
type NotifierConfig struct {
	// Interval is the least time between two CNPs of one flow. Zero sends
	// a CNP for every CE-marked arrival, as HPCC's simulator does.
	Interval time.Duration
	// Deferred sends, at the end of an interval, one CNP for the marks that
	// arrived while the interval suppressed them. The DCQCN paper: the NIC
	// "generates at most one CNP packet every N microseconds for the flow,
	// if any packet that arrives within that time window was marked";
	// htsim's DCQCN sink does the same. Without it a mark that arrives
	// inside the interval and is never followed by another is not echoed.
	Deferred bool
}

// DefaultNotifierConfig is the paper's notification point.
func DefaultNotifierConfig() NotifierConfig {
	return NotifierConfig{Interval: DefaultCNPInterval, Deferred: true}
}

// Validate reports a negative interval.
func (c NotifierConfig) Validate() error {
	if c.Interval < 0 {
		return fmt.Errorf("%w: NotifierConfig.Interval = %v, want >= 0", ErrConfig, c.Interval)
	}
	return nil
}

// NotifierStats counts what a notification point saw and sent.
type NotifierStats struct {
	Marked uint64 // CE-marked arrivals
	CNPs   uint64 // CNPs sent, immediate and deferred
}

// Notifier is DCQCN's notification point for one flow: it turns CE-marked
// arrivals into at most one CNP per interval. It is a small value meant to
// live inside the receiving NIC's per-flow record, so its memory is
// bounded by the flow table and no lookup by flow id is needed.
type Notifier struct {
	interval time.Duration
	deferred bool
	last     time.Duration // when the last CNP was sent
	sent     bool          // a CNP has been sent
	pending  bool          // a suppressed mark awaits a deferred CNP
	stats    NotifierStats
}

// NewNotifier returns a notification point. A negative interval counts as
// zero; call cfg.Validate when loading a configuration to reject it.
func NewNotifier(cfg NotifierConfig) Notifier {
	return Notifier{interval: max(cfg.Interval, 0), deferred: cfg.Deferred}
}

// OnCE reports a CE-marked arrival at now and says whether to send a CNP
// for it now.
func (n *Notifier) OnCE(now time.Duration) (sendCNP bool) {
	n.stats.Marked++
	if n.open(now) {
		n.send(now)
		return true
	}
	if n.deferred {
		n.pending = true
	}
	return false
}

// Advance says whether a deferred CNP is due at now; if so it counts as
// sent at now and the caller must send it.
func (n *Notifier) Advance(now time.Duration) (sendCNP bool) {
	if !n.pending || !n.open(now) {
		return false
	}
	n.send(now)
	return true
}

// NextDeadline is when a deferred CNP becomes due, if one is waiting.
func (n *Notifier) NextDeadline() (time.Duration, bool) {
	return n.last + n.interval, n.pending
}

// Stats returns the counters.
func (n *Notifier) Stats() NotifierStats { return n.stats }

// open reports whether the interval since the last CNP has passed.
func (n *Notifier) open(now time.Duration) bool {
	return !n.sent || now-n.last >= n.interval
}

func (n *Notifier) send(now time.Duration) {
	n.last, n.sent, n.pending = now, true, false
	n.stats.CNPs++
}
