package budget

import "github.com/forgive-emu/forgive/internal/splitmix"

// Shed is DBLP's sender-side shedding, the baseline FORGIVE is measured
// against: "A hash draw at the sender sheds whole gradient messages: few
// during the critical learning regime, more after it." It reports whether
// the sender drops the whole gradient message, with probability p, where p
// is the step's P_low or P_high.
//
// The draw is a hash, not a random stream, so every rank and every run with
// the same seed sheds the same messages whatever order they are sent in.
// The inputs are folded through SplitMix64's finalizer one at a time, and
// the top 53 bits of the result give a uniform value u in [0, 1); the
// message is shed when u < p. p <= 0 (or NaN) never sheds; p >= 1 always
// does.
func Shed(seed uint64, step StepID, rank, message uint64, p float64) bool {
	h := splitmix.Next(seed)
	h = splitmix.Next(h ^ uint64(step))
	h = splitmix.Next(h ^ rank)
	h = splitmix.Next(h ^ message)
	u := float64(h>>11) * (1.0 / (1 << 53))
	return u < p
}
