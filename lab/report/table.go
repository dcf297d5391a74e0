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

// TableOptions choose how much Table prints around the figures.
type TableOptions struct {
	// Verbose prints the profile's derived parameters, the placement and
	// scale, and the baseline's definition above the tables. Without it the
	// header is one line naming the profile, topology, ranks, steps and
	// seeds (and the placement and scale).
	Verbose bool
}

// Table writes the lab's report with the default options; see WriteTable.
func Table(w io.Writer, f *results.File) error {
	return WriteTable(w, f, TableOptions{})
}

// WriteTable writes the lab's report in the seed's terms: a header naming
// the profile, topology, ranks, steps and seeds (with the profile's derived
// values under o.Verbose), the main table (training time, its change
// against the baseline, gradient bytes given up, all-reduce medians,
// retransmitted and trimmed bytes, the two exactness checks), a second
// table of congestion and exemption figures, a legend of every column, and
// notes on anything that failed or could not be compared.
//
// Every change carries its range over seeds, and the baseline's row shows
// the baseline's own run-to-run spread (its noise band); a change whose
// range reaches into that band is marked "~", and with one seed every
// change is marked "?": its noise is unknown. A figure nothing was
// measured for (no non-critical step, no exempt flow) prints n/a.
//
// WriteTable summarizes f.Runs itself, exactly as Summarize does, so a
// file written before a summary field existed prints in full; a file with
// a summary and no runs prints its summary. f is never modified.
func WriteTable(w io.Writer, f *results.File, o TableOptions) error {
	sums := f.Summary
	if len(f.Runs) > 0 || len(sums) == 0 {
		sums = summaries(f)
	}
	baseline := "baseline"
	if len(sums) > 0 {
		baseline = sums[0].Policy
	}
	var base results.Summary
	if len(sums) > 0 {
		base = sums[0]
	}
	b := &strings.Builder{}
	if o.Verbose {
		writeHeader(b, f, baseline)
	} else {
		writeShortHeader(b, f)
	}
	b.WriteString("\n")
	var u legendUse
	writeMainTable(b, sums, baseline, &u)
	writeTPLine(b, sums, &u)
	b.WriteString("\ncongestion and exemption (means over seeds)\n")
	writeExemptionTable(b, sums, &u)
	writePatternTable(b, f.Runs)
	writeTwoJobsTable(b, f)
	writeLegend(b, baseline, base, &u)
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

// writeShortHeader names what ran in one line; the placement and scale
// only where they are not the lab's defaults.
func writeShortHeader(b *strings.Builder, f *results.File) {
	fmt.Fprintf(b, "profile %s   topology %s   ranks %d   steps %d   seeds %s",
		orDash(f.Profile.Name), orDash(f.Topology), f.Ranks, f.Steps, joinSeeds(f.Seeds))
	if f.Placement != "" && f.Placement != "loopback" {
		fmt.Fprintf(b, "   placement %s", f.Placement)
	}
	if f.Scale > 0 && f.Scale != 1 {
		fmt.Fprintf(b, "   scale %s", scaleString(f.Scale))
	}
	b.WriteString("\n")
}

// legendUse records which marks and which kinds of n/a the tables
// printed, so the legend explains those and no others.
type legendUse struct {
	marked       bool // some change is within the noise: "~"
	unknown      bool // some change has no known margin: "±?"
	changeNA     bool // some change could not be computed
	nonCritNA    bool
	critNA       bool
	tpNA         bool
	exemptNA     bool
	reobeyNA     bool
	noRunsListed bool
	payloadFree  bool // some run made only the checks that need no bytes: "yes*"
}

func writeMainTable(b *strings.Builder, sums []results.Summary, baseline string, u *legendUse) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	row(tw, "policy", "time s", "change vs "+baseline, "given up", "all-reduce ms", "retx", "trimmed", "checks")
	row(tw, "", "mean", "mean ±margin (min..max) %", "min..max %", "non-crit/crit", "min..max %", "min..max %", "held")
	for i, s := range sums {
		if s.Seeds == 0 {
			row(tw, s.Policy, "no runs")
			u.noRunsListed = true
			continue
		}
		change := noiseCell(s.TrainingTimeNoise, s.TrainingTimeNoiseRuns)
		if i > 0 {
			change = changeCell(s.TrainingTimeChange, s.TrainingTimeChangeMean, s.TrainingTimeChangeMin, s.TrainingTimeChangeMax,
				s.TrainingTimeChangeMargin, s.TrainingTimeWithinNoise, sums[0].TrainingTimeNoiseRuns >= 2, u)
		}
		u.nonCritNA = u.nonCritNA || !(s.AllReduceNonCritical > 0)
		u.critNA = u.critNA || !(s.AllReduceCritical > 0)
		row(tw, s.Policy,
			sig3(s.TrainingTimeMeanS),
			change,
			pctRange(s.GivenUpMin, s.GivenUpMax, 2),
			msOrNA(s.AllReduceNonCritical)+" / "+msOrNA(s.AllReduceCritical),
			pctRange(s.RetransmittedFracMin, s.RetransmittedFracMax, 1),
			pctRange(s.TrimmedFracMin, s.TrimmedFracMax, 2),
			checksCell(s, u))
	}
	tw.Flush()
}

