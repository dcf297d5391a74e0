package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/forgive-emu/forgive/internal/cli"
	"github.com/forgive-emu/forgive/lab/report"
	"github.com/forgive-emu/forgive/lab/results"
)

func reportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "report",
		Short: "Work with the lab's results",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cmd.Help()
		},
	}
	cmd.AddCommand(reportMergeCmd(), reportScoreCmd(), reportPhasesCmd())
	return cmd
}

func reportMergeCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "merge DIR...",
		Short: "Combine the shards of a lab sweep into the sweep's results",
		Long: `merge reads the results.json of every shard directory (written by
'forgivectl lab --shard i/n --out DIR'; a results.json.gz in its place,
or a results.json path, works too), checks that they are one sweep,
every run once, and writes the
results.json, results.csv and plots the sweep run whole would have
written, and prints its table. It refuses shards of different sweeps
(naming the options that differ), a run found twice and a run no shard
holds (naming it and its shard). The wall-clock fields are the shards':
the earliest start, the sum of their wall seconds (docs/lab.md, "Sweeps").`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return cli.Usage(errors.New("report merge: name the shards' directories"))
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			if out == "" {
				return cli.Usage(errors.New("--out: want a directory"))
			}
			absOut, err := filepath.Abs(out)
			if err != nil {
				return cli.Usage(fmt.Errorf("--out %s: %w", out, err))
			}
			for _, a := range args {
				dir := a
				if st, err := os.Stat(a); err == nil && !st.IsDir() {
					dir = filepath.Dir(a)
				}
				if abs, err := filepath.Abs(dir); err == nil && abs == absOut {
					return cli.Usage(fmt.Errorf("--out %s is shard %s's directory: the merge would overwrite its results.json", out, a))
				}
			}
			if st, err := os.Stat(out); err == nil && !st.IsDir() {
				return cli.Usage(fmt.Errorf("--out %s: not a directory", out))
			}
			files, err := report.Shards(args)
			if err != nil {
				return cli.Usage(err)
			}
			f, err := report.Merge(args, files)
			if err != nil {
				return cli.Usage(err)
			}
			w := cmd.OutOrStdout()
			if dryRun(cmd) {
				fmt.Fprintf(w, "dry run: would merge %d shards of sweep %s (%d runs) into %s; nothing written\n", len(args), f.Sweep.ID, len(f.Runs), absOut)
				return nil
			}
			if err := report.WriteResults(out, f); err != nil {
				return err
			}
			if err := report.CopyPatterns(args, out, f); err != nil {
				return err
			}
			if err := report.Table(w, f); err != nil {
				return err
			}
			for _, note := range report.SkippedPlots(f) {
				fmt.Fprintf(cmd.ErrOrStderr(), "note: %s\n", note)
			}
			fmt.Fprintf(w, "\nsweep %s: %d runs from %d shards; results.json, results.csv and plots in %s\n", f.Sweep.ID, len(f.Runs), len(args), absOut)
			if !allHeld(f) {
				return errors.New("an invariant or an exactness check failed (see the table's notes)")
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "lab-out", "directory for the merged results.json, results.csv and plots")
	return cmd
}

