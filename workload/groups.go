package workload

import (
	"fmt"
	"slices"

	"github.com/forgive-emu/forgive/collective"
	"github.com/forgive-emu/forgive/hostapi"
)

// Collective chooses the schedule of the gradient all-reduce and the
// groups it runs over. The zero value is the flat ring over every rank,
// run by the ring code of rank.go exactly as before any other schedule
// existed (so that results stay byte-identical); any other value compiles
// a schedule with package collective and runs it through schedRank.
type Collective struct {
	// Algorithms is one algorithm per logical dimension, or one for all
	// of them (collective.Spec); empty is the ring.
	Algorithms []collective.Algorithm
	// Dims are the logical dimensions of a data-parallel group, fastest
	// first (ASTRA-sim's logical-dims); empty is one dimension.
	Dims []int
	// Splits pipelines the vector through the dimensions in that many
	// pieces (ASTRA-sim's preferred-dataset-splits); 0 is 1.
	Splits int
	// Window is the direct algorithm's fan-in window: at most that many
	// of a rank's sends of one phase in flight; 0 is every peer at once.
	Window int
	// TP is the tensor-parallel degree: ranks kTP..kTP+TP-1 form a
	// tensor-parallel group (a node's GPUs, numbered consecutively as
	// Megatron-LM numbers them), and the gradient all-reduce runs over
	// the TP data-parallel groups {c, c+TP, c+2TP, ...}, each with its
	// own gradient. 0 or 1: one data-parallel group of every rank.
	TP int
	// TPCollective is, with TP > 1, the exchange of every
	// tensor-parallel group in place of the pairs (2k, 2k+1): an
	// all-reduce of TPBytes of activations with this algorithm, as
	// Megatron-LM's tensor-parallel layers all-reduce theirs, or
	// "all-to-all", a mixture-of-experts dispatch of TPBytes/TP to every
	// peer of the group. Its messages are of class tensor: never
	// forgiven, every element checked. Empty: the pairs.
	TPCollective string
	// FlowPerMessage gives every gradient message a flow of its own,
	// created at both ends when the step begins and destroyed when the
	// message completes there, so it starts at line rate with fresh
	// congestion-control state, as every message is a new queue pair in
	// ASTRA-sim's ns-3 backend; false: one persistent flow per ordered
	// pair of ranks that exchange gradients.
	FlowPerMessage bool
}

// Flat reports whether c is the flat ring over every rank, which rank.go
// runs itself: no schedule to compile.
func (c Collective) Flat() bool {
	ring := len(c.Algorithms) == 0 || len(c.Algorithms) == 1 && c.Algorithms[0] == collective.Ring
	return ring && len(c.Dims) == 0 && c.Splits <= 1 && c.Window == 0 && c.TP <= 1 && c.TPCollective == "" && !c.FlowPerMessage
}

// tp is the tensor-parallel degree, at least 1.
func (c Collective) tp() int { return max(c.TP, 1) }

// String names the schedule as a result records it: "ring",
// "direct,direct dims 8x8 tp 8 splits 4 window 2 flow-per-message".
func (c Collective) String() string {
	s := "ring"
	if len(c.Algorithms) > 0 {
		s = ""
		for i, a := range c.Algorithms {
			if i > 0 {
				s += ","
			}
			s += string(a)
		}
	}
	if len(c.Dims) > 0 {
		s += " dims"
		for i, d := range c.Dims {
			sep := "x"
			if i == 0 {
				sep = " "
			}
			s += fmt.Sprintf("%s%d", sep, d)
		}
	}
	if c.TP > 1 {
		s += fmt.Sprintf(" tp %d", c.TP)
	}
	if c.Splits > 1 {
		s += fmt.Sprintf(" splits %d", c.Splits)
	}
	if c.Window > 0 {
		s += fmt.Sprintf(" window %d", c.Window)
	}
	if c.TPCollective != "" {
		s += " tp-collective " + c.TPCollective
	}
	if c.FlowPerMessage {
		s += " flow-per-message"
	}
	return s
}

