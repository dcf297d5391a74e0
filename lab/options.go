package lab

import (
	"context"
	"io"
	"math"
	"os"
	"time"

	"github.com/forgive-emu/forgive/lab/fabric"
	"github.com/forgive-emu/forgive/lab/topo"
	"github.com/forgive-emu/forgive/workload"
)

// The values of Options.Seal.
const (
	SealOn  = "on"
	SealOff = "off"
)

// Options are the lab's inputs; zero values take the defaults.
type Options struct {
	Topology string   // a shipped name or a YAML file; default leaf-spine-2x4
	Profile  string   // a shipped name or a YAML file; default loopback
	Ranks    int      // default: the topology's
	Steps    int      // default 20
	Policies []string // default DefaultPolicies; the first is the baseline
	Seeds    int      // runs per policy, seeds 1..Seeds; default 1
	Out      string   // results directory; empty: no files
	BinDir   string   // where forgived and trimswitch are; empty: found or built
	Net      int      // second octet of the runs' 127.N.x.0/24 networks; 0: derived from the pid
	Capture  bool     // every switch writes a pcap into the run directory
	// Seal is whether the real placements' daemons seal every packet for
	// one security domain with a fresh key per run (docs/security.md):
	// SealOn or SealOff (the default when empty: sealing moved the lab's
	// figures beyond their spread, docs/lab.md, "Sealed runs"). The sim
	// placement has no sockets, and nothing to seal.
	Seal string
	// Placement is "loopback" (default), "netns": every switch and host
	// in its own network namespace, cabled by veth pairs (needs root;
	// docs/topologies.md, "Namespaces"), or "sim": the same engines, built
	// from the same configurations, in this process on a virtual clock.
	Placement string
	// PayloadFree is whether the sim placement's packets carry payload
	// bytes: "auto" (or empty: payload-free when the registered memory
	// would exceed half the machine's), "on" (payload-free: packets keep
	// their lengths, no region holds data, and the checks that need bytes
	// give way to those that do not; Run.Checks lists what ran) or "off".
	// The real placements always carry bytes.
	PayloadFree string
	// Scale multiplies the workload's bytes per step and its compute
	// phase, for quick runs: (0, 1]; 0 means 1. Every result records it.
	Scale float64

	// Inspect, when set, is called after each run's workload, before its
	// fabric stops, with the running fabric (to read its switches'
	// counters); an error fails the run. Real placements only: the sim
	// placement has no processes to inspect, and refuses it.
	Inspect func(ctx context.Context, policy string, seed uint64, f *fabric.Fabric) error

	Workload WorkloadOptions
	// RankPlacement overrides the topology's placement of ranks on its
	// leaves: interleaved (rank i on leaf i % leaves) or packed (ranks
	// numbered consecutively per leaf, as ASTRA-sim's example topologies
	// number hosts); empty: the topology's own.
	RankPlacement string

	// Jobs is how many runs run at once. Above 1 (the sim placement only)
	// each run is a worker process: the running executable started with
	// WorkerArg, which must then call ServeWorker. 0 or 1: one run at a
	// time, in this process. DefaultJobs is forgivectl's default.
	Jobs int
	// Shard, when set, runs only that slice of the sweep (Shard).
	Shard Shard
	// Workers is the goroutines each run of the sim placement takes
	// (sim.Sim.SetWorkers): the same results, on more cores. 0 or 1: one.
	// The real placements refuse more.
	Workers int

	// Progress receives the progress line; nil: none.
	Progress io.Writer
	// Logs receives the children's logs; nil: they are kept in the run
	// directory only while the run lasts and quoted in errors.
	Logs io.Writer

	// sized: the workload's sizes are as a run used them (a worker's
	// options, from results.SweepOptions), not to be derived and scaled.
	sized bool
}

// The values of WorkloadOptions.Flows.
const (
	FlowsPersistent = topo.FlowsPersistent
	FlowsMessage    = topo.FlowsMessage
)