func reportScoreCmd() *cobra.Command {
	var nonBlocking []string
	cmd := &cobra.Command{
		Use:   "score [--nonblocking DIR]... DIR...",
		Short: "Score a reading of the seed's experiment against the seed's 25 figures",
		Long: `score reads the results.json of every directory (a results.json or
results.json.gz path works too) as the runs of one reading of the seed's
experiment on its worst (4:1) fabric, and those given with --nonblocking
as the same reading on the non-blocking fabric, and prints the seed's 25
figures beside the reading's with a verdict each: inside the seed's
spread, the same sign and order (the same direction within a factor of
two), different, or not run (the reading lacks the policy or fabric the
figure needs). Each group holds one fabric: a directory whose runs ran on
another topology than the group's first is refused. The rules are
docs/results/seed-readings/README.md's.`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			load := func(paths []string) ([]*results.File, error) {
				var fs []*results.File
				for _, a := range paths {
					f, err := loadResults(a)
					if err != nil {
						return nil, err
					}
					fs = append(fs, f)
				}
				return fs, nil
			}
			worst, err := load(args)
			if err != nil {
				return cli.Usage(err)
			}
			nb, err := load(nonBlocking)
			if err != nil {
				return cli.Usage(err)
			}
			// A figure mixes the runs it reads: runs of two fabrics in one
			// group would score a figure of neither.
			if err := oneFabric(args, worst, "the runs on the worst fabric"); err != nil {
				return cli.Usage(err)
			}
			if err := oneFabric(nonBlocking, nb, "--nonblocking"); err != nil {
				return cli.Usage(err)
			}
			if dryRun(cmd) {
				fmt.Fprintf(cmd.OutOrStdout(), "dry run: would score %d results files (and %d non-blocking)\n", len(worst), len(nb))
				return nil
			}
			return report.WriteScore(cmd.OutOrStdout(), report.Score(worst, nb))
		},
	}
	cmd.Flags().StringArrayVar(&nonBlocking, "nonblocking", nil, "a results directory of the same reading on the non-blocking fabric (repeatable)")
	return cmd
}

// oneFabric refuses a group of results whose runs ran on more than one
// topology, naming the first file of another.
func oneFabric(paths []string, fs []*results.File, group string) error {
	for i, f := range fs {
		if f.Topology != fs[0].Topology {
			return fmt.Errorf("%s: %s ran on %s, %s on %s: one fabric a group (give the non-blocking fabric's runs with --nonblocking)",
				group, paths[i], f.Topology, paths[0], fs[0].Topology)
		}
	}
	return nil
}

func reportPhasesCmd() *cobra.Command {
	var steps []int
	var png string
	cmd := &cobra.Command{
		Use:   "phases [--step N]... [--png FILE] DIR",
		Short: "Tabulate the bottleneck queue, rate cuts, CNPs and trims per phase of each step",
		Long: `phases reads a results directory's results.json (or results.json.gz, or
a results file) of a simulator run, which samples its congestion signals
beside the bottleneck queue, and prints, for the first seed's runs of
every policy and every step (--step: only those), the step's phases
(compute: the compute phase, the model-parallel exchanges overlapping
it; mp-tail: until the first rank began its all-reduce; all-reduce: until
the step ended) with the queue's mean and peak, the CNPs the ranks
received, the rate cuts they applied and the payload bytes the switches
trimmed, by the role of the trimming port. With --png it also draws one
step (the first --step, or the first non-critical step) as step-phases.png
does: the queue, rate cuts and trims per 100 µs, policy beside policy,
with the compute phase and the all-reduce shaded.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := loadResults(args[0])
			if err != nil {
				return cli.Usage(err)
			}
			if report.PhaseStep(f) == 0 {
				return cli.Usage(fmt.Errorf("%s: %w", args[0], report.ErrNoPhases))
			}
			if dryRun(cmd) {
				fmt.Fprintf(cmd.OutOrStdout(), "dry run: would tabulate the phases of %d runs\n", len(f.Runs))
				return nil
			}
			if err := report.WritePhaseRows(cmd.OutOrStdout(), report.PhaseRows(f, steps...)); err != nil {
				return err
			}
			if png == "" {
				return nil
			}
			step := 0
			if len(steps) > 0 {
				step = steps[0]
			}
			if err := report.WriteStepPhasesPNG(png, f, step); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote %s\n", png)
			return nil
		},
	}
	cmd.Flags().IntSliceVar(&steps, "step", nil, "only these steps (repeatable or comma-separated); the first is the one --png draws")
	cmd.Flags().StringVar(&png, "png", "", "also draw one step's phases into this PNG file")
	return cmd
}

// loadResults reads a results directory's results.json (or
// results.json.gz), or a results file.
func loadResults(path string) (*results.File, error) {
	return report.ReadJSON(report.ResultsFile(path))
}
