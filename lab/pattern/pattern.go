// Package pattern is the loss-pattern analysis of a run
// (docs/loss-patterns.md): every forgiven range of the workload's result,
// its uniform control (as many bytes forgiven at random over the same
// receives), their burstiness, and the .npz file that holds them.
//
// It owns the analysis and the file's layout. It never runs anything,
// reads a fabric or writes a file: the lab attaches its figures to a run
// and its bytes to the run's results, and package report writes them.
package pattern

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"

	"github.com/forgive-emu/forgive/internal/npy"
	"github.com/forgive-emu/forgive/lab/results"
	"github.com/forgive-emu/forgive/workload"
)

// File is the name of the loss-pattern file of a run.
func File(policy string, seed uint64) string {
	return fmt.Sprintf("loss-pattern-%s-seed%d.npz", policy, seed)
}

// controlStream separates the control's random stream from every other
// use of a run's seed.
const controlStream = 0x10557a77e2

// prange is one range of a pattern or its control.
type prange struct {
	step, recv, send int
	flow             uint32
	gather           bool
	round            int
	off, n           int64
	t                float64 // seconds; NaN in the control
}

// Meta is what the pattern's meta string says besides the layout.
type Meta struct {
	Policy, Profile, Topology, Placement, Entropy string
	Seed                                          uint64
	// Job names the job whose pattern it is in a run of two jobs (the
	// first running one); empty for one job.
	Job string
}

// Build builds a run's pattern file and its figures.
func Build(m Meta, res *workload.Result) (*results.LossPattern, []byte, error) {
	pat := res.Pattern
	steps := len(res.Steps)
	n, chunk := pat.Ranks, int64(pat.ChunkBytes)
	got := make([]prange, len(pat.Ranges))
	for i, r := range pat.Ranges {
		got[i] = prange{step: r.Step, recv: r.Receiver, send: r.Sender, flow: uint32(r.Flow), gather: r.Gather,
			round: r.Round, off: r.Offset, n: r.Length, t: r.Time.Seconds()}
	}
	unit := controlUnit(got)
	control, err := uniformControl(got, n, steps, chunk, unit, m.Seed)
	if err != nil {
		return nil, nil, err
	}
	lp := &results.LossPattern{File: File(m.Policy, m.Seed), ControlUnitBytes: unit,
		Pattern: burstiness(got, n, steps, chunk), Control: burstiness(control, n, steps, chunk)}

	meta := map[string]any{
		"format": "forgive loss pattern, version 1", "doc": "docs/loss-patterns.md",
		"policy": m.Policy, "seed": m.Seed, "profile": m.Profile, "topology": m.Topology, "placement": m.Placement,
		"entropy": m.Entropy, "ranks": n, "steps": steps, "chunk_bytes": chunk, "tensor_bytes": int64(n) * chunk,
		"received_bytes_per_rank_step": 2 * int64(n-1) * chunk, "control_unit_bytes": unit,
		"control":        "the same forgiven bytes per (step, receiver), in ranges of control_unit_bytes placed uniformly at random over the receiver's ring receives of the step (deterministic from the seed)",
		"phase":          map[string]string{"0": "reduce-scatter (a partial sum)", "1": "all-gather (a finished value)"},
		"time_s":         "when the receive completed, seconds on the run's clock (virtual in the simulator); NaN in the control",
		"forgiven_bytes": res.ForgivenBytes,
	}
	if m.Job != "" {
		meta["job"] = m.Job
	}
	mj, err := json.Marshal(meta)
	if err != nil {
		return nil, nil, err
	}
	var st npy.Record
	stepN := make([]int64, steps)
	crit := make([]int64, steps)
	forg := make([]int64, steps)
	start := make([]float64, steps)
	end := make([]float64, steps)
	for i, s := range res.Steps {
		stepN[i], forg[i] = int64(s.Step), s.Forgiven
		if s.Critical {
			crit[i] = 1
		}
		start[i], end[i] = s.Start.Seconds(), s.End.Seconds()
	}
	st = npy.Record{{Name: "step", Type: npy.Int32, Ints: stepN}, {Name: "critical", Type: npy.Uint8, Ints: crit},
		{Name: "forgiven", Type: npy.Int64, Ints: forg}, {Name: "start_s", Type: npy.Float64, Floats: start},
		{Name: "end_s", Type: npy.Float64, Floats: end}}
	var b bytes.Buffer
	err = npy.WriteNPZ(&b, []npy.Array{{Name: "ranges", Records: rangeRecords(got)}, {Name: "control", Records: rangeRecords(control)},
		{Name: "steps", Records: st}, {Name: "meta", String: string(mj)}})
	if err != nil {
		return nil, nil, err
	}
	return lp, b.Bytes(), nil
}

