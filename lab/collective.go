package lab

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/forgive-emu/forgive/collective"
	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/lab/results"
	"github.com/forgive-emu/forgive/lab/topo"
	"github.com/forgive-emu/forgive/workload"
)

// parseCollective reads the workload's collective options into the
// schedule the workload runs; each error names its flag.
func parseCollective(w WorkloadOptions) (workload.Collective, error) {
	c := workload.Collective{Dims: w.Dims, TP: w.TP, TPCollective: w.TPCollective, Splits: w.Splits, Window: w.Window, FlowPerMessage: w.Flows == FlowsMessage}
	if w.TPCollective != "" && w.TPCollective != workload.AllToAll {
		if _, err := collective.ParseAlgorithm(w.TPCollective); err != nil {
			return c, fmt.Errorf("%w: --tp-collective %q: %w (or %s)", ErrInput, w.TPCollective, err, workload.AllToAll)
		}
	}
	if w.Collective != "" {
		for _, name := range strings.Split(w.Collective, ",") {
			a, err := collective.ParseAlgorithm(strings.TrimSpace(name))
			if err != nil {
				return c, fmt.Errorf("%w: --collective %q: %w", ErrInput, w.Collective, err)
			}
			c.Algorithms = append(c.Algorithms, a)
		}
	}
	if w.Flows != FlowsPersistent && w.Flows != FlowsMessage {
		return c, fmt.Errorf("%w: --flows %q: want %s or %s", ErrInput, w.Flows, FlowsPersistent, FlowsMessage)
	}
	for _, d := range w.Dims {
		if d < 1 {
			return c, fmt.Errorf("%w: --dims %v: every dimension needs at least one rank", ErrInput, w.Dims)
		}
	}
	switch {
	case w.TP < 0:
		return c, fmt.Errorf("%w: --tp %d: want a degree >= 1 (0: none)", ErrInput, w.TP)
	case w.Splits < 0:
		return c, fmt.Errorf("%w: --splits %d: want >= 1 (0: none)", ErrInput, w.Splits)
	case w.Window < 0:
		return c, fmt.Errorf("%w: --window %d: want >= 1 (0: every peer at once)", ErrInput, w.Window)
	}
	return c, nil
}

// placeRanks applies --rank-placement to the topology: which leaf each
// rank's host sits on.
func (p *prepared) placeRanks(name string) error {
	if name == "" {
		return nil
	}
	pl := topo.Placement(name)
	if pl != topo.Interleaved && pl != topo.Packed {
		return fmt.Errorf("%w: --rank-placement %q: want %s or %s", ErrInput, name, topo.Interleaved, topo.Packed)
	}
	if k := p.topology.Kind; k != topo.KindLeafSpine && k != topo.KindFatTree {
		return fmt.Errorf("%w: --rank-placement %s: a %s topology has no leaves to place ranks on", ErrInput, name, p.topology.Kind)
	}
	t := *p.topology
	t.Placement = pl
	p.topology = &t
	return nil
}

