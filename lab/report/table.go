package report

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/forgive-emu/forgive/lab/results"
)

// headerWidth is where the profile's derived values wrap.
const headerWidth = 110

// Table writes the lab's report in the seed's terms: a header naming the
// profile (with its derived values), topology, ranks, steps and seeds, the
// main table (training time, its change against the baseline, gradient
// bytes given up, all-reduce medians, retransmitted and trimmed bytes, the
// two exactness checks), a second table of congestion and exemption
// figures, and notes on anything that failed or could not be compared.
//
// Table prints f.Summary; a file not yet summarized is summarized on the
// fly without being modified.
func Table(w io.Writer, f *results.File) error {
	sums := f.Summary
	if len(sums) == 0 {
		sums = summaries(f)
	}
	baseline := "baseline"
	if len(sums) > 0 {
		baseline = sums[0].Policy
	}
	b := &strings.Builder{}
	writeHeader(b, f, baseline)
	b.WriteString("\n")
	writeMainTable(b, sums, baseline)
	b.WriteString("\ncongestion and exemption (means over seeds)\n")
	writeExemptionTable(b, sums, baseline)
	writeNotes(b, f, baseline)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeHeader(b *strings.Builder, f *results.File, baseline string) {
	fmt.Fprintf(b, "profile   %s\n", orDash(f.Profile.Name))
	for _, line := range wrap(derivedPairs(f.Profile.Derived), headerWidth-10) {
		fmt.Fprintf(b, "          %s\n", line)
	}
	fmt.Fprintf(b, "topology  %s   ranks %d   steps %d   seeds %s\n",
		orDash(f.Topology), f.Ranks, f.Steps, joinSeeds(f.Seeds))
	fmt.Fprintf(b, "placement %s   scale %s\n", orDash(f.Placement), scaleString(f.Scale))
	fmt.Fprintf(b, "baseline  %s: a change is (policy - %s) / %s, seed by seed; negative is a cut\n",
		baseline, baseline, baseline)
}

func writeMainTable(b *strings.Builder, sums []results.Summary, baseline string) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	row(tw, "policy", "time s", "change vs "+baseline, "given up", "all-reduce ms", "retx", "trimmed", "budget", "non-grad")
	row(tw, "", "mean", "min..max %", "min..max %", "non-crit/crit", "min..max %", "min..max %", "invariant", "exact")
	for i, s := range sums {
		if s.Seeds == 0 {
			row(tw, s.Policy, "no runs")
			continue
		}
		change := "baseline"
		if i > 0 {
			change = changeRange(s.TrainingTimeChange, s.TrainingTimeChangeMin, s.TrainingTimeChangeMax)
		}
		row(tw, s.Policy,
			sig3(s.TrainingTimeMeanS),
			change,
			pctRange(s.GivenUpMin, s.GivenUpMax, 2),
			sig3(s.AllReduceNonCritical*1e3)+" / "+sig3(s.AllReduceCritical*1e3),
			pctRange(s.RetransmittedFracMin, s.RetransmittedFracMax, 1),
			pctRange(s.TrimmedFracMin, s.TrimmedFracMax, 2),
			yesNo(s.InvariantHeld),
			yesNo(s.NonGradientExact))
	}
	tw.Flush()
}

func writeExemptionTable(b *strings.Builder, sums []results.Summary, baseline string) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	row(tw, "policy", "CNPs", "rate", "RTOs", "TP median", "TP change", "exempt", "flag changes", "re-obeyed", "re-obey", "gradient sums")
	row(tw, "", "", "cuts", "", "ms", "min..max %", "flows", "per flow", "%", "mean ms", "exact")
	for i, s := range sums {
		if s.Seeds == 0 {
			row(tw, s.Policy, "no runs")
			continue
		}
		tpChange := "baseline"
		if i > 0 {
			tpChange = changeRange(s.TPCompletionChange, s.TPCompletionChangeMin, s.TPCompletionChangeMax)
		}
		row(tw, s.Policy,
			count(s.CNPs), count(s.RateCuts), count(s.RTOs),
			sig3(s.TPCompletionMedianS*1e3), tpChange,
			count(s.ExemptFlows),
			fmt.Sprintf("%.2f", s.FlagChangesPerExemptFlow),
			pct(s.ReObeyedFrac, 1),
			sig3(s.ReObeyMeanS*1e3),
			yesNo(s.GradientSumsExact))
	}
	tw.Flush()
}

// writeNotes lists what a reader must not miss: a failed check, named by
// run and (where the steps say) by step, and runs that had no baseline run
// with their seed and so are missing from the changes.
func writeNotes(b *strings.Builder, f *results.File, baseline string) {
	var notes []string
	for _, r := range f.Runs {
		id := fmt.Sprintf("%s seed %d", r.Policy, r.Seed)
		if !r.BudgetInvariantHeld {
			notes = append(notes, "FAILED budget invariant: "+id+failedSteps(r.Steps))
		}
		if !r.NonGradientBytesExact {
			notes = append(notes, "FAILED non-gradient bytes exact: "+id)
		}
		if !r.GradientSumsExact {
			notes = append(notes, "FAILED gradient sums exact: "+id)
		}
		if !hasSeed(f.Runs, baseline, r.Seed) {
			notes = append(notes, fmt.Sprintf("no %s run with seed %d: %s left out of the changes", baseline, r.Seed, id))
		}
	}
	if len(notes) == 0 {
		return
	}
	b.WriteString("\n")
	for _, n := range notes {
		b.WriteString(n + "\n")
	}
}