// writeTPLine puts the tensor-parallel exchanges' cost under the main
// table: each policy's median exchange and its change against the
// baseline's, as the exemption table's TP columns give them. Exempt
// gradient senders ignore the congestion signals the tensor pair's flows
// obey, so a faster training time can come with slower exchanges beside
// it (docs/lab.md, "The tensor-parallel cost").
func writeTPLine(b *strings.Builder, sums []results.Summary, u *legendUse) {
	if len(sums) < 2 || sums[0].Seeds == 0 || !(sums[0].TPCompletionMedianS > 0) {
		return
	}
	words := []string{fmt.Sprintf("tensor-parallel exchange median: %s %s ms", sums[0].Policy, msOrNA(sums[0].TPCompletionMedianS))}
	for _, s := range sums[1:] {
		if s.Seeds == 0 {
			continue
		}
		c := changeCell(s.TPCompletionChange, s.TPCompletionChangeMean, s.TPCompletionChangeMin, s.TPCompletionChangeMax,
			s.TPCompletionChangeMargin, s.TPCompletionWithinNoise, sums[0].TPCompletionNoiseRuns >= 2, u)
		if i := strings.Index(c, " ("); i >= 0 { // the per-seed range: in the exemption table
			if j := strings.Index(c[i:], ")"); j >= 0 {
				c = c[:i] + c[i+j+1:]
			}
		}
		c = strings.Replace(c, " ~", " % ~", 1)
		if !strings.Contains(c, "%") && c != "n/a" {
			c += " %"
		}
		words = append(words, fmt.Sprintf("%s %s ms %s", s.Policy, msOrNA(s.TPCompletionMedianS), c))
	}
	for _, l := range wrap(words, headerWidth) {
		b.WriteString(l + "\n")
	}
}

func writeExemptionTable(b *strings.Builder, sums []results.Summary, u *legendUse) {
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	row(tw, "policy", "CNPs", "rate", "RTOs", "TP median", "TP change", "exempt", "flag changes", "re-obeyed", "re-obey")
	row(tw, "", "", "cuts", "", "ms", "mean ±margin (min..max) %", "flows", "per flow", "%", "mean ms")
	for i, s := range sums {
		if s.Seeds == 0 {
			row(tw, s.Policy, "no runs")
			continue
		}
		tpChange := noiseCell(s.TPCompletionNoise, s.TPCompletionNoiseRuns)
		if i > 0 {
			tpChange = changeCell(s.TPCompletionChange, s.TPCompletionChangeMean, s.TPCompletionChangeMin, s.TPCompletionChangeMax,
				s.TPCompletionChangeMargin, s.TPCompletionWithinNoise, sums[0].TPCompletionNoiseRuns >= 2, u)
		}
		flags, reobeyed, reobeyMS := "n/a", "n/a", "n/a"
		if s.ExemptFlows > 0 {
			flags, reobeyed = fmt.Sprintf("%.2f", s.FlagChangesPerExemptFlow), pct(s.ReObeyedFrac, 1)
		} else {
			u.exemptNA = true
		}
		if s.ReObeyedFrac > 0 {
			reobeyMS = sig3(s.ReObeyMeanS * 1e3)
		} else if s.ExemptFlows > 0 {
			u.reobeyNA = true
		}
		u.tpNA = u.tpNA || !(s.TPCompletionMedianS > 0)
		row(tw, s.Policy,
			count(s.CNPs), count(s.RateCuts), count(s.RTOs),
			msOrNA(s.TPCompletionMedianS), tpChange,
			count(s.ExemptFlows),
			flags, reobeyed, reobeyMS)
	}
	tw.Flush()
}

