package budget

import "time"

// fifthBins is the resolution of a step's trim timeline: a step's span is
// split into at most fifthBins bins, so the first and the last fifth of a
// step are placed to within 2/fifthBins of its span.
const fifthBins = 1024

// fifths is one step's timeline of eligible gradient trims, the seed's
// trim-level accounting: how many trimmed bytes reached the receiver early
// and late in the step, and how many of them were forgiven. The step's span
// is only known when its all-reduce completes, so trims are kept in a
// histogram from the step's begin whose bin width doubles (merging pairs of
// bins) whenever a trim falls past its end; memory is fixed, 16 KiB for a
// step that saw a trim, allocated at its first trim and released when the
// step closes.
type fifths struct {
	begin time.Duration
	// first is when the step's first gradient byte or trimmed header
	// reached the receiver (seen: there was one): the start of the step's
	// gradient traffic.
	first time.Duration
	seen  bool
	width time.Duration // bin width, a power of two nanoseconds
	bins  *[fifthBins][2]int64
}

// traffic notes gradient traffic at now.
func (f *fifths) traffic(now time.Duration) {
	if !f.seen {
		f.first, f.seen = max(now, f.begin), true
	}
}

// add counts a trimmed header of n bytes at now, forgiven or not.
func (f *fifths) add(now time.Duration, n int64, forgiven bool) {
	f.traffic(now)
	d := now - f.begin
	if d < 0 {
		d = 0
	}
	if f.bins == nil {
		f.bins, f.width = new([fifthBins][2]int64), 1
	}
	for d/f.width >= fifthBins {
		for i := range fifthBins / 2 {
			f.bins[i] = [2]int64{f.bins[2*i][0] + f.bins[2*i+1][0], f.bins[2*i][1] + f.bins[2*i+1][1]}
		}
		clear(f.bins[fifthBins/2:])
		f.width *= 2
	}
	b := &f.bins[d/f.width]
	b[0] += n
	if forgiven {
		b[1] += n
	}
}

// close fills the record's spans and fifths for a step that completed at
// end, and releases the histogram. A bin belongs to the fifth its start
// lies in: over the step's span the first fifth is [begin, begin +
// span/5) and the last [end - span/5, end]; over its traffic span the same
// from the first gradient byte or trim instead of begin. A span of zero
// has no fifths.
func (f *fifths) close(end time.Duration, r *StepRecord) {
	bins, width := f.bins, f.width
	f.bins = nil
	r.Span = max(end-f.begin, 0)
	r.FirstFifthTrimmed, r.FirstFifthForgiven, r.LastFifthTrimmed, r.LastFifthForgiven = split(bins, width, 0, r.Span)
	if f.seen {
		off := f.first - f.begin
		r.TrafficSpan = max(r.Span-off, 0)
		r.TrafficFirstFifthTrimmed, r.TrafficFirstFifthForgiven, r.TrafficLastFifthTrimmed, r.TrafficLastFifthForgiven = split(bins, width, off, r.TrafficSpan)
	}
}

// split sums the bins in the first and in the last fifth of the span
// that starts off after begin, by each bin's start.
func split(bins *[fifthBins][2]int64, width, off, span time.Duration) (ft, ff, lt, lf int64) {
	if bins == nil || span <= 0 {
		return
	}
	// first: start*5 < span, i.e. start < ceil(span/5), without overflow.
	firstEnd := span / 5
	if span%5 != 0 {
		firstEnd++
	}
	// last: 5*(span - start) <= span, i.e. start >= span - floor(span/5).
	lastStart := span - span/5
	for i := range fifthBins {
		b := bins[i]
		if b[0] == 0 {
			continue
		}
		// A bin straddling the traffic's start counts from that start.
		start := max(time.Duration(i)*width-off, 0)
		if start < firstEnd {
			ft += b[0]
			ff += b[1]
		}
		if start >= lastStart {
			lt += b[0]
			lf += b[1]
		}
	}
	return
}
