// Package pfcwd is what the two PFC watchdogs share, the NIC's (package
// nic) and the switch's (package switchcore): their defaults and how a
// zero setting takes them (Settings), and the leaky bucket each keeps
// (Drain), which fills with paused time and drains while nothing is
// paused, so the watchdogs bound the time paused within a window, not the
// length of one continuous pause (docs/security.md, "PAUSE").
//
// It imports only the standard library and reads no clock: time comes in
// as durations, so it may sit under every engine.
package pfcwd

import (
	"math/bits"
	"time"
)

// The defaults of both watchdogs, for a setting left at zero.
const (
	// DefaultLimit is the paused time that fires a watchdog: 100 ms,
	// Cisco's CVD value; reference/PARAMETERS.md gives 100–200 ms.
	DefaultLimit = 100 * time.Millisecond
	// DefaultWindows is the window in limits: a neighbour may keep a port
	// or a host paused a tenth of the time (100 ms of every second) beyond
	// one limit's burst. PFC is the backstop behind ECN, whose pauses stay
	// "rare, brief and local"; a link paused a tenth of every second is in
	// a pause storm, honest or forged.
	DefaultWindows = 10
)

// Settings returns a watchdog's limit, recovery and window as configured,
// with the defaults in place of zeros: a zero limit is DefaultLimit, a
// zero recovery the limit, a zero window DefaultWindows limits. A
// negative limit turns the watchdog off: on is false and the rest zero.
// It does not check that the window is longer than the limit; each
// engine's Validate does, in its own words.
func Settings(limit, recovery, window time.Duration) (l, r, w time.Duration, on bool) {
	if limit < 0 {
		return 0, 0, 0, false
	}
	if limit == 0 {
		limit = DefaultLimit
	}
	if recovery == 0 {
		recovery = limit
	}
	if window == 0 {
		window = DefaultWindows * limit
	}
	return limit, recovery, window, true
}

// Drain returns the bucket's level after gap without pause: it loses limit
// in every per, so that over a long run at most limit/(limit+per) of the
// time is paused, limit in every window of limit+per. A level or gap that
// is not positive, or a per that is not, leaves the level (never below 0).
func Drain(level, gap, limit, per time.Duration) time.Duration {
	if level <= 0 || gap <= 0 || per <= 0 {
		return max(level, 0)
	}
	hi, lo := bits.Mul64(uint64(gap), uint64(limit))
	if hi >= uint64(per) { // the quotient is past 2^64: more than any level
		return 0
	}
	q, _ := bits.Div64(hi, lo, uint64(per))
	if q >= uint64(level) {
		return 0
	}
	return level - time.Duration(q)
}