// WorkloadOptions size the training job; zero values take the defaults:
// the lab's (below) on a scaled-down profile, and the seed's, derived from
// its figures (docs/profiles.md, "The seed's workload"), on a profile at
// the reference's scale such as seed-400g.
type WorkloadOptions struct {
	GradientBytes int           // per rank per step; default 2 MiB (seed: 60.8 MB)
	Compute       time.Duration // default 20 ms (seed: 40.4 ms)
	TPBytes       int           // default 256 KiB (seed: 284 MB)
	PPBytes       int           // default 256 KiB (seed: 94.7 MB)
	BurstBytes    int           // per sender; default 512 KiB (seed: 15.2 MB)
	BurstSteps    []int         // default {10}
	Critical      []int         // default the seed's {1, 2, 3, last}
	// NormsFile, when set, classifies steps with the daemons' detector
	// over a gradient-norm trace instead of the fixed schedule (ReadNorms).
	NormsFile string
	// Entropy is every flow's path policy: single (one path per flow,
	// like RoCE's ECMP), spray (a fresh path per packet), subflows, or
	// message (a path per message: ECMP per message).
	// Empty is the profile's default (SeedDefaults): spray on the seed's
	// profiles, whose fabric sprays, single on the others.
	Entropy  string
	Subflows uint8 // with hostapi.EntropySubflows
	// ModelParallel is when the tensor- and pipeline-parallel exchanges
	// run: after the compute phase, beside the all-reduce, or during it,
	// the all-reduce following (workload.ModelParallel). Empty is the
	// profile's default: with-compute on the seed's profiles, whose step
	// waits on the all-reduce, after-compute on the others.
	ModelParallel workload.ModelParallel
	// TensorParallel is where the tensor-parallel exchanges run: network
	// (the default, on the fabric) or local (off it, as on NVLink inside
	// a node: no flow, no time; workload.TPLocal). TPBytes stays the
	// job's size, recorded as given.
	TensorParallel workload.TensorParallel
	// Collective is the gradient all-reduce's schedule (docs/lab.md,
	// "Collectives"): the algorithm of each logical dimension,
	// comma-separated (ring, direct, halving-doubling,
	// double-binary-tree; one name for every dimension). Empty, with no
	// Dims, is the profile's default (topo.ProfileWorkload: direct on
	// 8 x 8 on seed-400g), and the flat ring over every rank where the
	// profile names none; "ring" is the flat ring on every profile.
	Collective string
	Dims       []int // the logical dimensions, fastest first; empty: one
	// TP is the tensor-parallel degree: the gradient all-reduce runs over
	// the data-parallel groups of ranks that are TP apart; 0: one group.
	TP int
	// TPCollective is the tensor-parallel groups' exchange with TP > 1:
	// an all-reduce of TPBytes with this algorithm, or all-to-all;
	// empty: the pairs (2k, 2k+1).
	TPCollective string
	Splits       int // pieces the vector pipelines in through the dimensions; 0: one
	Window       int // the direct algorithm's fan-in window; 0: every peer at once
	// Flows is how gradient messages map onto flows: FlowsPersistent
	// (one flow per ordered pair of ranks) or FlowsMessage (every
	// gradient message a flow of its own, at line rate with fresh
	// congestion-control state); empty is the profile's default
	// (topo.ProfileWorkload), persistent when it names none.
	Flows string
	// SeedSizes is how a seed profile's sizes are derived from the seed's
	// figures: under the run's own collective, exchanges and placement
	// (SeedSizesReading; empty means it), or as under the flat ring
	// whatever the run's collective (SeedSizesRing, the control).
	SeedSizes string
}

func (o *Options) defaults() {
	if o.Topology == "" {
		o.Topology = topo.DefaultTopology
	}
	if o.Profile == "" {
		o.Profile = topo.DefaultProfile
	}
	if o.Steps == 0 {
		o.Steps = 20
	}
	if len(o.Policies) == 0 {
		o.Policies = DefaultPolicies
	}
	if o.Seeds == 0 {
		o.Seeds = 1
	}
	if o.Net == 0 {
		o.Net = 10 + os.Getpid()%50
	}
	if o.Placement == "" {
		o.Placement = string(topo.Loopback)
	}
	if o.Seal == "" {
		o.Seal = SealOff
	}
	if o.Scale == 0 {
		o.Scale = 1
	}
	w := &o.Workload
	if w.BurstSteps == nil {
		w.BurstSteps = []int{min(10, o.Steps)}
	}
	if w.Critical == nil {
		w.Critical = []int{1, 2, 3, o.Steps}
	}
}

// labWorkload is the lab's own workload, on the profiles that are not the
// seed's.
func labWorkload() WorkloadOptions {
	return WorkloadOptions{GradientBytes: 2 << 20, Compute: 20 * time.Millisecond,
		TPBytes: 256 << 10, PPBytes: 256 << 10, BurstBytes: 512 << 10}
}

// sizes fills the workload's sizes from def and applies the scale. On a profile
// with the reference's timers (scale.time 1: seed-400g and the
// rate-scaled seed-100g, seed-50g, seed-25g, seed-6.25g) def is the
// seed's (seedSizesUnder), and every size is multiplied by the profile's
// byte scale (seedBytes), so a message spans as many BDPs and
// communication takes as long as in the seed, and the compute phase is
// the seed's; on the other profiles def is the lab's (labWorkload).
func (w *WorkloadOptions) sizes(def WorkloadOptions, seedBytes, scale float64) {
	if seedBytes > 0 {
		def.GradientBytes = scaleBytes(def.GradientBytes, seedBytes)
		def.TPBytes = scaleBytes(def.TPBytes, seedBytes)
		def.PPBytes = scaleBytes(def.PPBytes, seedBytes)
		def.BurstBytes = scaleBytes(def.BurstBytes, seedBytes)
	}
	pick := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
		*v = scaleBytes(*v, scale)
	}
	pick(&w.GradientBytes, def.GradientBytes)
	pick(&w.TPBytes, def.TPBytes)
	pick(&w.PPBytes, def.PPBytes)
	pick(&w.BurstBytes, def.BurstBytes)
	if w.Compute == 0 {
		w.Compute = def.Compute
	}
	w.Compute = time.Duration(math.Round(float64(w.Compute) * scale))
}
