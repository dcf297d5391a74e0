package report

import (
	"fmt"
	"slices"

	"github.com/forgive-emu/forgive/lab/results"
)

// Headline is the one line that says what a lab's headline figure means
// and how the simulator's run of the same lab compares: the training time
// of FORGIVE (or the last policy) against the baseline's, mean ± margin
// over the seeds, on the real placement and in the simulator at the same
// scale (profile, topology, ranks, steps, policies and seeds). sim may be
// nil: the line then names the real placement's figure only.
func Headline(real, sim *results.File) string {
	rs := summaries(real)
	pi := headlinePolicy(rs)
	if pi < 1 {
		return ""
	}
	base, p := rs[0], rs[pi]
	line := fmt.Sprintf("headline: %s's training time against %s's, %s over %s on %s (real processes on this machine's cores, whose load moves %s's own time by %s)",
		p.Policy, base.Policy, changeText(base, p), plural(p.Seeds, "seed"), orDash(real.Placement), base.Policy, noiseText(base))
	if sim == nil {
		return line
	}
	ss := summaries(sim)
	si := slices.IndexFunc(ss, func(s results.Summary) bool { return s.Policy == p.Policy })
	if si < 1 {
		return line
	}
	return line + fmt.Sprintf("; the simulator, same lab on a virtual clock: %s (the seeds' own noise only; docs/lab.md, \"The headline\")",
		changeText(ss[0], ss[si]))
}

// headlinePolicy is forgive's summary, or the last policy's.
func headlinePolicy(sums []results.Summary) int {
	if i := slices.IndexFunc(sums, func(s results.Summary) bool { return s.Policy == "forgive" }); i > 0 {
		return i
	}
	return len(sums) - 1
}

// changeText is a change in words: "-20.5 ±8.5 % (faster)", with "within
// the noise" when the margin covers it and "margin unknown" from one seed.
func changeText(base, p results.Summary) string {
	if len(p.TrainingTimeChange) == 0 {
		return "n/a"
	}
	c := signedPct(p.TrainingTimeChangeMean)
	if base.TrainingTimeNoiseRuns < 2 {
		return c + " % (one seed: margin unknown)"
	}
	c += " ±" + signedPct(p.TrainingTimeChangeMargin)[1:] + " %"
	switch {
	case p.TrainingTimeWithinNoise:
		c += " (within the noise)"
	case p.TrainingTimeChangeMean < 0:
		c += " (faster)"
	default:
		c += " (slower)"
	}
	return c
}

func noiseText(base results.Summary) string {
	if base.TrainingTimeNoiseRuns < 2 {
		return "an unknown amount"
	}
	return "±" + pct(base.TrainingTimeNoise, 1) + " %"
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
