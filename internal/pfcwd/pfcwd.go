// Package pfcwd is the leaky bucket both PFC watchdogs keep, the NIC's
// (package nic) and the switch's (package switchcore): it fills with
// paused time and drains while nothing is paused, so the watchdogs bound
// the time paused within a window, not the length of one continuous pause
// (docs/security.md, "PAUSE").
//
// It imports only the standard library and reads no clock: time comes in
// as durations, so it may sit under every engine.
package pfcwd

import (
	"math/bits"
	"time"
)

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
