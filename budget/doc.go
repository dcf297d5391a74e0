// Package budget is FORGIVE's loss-budget ledger: the per-step state each
// receiving rank keeps, and the decision to forgive a trimmed range or to
// request it again.
//
// What it owns:
//
//   - [Ledger]: one per receiving rank. For every training step it holds p,
//     the budget, and the received, forgiven and outstanding byte counts of
//     the seed's "State per training step, at each receiving rank", and it
//     runs Receiver::OnStepBegin, Receiver::OnAllReduceComplete, the budget
//     half of Receiver::OnTrimmedHeader ([Ledger.OnTrim]) and the two flags of
//     Receiver::Flags ([Ledger.Eligible], [Ledger.Exhausted]).
//   - The gather policy ([GatherPolicy], [Config].Gather), which decides, by
//     the [Phase] the application declared for a message, whether a trimmed
//     range of a finished value may be forgiven at all
//     ([Ledger.OnTrimPhaseAt]), and the step opened before its
//     classification ([Ledger.OnStepOpenAt], [Ledger.OnStepClassifyAt])
//     with the bytes that arrived before any open ([Ledger.UnbudgetedBytes]).
//   - [Detector]: Accordion's critical-regime criterion over gradient norms.
//   - [Schedule]: the fixed schedule the seed's experiments use instead of a
//     detector (steps 1, 2, 3 and 20 of 20 are critical).
//   - [Shed]: DBLP's sender-side shedding, the baseline FORGIVE is compared
//     against.
//
// What it does not own: the byte scoreboard (rcv_nxt, the Requested /
// Forgiven / Received ranges, Unsettled) belongs to package reliability, and
// the NIC engine glues the two together. The NIC computes the missing bytes
// of a trimmed header from the scoreboard, asks the ledger, and marks the
// scoreboard as the [Decision] says. The ledger therefore sees byte counts,
// never ranges, and trusts the caller to count each byte once; it checks
// the counts it can (outstanding never goes negative, a forgiven range must
// have been counted outstanding) and refuses inconsistent reports instead
// of corrupting its state.
//
// Exact arithmetic: p is a float64, and every finite float64 is a dyadic
// rational num/2^shift. The ledger computes the budget, the vesting rule
// and the invariant check in 128-bit integer arithmetic on that exact value,
// so the three agree bit for bit: no float rounding can let the rule admit a
// range the invariant checker would then reject. See exact.go.
//
// Memory is bounded: at most [MaxOpenSteps] steps are open at once, and the
// records of the last [HistorySteps] closed steps are kept; older records
// are forgotten, and a step at or below a forgotten one can no longer begin,
// so a closed step never reopens.
//
// A Ledger, Detector or Schedule is not safe for concurrent use; like every
// protocol package here it is driven by one goroutine.
//
// Import rule: budget is a leaf. It imports only the standard library (and
// pgregory.net/rapid in tests), never reliability, wire or any other package
// of this module, and like every sans-I/O package it imports no net, os or
// syscall, reads no clock and starts no goroutine. Randomness is injected
// through [Rand].
package budget