// noiseCell is the baseline's cell in a change column: its own
// run-to-run noise, the standard deviation of its seeds as a percentage
// of their mean; ? when one seed measured it, n/a when none did.
func noiseCell(noise float64, runs int) string {
	if runs == 0 {
		return "n/a"
	}
	if runs < 2 {
		return "noise ±?"
	}
	return "noise ±" + pct(noise, 1)
}

// changeCell is a policy's change: the mean of its per-seed changes, its
// margin (±? when the baseline's noise is unknown), the per-seed range
// when there are two or more, and "~" when the mean is within the margin;
// n/a when no seed could be compared.
func changeCell(changes []float64, mean, lo, hi, margin float64, within, noiseKnown bool, u *legendUse) string {
	if len(changes) == 0 {
		u.changeNA = true
		return "n/a"
	}
	c := signedPct(mean)
	if noiseKnown {
		c += " ±" + strings.TrimPrefix(signedPct(margin), "+")
	} else {
		u.unknown = true
		c += " ±?"
	}
	if r := signedPctRange(lo, hi); len(changes) > 1 && strings.Contains(r, "..") {
		c += " (" + r + ")"
	}
	if within {
		u.marked = true
		c += " ~"
	}
	return c
}

// msOrNA prints a median time in seconds as milliseconds, or n/a for the
// 0 of a median nothing was measured for.
func msOrNA(s float64) string {
	if !(s > 0) {
		return "n/a"
	}
	return sig3(s * 1e3)
}