func rangeRecords(rs []prange) npy.Record {
	cols := make([][]int64, 8)
	for i := range cols {
		cols[i] = make([]int64, len(rs))
	}
	t := make([]float64, len(rs))
	for i, r := range rs {
		g := int64(0)
		if r.gather {
			g = 1
		}
		for c, v := range []int64{int64(r.step), int64(r.recv), int64(r.send), int64(r.flow), g, int64(r.round), r.off, r.n} {
			cols[c][i] = v
		}
		t[i] = r.t
	}
	return npy.Record{
		{Name: "step", Type: npy.Int32, Ints: cols[0]}, {Name: "receiver", Type: npy.Int32, Ints: cols[1]},
		{Name: "sender", Type: npy.Int32, Ints: cols[2]}, {Name: "flow", Type: npy.Uint32, Ints: cols[3]},
		{Name: "phase", Type: npy.Uint8, Ints: cols[4]}, {Name: "round", Type: npy.Int32, Ints: cols[5]},
		{Name: "offset", Type: npy.Int64, Ints: cols[6]}, {Name: "length", Type: npy.Int64, Ints: cols[7]},
		{Name: "time_s", Type: npy.Float64, Floats: t},
	}
}

// controlUnit is the control's range length: the pattern's most common
// range length (the shortest of equals), 4096 when there is none.
func controlUnit(rs []prange) int64 {
	count := map[int64]int{}
	for _, r := range rs {
		count[r.n]++
	}
	best, bestN := int64(4096), 0
	for l, k := range count {
		if k > bestN || (k == bestN && l < best) {
			best, bestN = l, k
		}
	}
	return best
}

// ringChunk is the chunk rank i receives in a round: chunk i-r-1 in the
// reduce-scatter, i-r in the all-gather.
func ringChunk(n, i int, gather bool, round int) int {
	c := i - round - 1
	if gather {
		c = i - round
	}
	return ((c % n) + n) % n
}

