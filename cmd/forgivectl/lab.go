package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/internal/cli"
	"github.com/forgive-emu/forgive/lab"
	"github.com/forgive-emu/forgive/lab/report"
	"github.com/forgive-emu/forgive/lab/results"
)

func labCmd() *cobra.Command {
	var o lab.Options
	var policies, entropy, scale, shard string
	var list, verbose, shardFromZero, replace, compareSim, flowPerMessage bool
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Run the training workload over a real fabric and compare FORGIVE with its baselines",
		Long: `lab brings up a fabric of trimswitch and forgived processes on loopback
(a topology placed with an emulation profile), drives a data-parallel
training job through it for every policy and seed, and prints the seed's
metrics: training time against the first policy, gradient bytes given up,
all-reduce times on critical and non-critical steps, retransmissions, trims,
and FORGIVE's invariants. With --out it writes results.json, results.csv and
PNG plots (docs/results.md). The table names the profile in one line
(--verbose: with every derived parameter) and explains its columns in a
legend under it; with --seeds 2 or more every change carries its margin
and a change within the run-to-run noise is marked ~. With --placement
sim the same fabric, built from the same configurations, runs on a
virtual clock, in this process or, with --jobs above 1 (the default on
more than one core), in one process per run (docs/lab.md, "In the
simulator").

With no flags: leaf-spine-2x4 topology, loopback profile, 8 ranks,
policies dcqcn, shed-tight and forgive; on the real placements (loopback,
netns) 3 seeds of 7 steps, so that every change carries a margin, and the
same lab in the simulator beside it for the headline's line
(--compare-sim); in the simulator 1 seed of 20 steps.

A sweep is its policy x seed runs, in order: for each seed, each policy.
--shard i/n runs only the runs k (0-based) with k mod n == i-1, so n
machines (or n days of one) run one sweep, and 'forgivectl report merge'
combines their directories into the sweep's results. With --placement sim
--jobs runs that many runs at once, each in a process of its own, with the
results of one at a time (docs/lab.md, "Sweeps").

With --dry-run it checks every flag, the topology, profile, trace and
policies exactly as a run would before starting, prints the derived
profile and the step classification, and starts nothing.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if list {
				for _, p := range lab.Policies() {
					fmt.Fprintf(cmd.OutOrStdout(), "%-18s %s\n", p.Name, p.Description)
				}
				return nil
			}
			// The lab's options read 0 as "the default"; on the command
			// line the defaults are the placement's, so 0 is a mistake.
			real := o.Placement != lab.PlacementSim
			if !cmd.Flags().Changed("steps") {
				o.Steps = defaultSteps(real)
			} else if o.Steps < 1 {
				return cli.Usage(fmt.Errorf("--steps %d: want 1..10000", o.Steps))
			}
			if !cmd.Flags().Changed("seeds") {
				o.Seeds = defaultSeeds(real)
			} else if o.Seeds < 1 {
				return cli.Usage(fmt.Errorf("--seeds %d: want 1..100", o.Seeds))
			}
			if policies != "" {
				o.Policies = strings.Split(policies, ",")
			}
			if flowPerMessage {
				if o.Workload.Flows != "" && o.Workload.Flows != lab.FlowsMessage {
					return cli.Usage(fmt.Errorf("--flow-per-message is --flows %s, but --flows says %q", lab.FlowsMessage, o.Workload.Flows))
				}
				o.Workload.Flows = lab.FlowsMessage
			}
			var err error
			if o.Scale, err = lab.ParseScale(scale); err != nil {
				return cli.Usage(fmt.Errorf("--scale %w", err))
			}
			if entropy != "" {
				var e hostapi.Entropy
				if err := e.UnmarshalText([]byte(entropy)); err != nil {
					return cli.Usage(fmt.Errorf("--entropy: %w", err))
				}
			}
			o.Workload.Entropy = entropy
			// Subflows belong to subflow entropy: the default applies only
			// there, and an explicit --subflows with another policy is a
			// contradiction the user should hear about.
			if entropy != hostapi.EntropySubflows.String() {
				if cmd.Flags().Changed("subflows") {
					return cli.Usage(fmt.Errorf("--subflows %d needs --entropy subflows (got --entropy %s)", o.Workload.Subflows, entropy))
				}
				o.Workload.Subflows = 0
			}
			if shardFromZero {
				if shard == "" {
					return cli.Usage(errors.New("--shard-from-zero: give --shard i/n too"))
				}
				if shard, err = fromZero(shard); err != nil {
					return cli.Usage(err)
				}
			}
			if shard != "" {
				if o.Shard, err = lab.ParseShard(shard); err != nil {
					return cli.Usage(err)
				}
			}
			if !cmd.Flags().Changed("jobs") {
				o.Jobs = lab.DefaultJobs(o.Placement)
			} else if o.Jobs < 1 {
				return cli.Usage(fmt.Errorf("--jobs %d: want >= 1", o.Jobs))
			}
			if dryRun(cmd) {
				pv, err := lab.Check(o)
				if err != nil {
					return cli.Usage(err)
				}
				return printPreview(cmd.OutOrStdout(), pv)
			}
			if err := prepareOut(o.Out, replace); err != nil {
				return err
			}
			o.Progress = cmd.ErrOrStderr()
			f, err := lab.Run(cmd.Context(), o)
			if errors.Is(err, lab.ErrInput) {
				return cli.Usage(err)
			}
			if err != nil {
				return err
			}
			if err := report.WriteTable(cmd.OutOrStdout(), f, report.TableOptions{Verbose: verbose}); err != nil {
				return err
			}
			if real && compareSim && o.Shard.Whole() {
				// The same lab on a virtual clock: the seeds' noise without
				// the machine's, for the headline's line (docs/lab.md).
				so := o
				so.Placement, so.Out, so.Seal, so.Capture, so.BinDir = lab.PlacementSim, "", lab.SealOff, false, ""
				so.Jobs = lab.DefaultJobs(lab.PlacementSim)
				fmt.Fprintf(cmd.ErrOrStderr(), "the same lab in the simulator, for the headline (--compare-sim=false: without)\n")
				sf, err := lab.Run(cmd.Context(), so)
				switch {
				case err != nil:
					fmt.Fprintf(cmd.ErrOrStderr(), "note: the simulator's run of the same lab failed: %v\n", err)
					sf = nil
				case !allHeld(sf):
					fmt.Fprintf(cmd.ErrOrStderr(), "note: the simulator's run of the same lab broke an invariant or an exactness check\n")
				}
				if line := report.Headline(f, sf); line != "" {
					fmt.Fprintf(cmd.OutOrStdout(), "\n%s\n", line)
				}
			}
			if sh := f.Sweep.Shard; sh != nil {
				fmt.Fprintf(cmd.OutOrStdout(), "\nshard %d/%d of sweep %s: the table covers this shard's %d runs only; 'forgivectl report merge' of every shard's directory gives the sweep's\n",
					sh.Index, sh.Count, f.Sweep.ID, len(f.Runs))
			}
			if o.Out != "" {
				for _, note := range report.SkippedPlots(f) {
					fmt.Fprintf(cmd.ErrOrStderr(), "note: %s\n", note)
				}
				abs, _ := filepath.Abs(o.Out)
				fmt.Fprintf(cmd.OutOrStdout(), "\nresults.json, results.csv and plots in %s\n", abs)
			}
			if !allHeld(f) {
				return errors.New("an invariant or an exactness check failed (see the table's notes)")
			}
			return nil
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Topology, "topology", "", "topology: a shipped name or a YAML file (default leaf-spine-2x4)")
	fl.StringVar(&o.Profile, "profile", "", "emulation profile: a shipped name or a YAML file (default loopback)")
	fl.IntVar(&o.Ranks, "ranks", 0, "ranks (default: the topology's)")
	fl.IntVar(&o.Steps, "steps", 0, fmt.Sprintf("training steps (default %d on the real placements, loopback and netns, %d in the simulator)", defaultSteps(true), defaultSteps(false)))
	fl.StringVar(&policies, "policies", "", "comma-separated policies, the first is the baseline (default dcqcn,shed-tight,forgive; all: every one)")
	fl.IntVar(&o.Seeds, "seeds", 0, fmt.Sprintf("seeds per policy, 1..N (default %d on the real placements, whose machine noise needs them for a margin; %d in the simulator)", defaultSeeds(true), defaultSeeds(false)))
	fl.BoolVar(&compareSim, "compare-sim", true, "on the real placements, also run the same lab in the simulator (no files) and print a line comparing the headlines")
	fl.StringVar(&o.Out, "out", "lab-out", "directory for results.json, results.csv and plots (empty: none); one that holds another run's results is refused unless --replace")
	fl.BoolVar(&replace, "replace", false, "replace the results of an earlier run in --out (its results.json, results.csv, plots and loss patterns; the directory's other files stay)")
	fl.StringVar(&o.BinDir, "bin-dir", "", "directory holding forgived and trimswitch (default: built from the source tree, or found beside forgivectl or on PATH)")
	fl.BoolVar(&o.Capture, "capture", false, "let every switch write a pcap")
	fl.StringVar(&o.Seal, "seal", lab.SealOff, "on: every daemon of the loopback and netns placements seals every packet with a fresh key per run (docs/security.md); off: plain packets, as the lab's figures were measured (docs/lab.md, \"Sealed runs\")")
	fl.StringVar(&o.Placement, "placement", "loopback", "loopback; netns: every switch and host in its own network namespace (root); sim: the same engines and configurations in this process, on a virtual clock")
	fl.StringVar(&scale, "scale", "1", "multiply the workload's bytes per step and compute phase by this, for quick runs: 0.25 or 1/16, in (0, 1]")
	fl.BoolVar(&list, "list-policies", false, "list the policies and exit")
	fl.BoolVar(&verbose, "verbose", false, "print the profile's derived parameters, the placement and scale above the tables")
	fl.IntVar(&o.Workload.GradientBytes, "gradient-bytes", 0, "gradient bytes per rank per step (default 2 MiB; the seed's on the seed-* profiles, docs/profiles.md)")
	fl.DurationVar(&o.Workload.Compute, "compute", 0, "compute phase per step (default 20ms; the seed's 40.4ms on the seed-* profiles)")
	fl.IntVar(&o.Workload.TPBytes, "tp-bytes", 0, "tensor-parallel bytes each rank of a pair sends per step (default 256 KiB; the seed's on the seed-* profiles)")
	fl.IntVar(&o.Workload.PPBytes, "pp-bytes", 0, "pipeline-parallel bytes each rank sends per step (default 256 KiB; the seed's on the seed-* profiles)")
	fl.IntVar(&o.Workload.BurstBytes, "burst-bytes", 0, "background burst bytes per sender (default 512 KiB; a quarter of the gradient on the seed-* profiles)")
	fl.StringVar(&o.Workload.NormsFile, "norms", "", "classify steps with Accordion's detector over this gradient-norm trace (one line per step: a norm, or one per layer) instead of the fixed schedule (critical steps 1, 2, 3 and the last)")
	fl.StringVar(&entropy, "entropy", "", "path policy of every flow: single (one path, like RoCE's ECMP), spray (a path per packet), subflows or message (a path per message, ECMP per message as over a new queue pair per message) (default: spray on the seed-* profiles, as the seed's fabric does; single on the others)")
	fl.StringVar((*string)(&o.Workload.ModelParallel), "model-parallel", "", "when the tensor- and pipeline-parallel exchanges run: after-compute (beside the all-reduce) or with-compute (during the compute phase, the all-reduce after, as in a Megatron-style step; default on the seed-* profiles, whose step waits on the all-reduce; after-compute on the others)")
	fl.StringVar((*string)(&o.Workload.TensorParallel), "tensor-parallel", "network", "where the tensor-parallel exchanges run: network (on the fabric, a flow per pair) or local (off it, as on NVLink inside a node: no flow and no time; the fabric carries the data- and pipeline-parallel traffic only)")
	fl.StringVar(&o.Workload.Collective, "collective", "", "the gradient all-reduce's algorithm per logical dimension, comma-separated: ring, direct, halving-doubling, double-binary-tree (one name: every dimension; default: the flat ring over every rank; docs/lab.md, \"Collectives\")")
	fl.IntSliceVar(&o.Workload.Dims, "dims", nil, "the logical dimensions of a data-parallel group, fastest first, e.g. 8,8: reduce-scatter on the first, all-reduce on the next, all-gather back (default: one dimension)")
	fl.IntVar(&o.Workload.TP, "tp", 0, "tensor-parallel degree: ranks kTP..kTP+TP-1 form a tensor-parallel group, and the gradient all-reduce runs over the data-parallel groups of ranks TP apart (default: one group of every rank)")
	fl.StringVar(&o.Workload.TPCollective, "tp-collective", "", "with --tp, every tensor-parallel group's exchange in place of the pairs (2k, 2k+1): an all-reduce of --tp-bytes of activations with this algorithm (ring, direct, halving-doubling, double-binary-tree), or all-to-all (mixture-of-experts dispatch)")
	fl.IntVar(&o.Workload.Splits, "splits", 0, "pieces the gradient pipelines in through the dimensions and a tree's levels (default 1)")
	fl.IntVar(&o.Workload.Window, "window", 0, "the direct algorithm's fan-in window: at most this many of a rank's sends of a phase in flight (default: every peer at once)")
	fl.StringVar(&o.Workload.SeedSizes, "seed-sizes", "", "on a seed profile, derive the seed's sizes under this run's collective, exchanges and placement (reading) or keep the flat ring's (ring, the control) (default: reading)")
	fl.StringVar(&o.Workload.Flows, "flows", "", "how gradient messages map onto flows: persistent (one flow per pair of ranks) or message (a flow per message, at line rate with fresh congestion control, as every message is a new queue pair in ASTRA-sim's ns-3 backend) (default: the profile's: message on seed-400g, persistent on the others)")
	fl.BoolVar(&flowPerMessage, "flow-per-message", false, "the same as --flows message")
	fl.StringVar(&o.RankPlacement, "rank-placement", "", "which leaf each rank sits on: interleaved (rank i on leaf i % leaves) or packed (consecutive ranks per leaf) (default: the topology's)")
	fl.StringVar(&o.PayloadFree, "payload-free", lab.PayloadsAuto, "whether the sim placement runs without payload bytes (packets keep their lengths, no region holds data; the byte checks give way to the accounting checks): auto (when the registered memory would exceed half the machine's), on or off")
	fl.Uint8Var(&o.Workload.Subflows, "subflows", 4, "ordered subflows per flow; applies only with --entropy subflows")
	fl.IntVar(&o.Workers, "workers", 1, "goroutines each run of --placement sim takes, for one run on several cores: the same results")
	fl.IntVar(&o.Jobs, "jobs", 0, fmt.Sprintf("runs at once, each in a process of its own: --placement sim only (default: the cores, %d here; the real placements run one at a time)", lab.DefaultJobs(lab.PlacementSim)))
	fl.BoolVar(&shardFromZero, "shard-from-zero", false, "count --shard's i from 0 (0/3 is the first of three), as a Kubernetes Indexed Job's JOB_COMPLETION_INDEX and 0-based job arrays do; the results name the shard from 1")
	fl.StringVar(&shard, "shard", "", "run only shard i/n of the sweep, 1-based (1/3 is the first of three): the runs k with k mod n == i-1; merge the shards with 'forgivectl report merge'")
	return cmd
}

// labWorkerCmd is the process lab --jobs starts for each run: it reads the
// run on standard input and writes its results on standard output.
func labWorkerCmd() *cobra.Command {
	return &cobra.Command{
		Use:    lab.WorkerArg,
		Short:  "Run one run of a lab sweep for lab --jobs (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return lab.ServeWorker(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
}

// defaultSteps and defaultSeeds are the lab's size when the flags are not
// given: on the real placements 3 seeds of 7 steps (a margin on every
// change, in about the time one seed of 20 steps took; docs/lab.md, "The
// headline"), in the simulator the lab's own defaults.
func defaultSteps(real bool) int {
	if real {
		return 7
	}
	return 20
}

func defaultSeeds(real bool) int {
	if real {
		return 3
	}
	return 1
}

// prepareOut refuses an output directory that holds an earlier run's
// results, so that one run's files never sit beside another's, or with
// replace removes them (docs/lab.md, "Output").
func prepareOut(dir string, replace bool) error {
	if dir == "" {
		return nil
	}
	earlier, err := report.EarlierResults(dir)
	if err != nil {
		return cli.Usage(fmt.Errorf("--out %s: %w", dir, err))
	}
	if len(earlier) == 0 {
		return nil
	}
	if !replace {
		what := fmt.Sprintf("%d files", len(earlier))
		if len(earlier) <= 3 {
			what = strings.Join(earlier, ", ")
		}
		return cli.Usage(fmt.Errorf("--out %s holds another run's results (%s): add --replace to replace them, or give another --out", dir, what))
	}
	return report.ClearResults(dir)
}

// allHeld reports whether every run kept FORGIVE's invariants and
// delivered every byte it had to.
func allHeld(f *results.File) bool {
	for _, r := range f.Runs {
		if !r.ChecksHeld() {
			return false
		}
	}
	return true
}

// fromZero turns a 0-based shard i/n into the 1-based one --shard takes.
func fromZero(s string) (string, error) {
	is, ns, ok := strings.Cut(strings.TrimSpace(s), "/")
	i, err1 := strconv.Atoi(is)
	n, err2 := strconv.Atoi(ns)
	if !ok || err1 != nil || err2 != nil || n < 1 || i < 0 || i >= n {
		return "", fmt.Errorf("--shard %q with --shard-from-zero: want i/n with 0 <= i < n (0/3 is the first of three)", s)
	}
	return fmt.Sprintf("%d/%d", i+1, n), nil
}