// AllToAll names the tensor-parallel groups' all-to-all (TPCollective).
const AllToAll = "all-to-all"

// groups is the job's data-parallel groups: which ranks all-reduce their
// gradients together, and the schedule each group runs.
type groups struct {
	tp    int // ranks per tensor-parallel group; the data-parallel groups' stride
	size  int // ranks per data-parallel group
	sched *collective.Schedule
	// maxSends is the most messages a rank sends in a step: the stride of
	// the per-message flow ids.
	maxSends int
	// tensor is the tensor-parallel groups' exchange (TPCollective); nil
	// for the pairs.
	tensor *collective.Schedule
}

// newGroups compiles c's schedules for n ranks with gradientBytes and
// tpBytes each.
func newGroups(c Collective, n, gradientBytes, tpBytes int) (*groups, error) {
	tp := c.tp()
	if n%tp != 0 {
		return nil, fmt.Errorf("tensor-parallel degree %d does not divide %d ranks", tp, n)
	}
	g := &groups{tp: tp, size: n / tp}
	algs := c.Algorithms
	if len(algs) == 0 {
		algs = []collective.Algorithm{collective.Ring}
	}
	sched, err := collective.Compile(collective.Spec{Kind: collective.AllReduce, Ranks: g.size, Dims: slices.Clone(c.Dims),
		Algorithms: slices.Clone(algs), Bytes: gradientBytes, Elem: 4, Splits: c.Splits, Window: c.Window})
	if err != nil {
		return nil, err
	}
	g.sched = sched
	for _, pl := range sched.Plans {
		g.maxSends = max(g.maxSends, len(pl.Sends))
	}
	if c.TPCollective == "" {
		return g, nil
	}
	if tp < 2 {
		return nil, fmt.Errorf("tp-collective %s needs tensor-parallel groups: a degree of 2 or more", c.TPCollective)
	}
	spec := collective.Spec{Kind: collective.AllReduce, Ranks: tp, Bytes: tpBytes, Elem: 4}
	if c.TPCollective == AllToAll {
		spec.Kind, spec.Algorithms = collective.AllToAll, []collective.Algorithm{collective.Direct}
	} else {
		a, err := collective.ParseAlgorithm(c.TPCollective)
		if err != nil {
			return nil, fmt.Errorf("tp-collective: %w (or %s)", err, AllToAll)
		}
		spec.Algorithms = []collective.Algorithm{a}
	}
	if g.tensor, err = collective.Compile(spec); err != nil {
		return nil, err
	}
	return g, nil
}

// tensorMember is the rank of index l in rank i's tensor-parallel group.
func (g *groups) tensorMember(i, l int) int { return i/g.tp*g.tp + l }

// local is rank i's index in its data-parallel group.
func (g *groups) local(i int) int { return i / g.tp }

// global is the rank of group-local index l in rank i's group.
func (g *groups) global(i, l int) int { return i%g.tp + l*g.tp }

// plan is rank i's part of the schedule.
func (g *groups) plan(i int) *collective.Plan { return &g.sched.Plans[g.local(i)] }

// Schedule is the all-reduce schedule of one data-parallel group that cfg
// runs on hosts, and the tensor-parallel degree that strides its groups
// (group-local rank l of the group of rank c < tp is rank c + l*tp). The
// flat ring, which rank.go runs itself, is compiled too, to describe it.
func (cfg Config) Schedule(hosts []hostapi.HostID) (*collective.Schedule, int, error) {
	full, err := cfg.withDefaults(hosts)
	if err != nil {
		return nil, 0, err
	}
	if full.groups != nil {
		return full.groups.sched, full.groups.tp, nil
	}
	g, err := newGroups(Collective{}, len(hosts), full.GradientBytes, 0)
	if err != nil {
		return nil, 0, err
	}
	return g.sched, 1, nil
}