// uniformControl draws the pattern's control: at every (step, rank) the
// pattern's forgiven bytes, in ranges of unit bytes (the last one
// shorter to match) at slots drawn uniformly at random without
// replacement from the rank's 2(n-1) ring receives, each cut into slots
// of unit bytes.
func uniformControl(got []prange, n, steps int, chunk, unit int64, seed uint64) ([]prange, error) {
	if unit <= 0 || chunk <= 0 || n < 2 {
		return nil, nil
	}
	type key struct{ step, rank int }
	want := map[key]int64{}
	flows := map[key]uint32{} // the receiver's ring flow, as the pattern names it
	for _, r := range got {
		want[key{r.step, r.recv}] += r.n
		flows[key{r.step, r.recv}] = r.flow
	}
	perMsg := (chunk + unit - 1) / unit
	msgs := int64(2 * (n - 1))
	slots := make([]int64, msgs*perMsg)
	rng := rand.New(rand.NewPCG(seed, controlStream))
	var out []prange
	for s := 1; s <= steps; s++ {
		for i := range n {
			left := want[key{s, i}]
			if left == 0 {
				continue
			}
			for j := range slots {
				slots[j] = int64(j)
			}
			var picked []prange
			for k := 0; left > 0; k++ {
				if k == len(slots) {
					return nil, fmt.Errorf("lab: loss pattern: step %d rank %d forgave %d bytes more than it receives", s, i, left)
				}
				j := k + rng.IntN(len(slots)-k)
				slots[k], slots[j] = slots[j], slots[k]
				m, part := slots[k]/perMsg, slots[k]%perMsg
				gather, round := m >= int64(n-1), int(m%int64(n-1))
				l := min(unit, chunk-part*unit, left)
				c := ringChunk(n, i, gather, round)
				sender := (i + n - 1) % n
				picked = append(picked, prange{step: s, recv: i, send: sender, flow: flows[key{s, i}], gather: gather,
					round: round, off: int64(c)*chunk + part*unit, n: l, t: math.NaN()})
				left -= l
			}
			slices.SortFunc(picked, func(a, b prange) int {
				return cmp.Or(cmp.Compare(b2i(a.gather), b2i(b.gather)), cmp.Compare(a.round, b.round), cmp.Compare(a.off, b.off))
			})
			out = append(out, picked...)
		}
	}
	return out, nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

type interval struct{ a, b int64 }

// burstiness computes a set of ranges' figures (results.Burstiness).
func burstiness(rs []prange, n, steps int, chunk int64) results.Burstiness {
	out := results.Burstiness{Ranges: int64(len(rs))}
	type key struct{ step, rank int }
	byKey := map[key][]interval{}
	msgs := 2 * (n - 1)
	perMsg := map[key][]float64{}   // forgiven fraction of each ring message
	perStep := make([][]float64, n) // [rank][step-1] forgiven fraction of the step's receives
	for i := range perStep {
		perStep[i] = make([]float64, steps)
	}
	stepBytes := make([]int64, steps)
	for _, r := range rs {
		k := key{r.step, r.recv}
		byKey[k] = append(byKey[k], interval{r.off, r.off + r.n})
		out.Bytes += r.n
		if r.step < 1 || r.step > steps || r.recv < 0 || r.recv >= n {
			continue
		}
		if perMsg[k] == nil {
			perMsg[k] = make([]float64, msgs)
		}
		m := r.round
		if r.gather {
			m += n - 1
		}
		if m >= 0 && m < msgs {
			perMsg[k][m] += float64(r.n) / float64(chunk)
		}
		perStep[r.recv][r.step-1] += float64(r.n) / float64(int64(msgs)*chunk)
		stepBytes[r.step-1] += r.n
	}
	// Runs, per (step, rank): the union of its ranges.
	var runs []int64
	unions := map[int][][]interval{} // by step: each rank's union
	keys := make([]key, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int { return cmp.Or(cmp.Compare(a.step, b.step), cmp.Compare(a.rank, b.rank)) })
	for _, k := range keys {
		iv := byKey[k]
		slices.SortFunc(iv, func(x, y interval) int { return cmp.Compare(x.a, y.a) })
		var u []interval
		for _, x := range iv {
			if len(u) > 0 && x.a <= u[len(u)-1].b {
				u[len(u)-1].b = max(u[len(u)-1].b, x.b)
				continue
			}
			u = append(u, x)
		}
		for _, x := range u {
			runs = append(runs, x.b-x.a)
		}
		unions[k.step] = append(unions[k.step], u)
	}
	out.Runs = int64(len(runs))
	if len(runs) > 0 {
		slices.Sort(runs)
		var total int64
		for _, l := range runs {
			total += l
			b := bits.Len64(uint64(l)) - 1
			for len(out.RunHistogram) <= b {
				out.RunHistogram = append(out.RunHistogram, 0)
			}
			out.RunHistogram[b]++
		}
		out.RunMeanBytes = float64(total) / float64(len(runs))
		out.RunMedianBytes = runs[(len(runs)-1)/2]
		out.RunMaxBytes = runs[len(runs)-1]
		var acc int64
		for i := len(runs) - 1; i >= 0; i-- {
			acc += runs[i]
			if 2*acc >= total {
				out.RunByteMedianBytes = runs[i]
				break
			}
		}
	}
	// Shared: bytes of a step forgiven at two ranks or more.
	var covered, shared int64
	for _, us := range unions {
		type ev struct {
			at int64
			d  int
		}
		var evs []ev
		for _, u := range us {
			for _, x := range u {
				evs = append(evs, ev{x.a, 1}, ev{x.b, -1})
			}
		}
		slices.SortFunc(evs, func(a, b ev) int { return cmp.Or(cmp.Compare(a.at, b.at), cmp.Compare(a.d, b.d)) })
		depth := 0
		for i, e := range evs {
			if i > 0 && depth > 0 {
				w := e.at - evs[i-1].at
				covered += w
				if depth > 1 {
					shared += w
				}
			}
			depth += e.d
		}
	}
	if covered > 0 {
		out.SharedFrac = float64(shared) / float64(covered)
	}
	// Correlations across ranks.
	var msgCorr []float64
	for s := 1; s <= steps; s++ {
		rows := make([][]float64, n)
		for i := range n {
			rows[i] = perMsg[key{s, i}]
			if rows[i] == nil {
				rows[i] = make([]float64, msgs)
			}
		}
		if c, ok := meanPairCorrelation(rows); ok {
			msgCorr = append(msgCorr, c)
		}
	}
	if len(msgCorr) > 0 {
		out.MessageCorrelation = mean(msgCorr)
	}
	if c, ok := meanPairCorrelation(perStep); ok {
		out.StepCorrelation = c
	}
	// Concentration on the steps that forgave most.
	if steps > 0 {
		out.TopSteps = max(1, int(math.Round(float64(steps)/10)))
		sorted := slices.Clone(stepBytes)
		slices.SortFunc(sorted, func(a, b int64) int { return cmp.Compare(b, a) })
		var top, all int64
		for i, b := range sorted {
			all += b
			if i < out.TopSteps {
				top += b
			}
		}
		if all > 0 {
			out.TopStepsFrac = float64(top) / float64(all)
		}
	}
	return out
}

// meanPairCorrelation is the mean Pearson correlation over the pairs of
// rows that both vary; ok is false when no pair does.
func meanPairCorrelation(rows [][]float64) (float64, bool) {
	type moments struct {
		mean, sd float64
		ok       bool
	}
	ms := make([]moments, len(rows))
	for i, r := range rows {
		if len(r) < 2 {
			continue
		}
		m := mean(r)
		var v float64
		for _, x := range r {
			v += (x - m) * (x - m)
		}
		ms[i] = moments{m, math.Sqrt(v), v > 0}
	}
	var sum float64
	var k int
	for i := range rows {
		if !ms[i].ok {
			continue
		}
		for j := i + 1; j < len(rows); j++ {
			if !ms[j].ok {
				continue
			}
			var c float64
			for t := range rows[i] {
				c += (rows[i][t] - ms[i].mean) * (rows[j][t] - ms[j].mean)
			}
			sum += c / (ms[i].sd * ms[j].sd)
			k++
		}
	}
	if k == 0 {
		return 0, false
	}
	return sum / float64(k), true
}

func mean(xs []float64) float64 {
	var s float64
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}