// collectiveShape describes the schedule the runs will use, placed as the
// dry placement places the ranks.
func (p *prepared) collectiveShape() (*results.CollectiveShape, error) {
	hosts := p.dry.Hosts
	cfg := p.workloadConfig(p.policies[0], 1)
	ids := make([]hostapi.HostID, len(hosts))
	for i := range hosts {
		ids[i] = hostapi.HostID(i + 1)
	}
	sched, tp, err := cfg.Schedule(ids)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInput, err)
	}
	leaf := make([]string, len(hosts))
	for _, h := range hosts {
		leaf[h.Rank] = h.Switch
	}
	// The schedule's own shape (per phase: fan-in and bytes), and what
	// the placement adds to it: which bytes cross a leaf's uplinks.
	cs := sched.Shape()
	sh := &results.CollectiveShape{Schedule: cfg.Collective.String(), Groups: tp, GroupSize: cs.Ranks,
		MaxFanIn: cs.MaxFanIn, SentBytes: cs.MaxSentBytes, ReceivedBytes: cs.MaxReceivedBytes}
	for i, ph := range cs.Phases {
		sh.Phases = append(sh.Phases, results.PhaseShape{Phase: i, Name: ph.Name, FanIn: ph.MaxFanIn, ReceivedBytes: slices.Max(ph.ReceivedBytes)})
	}
	leafIn, leafOut := map[string]int{}, map[string]int{}
	for i := range hosts {
		pl := sched.Plans[i/tp]
		sh.Messages = max(sh.Messages, len(pl.Sends))
		for _, sd := range pl.Sends {
			if to := i%tp + sd.Peer*tp; leaf[to] != leaf[i] {
				leafOut[leaf[i]] += sd.Len
				leafIn[leaf[to]] += sd.Len
			}
		}
	}
	busiest := func(bytes int, rate float64, name string) {
		if rate <= 0 {
			return
		}
		if ns := int64(math.Ceil(float64(bytes) * 8 / rate * 1e9)); ns > sh.IdealNS {
			sh.IdealNS, sh.Bottleneck = ns, name
		}
	}
	hostRate := float64(p.dry.HostRate)
	for i := range hosts {
		busiest(cs.ReceivedBytes[i/tp], hostRate, fmt.Sprintf("rank %d's link in", i))
		busiest(cs.SentBytes[i/tp], hostRate, fmt.Sprintf("rank %d's link out", i))
	}
	if n := p.topology.Uplinks(); n > 0 {
		up := float64(p.dry.UplinkRate) * float64(n)
		for _, l := range slices.Sorted(maps.Keys(leafOut)) {
			busiest(leafOut[l], up, fmt.Sprintf("%s's uplinks", l))
		}
		for _, l := range slices.Sorted(maps.Keys(leafIn)) {
			busiest(leafIn[l], up, fmt.Sprintf("%s's downlinks from the spines", l))
		}
	}
	return sh, nil
}

// profileDefaults fills the collective and the flows the user left empty
// with the profile's (topo.ProfileWorkload), and persistent flows where
// neither names them. The collective is the profile's only when the user
// named neither an algorithm nor dimensions: --dims alone runs the ring
// on them, as on any profile. It reports whether the collective came
// from the profile.
func (w *WorkloadOptions) profileDefaults(d topo.ProfileWorkload) (collective bool) {
	if w.Flows == "" {
		w.Flows = d.Flows
	}
	if w.Flows == "" {
		w.Flows = FlowsPersistent
	}
	if w.Collective != "" || len(w.Dims) > 0 || d.Collective == "" {
		return false
	}
	w.Collective, w.Dims = d.Collective, slices.Clone(d.Dims)
	return true
}

// fitProfileCollective fits a profile's default collective to the job.
// The profile's dimensions name the seed's job (64 ranks, dims 8 x 8); a
// job whose data-parallel groups are a whole multiple m > 1 of that runs
// them as one more dimension of m, as a hierarchical all-reduce composes
// the seed's groups (docs/profiles.md, "The seed profiles' reading", "At
// other sizes"): 1,024 ranks run 8 x 8 x 16. Any other group size is
// refused, naming the flags that choose another collective, before the
// workload's own check would refuse the dimensions the user never gave.
func (p *prepared) fitProfileCollective() error {
	need := p.profile.Workload.Ranks()
	if need == 0 {
		return nil
	}
	tp := max(p.opts.Workload.TP, 1)
	group := 0
	for j, ranks := range p.jobRankCounts() {
		if ranks%tp == 0 && ranks/tp%need == 0 && (group == 0 || group == ranks/tp) {
			group = ranks / tp
			continue
		}
		job := ""
		if len(p.topology.Jobs) > 1 {
			job = fmt.Sprintf(" (job %s)", p.topology.Jobs[j])
		}
		return fmt.Errorf("%w: profile %s runs the gradient all-reduce %s on dims %v, %d ranks a group or a whole multiple of them (docs/profiles.md, \"The seed profiles' reading\"), but this job's%s groups have %d: name the collective (--collective ring for the flat ring) or --dims",
			ErrInput, p.profile.Name, p.profile.Workload.Collective, p.profile.Workload.Dims, need, job, ranks/tp)
	}
	if group > need {
		p.opts.Workload.Dims = append(p.opts.Workload.Dims, group/need)
	}
	return nil
}

// jobRankCounts is the ranks of each job: one job of every rank, or the
// topology's jobs.
func (p *prepared) jobRankCounts() []int {
	jobs := p.topology.JobRanks()
	if len(jobs) == 0 {
		return []int{p.topology.Ranks()}
	}
	n := make([]int, len(jobs))
	for i, r := range jobs {
		n[i] = len(r)
	}
	return n
}