func failedSteps(steps []results.Step) string {
	var failed []string
	for _, s := range steps {
		if !s.Invariant {
			failed = append(failed, strconv.Itoa(s.Step))
		}
	}
	if len(failed) == 0 {
		return ""
	}
	return " (steps " + strings.Join(failed, ", ") + ")"
}

func hasSeed(runs []results.Run, policy string, seed uint64) bool {
	for _, r := range runs {
		if r.Policy == policy && r.Seed == seed {
			return true
		}
	}
	return false
}

func row(w io.Writer, cells ...string) {
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// changeRange prints a signed percentage range, or n/a when no seed could
// be compared with the baseline.
func changeRange(changes []float64, lo, hi float64) string {
	if len(changes) == 0 {
		return "n/a"
	}
	return signedPctRange(lo, hi)
}

func signedPctRange(lo, hi float64) string {
	return collapse(signedPct(lo), signedPct(hi))
}

func pctRange(lo, hi float64, decimals int) string {
	return collapse(pct(lo, decimals), pct(hi, decimals))
}

// collapse prints one value when both ends of a range print the same.
func collapse(lo, hi string) string {
	if lo == hi {
		return lo
	}
	return lo + ".." + hi
}

func pct(frac float64, decimals int) string {
	return noNegativeZero(strconv.FormatFloat(frac*100, 'f', decimals, 64))
}

func signedPct(frac float64) string {
	return noNegativeZero(fmt.Sprintf("%+.1f", frac*100))
}

// noNegativeZero drops the sign of a value that rounds to zero, so a
// change too small to print reads 0.0 rather than -0.0.
func noNegativeZero(s string) string {
	if strings.Trim(s, "+-0.") == "" {
		return strings.TrimLeft(s, "+-")
	}
	return s
}

// sig3 prints about three significant digits without an exponent for the
// magnitudes a time in seconds or milliseconds takes here.
func sig3(x float64) string {
	a := math.Abs(x)
	switch {
	case a == 0:
		return "0"
	case a >= 100:
		return strconv.FormatFloat(x, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(x, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(x, 'f', 2, 64)
	case a >= 0.1:
		return strconv.FormatFloat(x, 'f', 3, 64)
	default:
		return strconv.FormatFloat(x, 'g', 3, 64)
	}
}

// count prints a mean of counts compactly: 812, 4.5k, 1.23M, 2.05G.
func count(x float64) string {
	a := math.Abs(x)
	switch {
	case a >= 1e9:
		return strconv.FormatFloat(x/1e9, 'f', 2, 64) + "G"
	case a >= 1e6:
		return strconv.FormatFloat(x/1e6, 'f', 2, 64) + "M"
	case a >= 1e4:
		return strconv.FormatFloat(x/1e3, 'f', 0, 64) + "k"
	case a >= 1e3:
		return strconv.FormatFloat(x/1e3, 'f', 1, 64) + "k"
	default:
		return strconv.FormatFloat(x, 'g', 3, 64)
	}
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "NO"
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func joinSeeds(seeds []uint64) string {
	if len(seeds) == 0 {
		return "-"
	}
	parts := make([]string, len(seeds))
	for i, s := range seeds {
		parts[i] = strconv.FormatUint(s, 10)
	}
	return strings.Join(parts, ", ")
}

func derivedPairs(derived map[string]string) []string {
	keys := slices.Sorted(maps.Keys(derived))
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + "=" + derived[k]
	}
	return pairs
}

// wrap joins words with ", " into lines of at most width characters,
// counting the comma that ends a line (a single longer word gets a line of
// its own).
func wrap(words []string, width int) []string {
	var (
		lines []string
		cur   string
	)
	for _, w := range words {
		switch {
		case cur == "":
			cur = w
		case len(cur)+2+len(w)+1 <= width:
			cur += ", " + w
		default:
			lines = append(lines, cur+",")
			cur = w
		}
	}
	if cur != "" {
		lines = append(lines, cur)
	}
	return lines
}

// scaleString prints a scale as a quotient when it is one over a whole
// number: "1/64", "1", "0.3".
func scaleString(s float64) string {
	if s <= 0 {
		return "-"
	}
	if inv := 1 / s; inv == math.Trunc(inv) && inv < 1e6 {
		if inv == 1 {
			return "1"
		}
		return fmt.Sprintf("1/%d", int(inv))
	}
	return strconv.FormatFloat(s, 'g', 4, 64)
}
