package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/forgive-emu/forgive/internal/cli"
	"github.com/forgive-emu/forgive/lab"
	"github.com/forgive-emu/forgive/lab/report"
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
	cmd.AddCommand(reportMergeCmd())
	return cmd
}

func reportMergeCmd() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "merge DIR...",
		Short: "Combine the shards of a lab sweep into the sweep's results",
		Long: `merge reads the results.json of every shard directory (written by
'forgivectl lab --shard i/n --out DIR'; a results.json path works too),
checks that they are one sweep, every run once, and writes the
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
			files, err := lab.Shards(args)
			if err != nil {
				return cli.Usage(err)
			}
			f, err := lab.Merge(args, files)
			if err != nil {
				return cli.Usage(err)
			}
			w := cmd.OutOrStdout()
			if dryRun(cmd) {
				fmt.Fprintf(w, "dry run: would merge %d shards of sweep %s (%d runs) into %s; nothing written\n", len(args), f.Sweep.ID, len(f.Runs), absOut)
				return nil
			}
			if err := lab.WriteResults(out, f); err != nil {
				return err
			}
			if err := lab.CopyPatterns(args, out, f); err != nil {
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