// writeLegend explains every column in a line, then the marks and the
// kinds of n/a the tables printed.
func writeLegend(b *strings.Builder, baseline string, base results.Summary, u *legendUse) {
	b.WriteString("\nlegend\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	line := func(term, text string) { row(tw, "  "+term, text) }
	line("time s", "training time of the whole run (every step's compute and communication), mean over seeds")
	line("change vs", "(policy - baseline) / baseline of the training time, seed by seed; negative is faster")
	line("noise ±", fmt.Sprintf("on the baseline's row (%s): how much its seeds differ, standard deviation / mean", baseline))
	line("±margin", "two standard errors of the mean change, from the noise of both policies' seeds")
	if base.TrainingTimeNoiseRuns >= 2 || base.TPCompletionNoiseRuns >= 2 {
		line("~", "the mean change is within its margin: it cannot be told from run-to-run noise")
	}
	if u.unknown {
		line("±?", "one seed of the baseline: its noise is unknown, and so is every margin (run --seeds 3)")
	}
	line("given up", "gradient bytes forgiven by receivers or shed by senders, % of the gradient bytes due")
	line("all-reduce ms", "median time a rank takes for its gradient all-reduce, on non-critical / critical steps")
	line("retx", "bytes sent again (retransmitted), % of all payload bytes sent")
	line("trimmed", "payload bytes a congested switch cut off, forwarding the header only, % of the bytes sent")
	line("checks held", "forgiven <= budget and <= p/(1-p) x received at every rank and step, tensor, pipeline")
	line("", "and burst bytes exact, every gradient sum no loss touched exact, every message whole; NO: see notes")
	if u.payloadFree {
		line("yes*", "payload-free (--payload-free): no bytes to check; the invariants and every message's accounting held")
	}
	line("CNPs, rate cuts", "congestion notifications senders received, and the rate (NSCC: window) cuts applied")
	line("RTOs", "retransmission timeouts: a sender heard nothing back and resent")
	line("TP median, change", "median time of a tensor-parallel exchange between two ranks, and its change as above")
	line("exempt flows", "flows that ignored congestion signals at some time, under FORGIVE's exemption")
	line("flag changes", "how often per exempt flow the budget-exhausted flag in the receiver's reports flipped")
	line("re-obeyed %", "exempt flows that ran out of budget and obeyed congestion control again")
	line("re-obey mean ms", "how long those flows obeyed, on average, before the exemption resumed or the flow ended")
	if u.changeNA {
		line("n/a change", "no seed could be compared with the baseline (see the notes, or the baseline measured 0)")
	}
	if u.nonCritNA {
		line("n/a non-crit", "every step was critical (steps 1, 2, 3 and the last are; at --steps 4 or fewer, all)")
	}
	if u.critNA {
		line("n/a crit", "no step was critical, so no critical all-reduce was measured")
	}
	if u.tpNA {
		line("n/a TP", "no tensor-parallel exchange completed, so there is no time to show")
	}
	if u.exemptNA {
		line("n/a exempt", "no flow was ever exempt (only FORGIVE's policies exempt), so nothing per exempt flow")
	}
	if u.reobeyNA {
		line("n/a re-obey", "no exempt flow obeyed again, so there is no period to average")
	}
	if u.noRunsListed {
		line("no runs", "the policy was listed but has no run in the results")
	}
	tw.Flush()
}

// writeNotes lists what a reader must not miss: a failed check, named by
// run and (where the steps say) by step, and runs that had no baseline run
// with their seed and so are missing from the changes.
// writePatternTable prints the burstiness of every run that forgave,
// each figure beside its uniform control's (docs/loss-patterns.md).
func writePatternTable(b *strings.Builder, runs []results.Run) {
	var rows [][]string
	for _, r := range runs {
		lp := r.LossPattern
		if lp == nil || lp.Pattern.Bytes == 0 {
			continue
		}
		p, c := lp.Pattern, lp.Control
		pair := func(a, b string) string { return a + " / " + b }
		rows = append(rows, []string{fmt.Sprintf("%s seed %d", r.Policy, r.Seed),
			pair(count(float64(p.Runs)), count(float64(c.Runs))),
			pair(count(p.RunMeanBytes), count(c.RunMeanBytes)),
			pair(count(float64(p.RunByteMedianBytes)), count(float64(c.RunByteMedianBytes))),
			pair(fmt.Sprintf("%.2f", p.MessageCorrelation), fmt.Sprintf("%.2f", c.MessageCorrelation)),
			pair(pct(p.SharedFrac, 1), pct(c.SharedFrac, 1)),
			pair(pct(p.TopStepsFrac, 1), pct(c.TopStepsFrac, 1))})
	}
	if len(rows) == 0 {
		return
	}
	b.WriteString("\nloss pattern: each figure for the forgiven ranges / their uniform control (docs/loss-patterns.md)\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	row(tw, "run", "runs", "mean run B", "byte-median run B", "rank corr by round", "bytes shared by ranks %", "on top tenth of steps %")
	for _, r := range rows {
		row(tw, r...)
	}
	_ = tw.Flush()
}

func writeNotes(b *strings.Builder, f *results.File, baseline string) {
	var notes []string
	for _, r := range f.Runs {
		id := fmt.Sprintf("%s seed %d", r.Policy, r.Seed)
		if !r.BudgetInvariantHeld {
			notes = append(notes, "FAILED budget invariant: "+id+failedSteps(r.Steps))
		}
		if !r.AccountingHeld() {
			notes = append(notes, "FAILED message accounting: "+id)
		}
		if !r.PayloadFree && !r.NonGradientBytesExact {
			notes = append(notes, "FAILED non-gradient bytes exact: "+id)
		}
		if !r.PayloadFree && !r.GradientSumsExact {
			notes = append(notes, "FAILED gradient sums exact: "+id)
		}
		if r.UnbudgetedBytes != 0 {
			notes = append(notes, fmt.Sprintf("FAILED budget opened in time: %s: %d gradient bytes arrived before their step was opened", id, r.UnbudgetedBytes))
		}
		if !r.PayloadFree && !r.ReplicasIdentical && slices.Contains(r.Checks, "replicas_identical") {
			notes = append(notes, fmt.Sprintf("FAILED replicas identical: %s: %d elements differ between ranks", id, r.ReplicaMismatches))
		}
		if !hasSeed(f.Runs, baseline, r.Seed) {
			notes = append(notes, fmt.Sprintf("no %s run with seed %d: %s left out of the changes", baseline, r.Seed, id))
		}
		if r.SocketDrops != nil && *r.SocketDrops > 0 {
			notes = append(notes, fmt.Sprintf("socket drops: %s: the kernel dropped %d datagrams at the fabric's full socket buffers, losses the emulated fabric does not model: the daemons could not keep up with it on this machine (docs/profiles.md, \"Why 100 Mb/s\")", id, *r.SocketDrops))
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

// signedPct prints a change in percent, signed, with one decimal below
// 100 % and none from there (+589, not +589.4).
func signedPct(frac float64) string {
	if math.Abs(frac) >= 0.9995 {
		return fmt.Sprintf("%+.0f", frac*100)
	}
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

// checksCell is a policy's "checks held": yes, NO, or yes* when a run
// was payload-free and so made only the checks that need no bytes.
func checksCell(s results.Summary, u *legendUse) string {
	held := s.InvariantHeld && s.MessageAccountingHeld && s.NonGradientExact && s.GradientSumsExact
	if held && s.PayloadFree {
		u.payloadFree = true
		return "yes*"
	}
	return yesNo(held)
}
