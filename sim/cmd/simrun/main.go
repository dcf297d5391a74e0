// Command simrun plays simulator scenarios (the scripts of sim/testdata)
// and reports, for every run directive, the virtual time reached, the
// packets and packet hops simulated, the wall time and the packet hops per
// wall second. With --check it also compares every directive's output
// with the one the file expects and fails on a difference.
//
// default.pgo, beside this file, is a CPU profile of the htsim scenario
// (simrun --cpuprofile sim/cmd/simrun/default.pgo --quiet --check
// sim/testdata/bench/fat-tree-k8-perm.txt). go build uses it for
// profile-guided optimisation of this command only; it changes no output.
//
//	go run ./sim/cmd/simrun sim/testdata/bench/fat-tree-k8-perm.txt
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgive-emu/forgive/internal/cli"
	"github.com/forgive-emu/forgive/sim/scenario"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCommand(stdout)
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return cli.ExitOK
	}
	fmt.Fprintf(stderr, "simrun: %s\n", err)
	if cli.IsUsage(err, scenario.ErrScenario) {
		return cli.ExitUsage
	}
	return cli.ExitFailed
}

type options struct {
	check      bool
	update     bool
	quiet      bool
	cpuprofile string
	workers    int
}

// errMismatch: a directive printed something else than its file expects.
var errMismatch = errors.New("output differs from the scenario's")

func newCommand(stdout io.Writer) *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:           "simrun [flags] SCENARIO...",
		Short:         "Play simulator scenarios and report their speed",
		Args:          cobra.MinimumNArgs(1),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, files []string) error {
			if o.cpuprofile != "" {
				f, err := os.Create(o.cpuprofile)
				if err != nil {
					return fmt.Errorf("cpu profile: %w", err)
				}
				defer f.Close()
				if err := pprof.StartCPUProfile(f); err != nil {
					return fmt.Errorf("cpu profile: %w", err)
				}
				defer pprof.StopCPUProfile()
			}
			for _, path := range files {
				if err := play(stdout, path, o); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&o.check, "check", false, "fail when a directive's output differs from the one the file expects")
	cmd.Flags().BoolVar(&o.update, "update", false, "rewrite the file's expected outputs with what the directives printed")
	cmd.Flags().BoolVar(&o.quiet, "quiet", false, "print only the run reports, not every directive's output")
	cmd.Flags().IntVar(&o.workers, "workers", 1, "run each fabric on this many goroutines (the outputs are the same)")
	cmd.Flags().StringVar(&o.cpuprofile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.Usage(err) })
	cli.UsageArgs(cmd)
	return cmd
}

func play(w io.Writer, path string, o options) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return cli.Usage(fmt.Errorf("scenario: %w", err))
	}
	ds, err := scenario.Parse(string(raw))
	if err != nil {
		return cli.Usage(fmt.Errorf("%s: %w", path, err))
	}
	p := scenario.NewPlayer()
	p.Workers = o.workers
	p.Wall = func(d scenario.Directive, run func() error) error {
		s := p.Sim()
		before := s.Stats()
		t0 := s.Now()
		start := time.Now()
		err := run()
		wall := time.Since(start)
		st := s.Stats()
		tr := p.Traffic()
		hops := st.PacketHops - before.PacketHops
		fmt.Fprintf(w, "%s:%d run: virtual %v, wall %.3fs; data packets %d (new %d, retransmitted %d), packets sent %d, packet hops %d, events %d; %.0f packet hops and %.0f events per wall second\n",
			path, d.Line, s.Now()-t0, wall.Seconds(), tr.DataPackets, tr.DataPackets-tr.RetxPackets, tr.RetxPackets, tr.TxPackets,
			hops, st.Events-before.Events, float64(hops)/wall.Seconds(), float64(st.Events-before.Events)/wall.Seconds())
		return err
	}
	bad := 0
	outs := make([]string, len(ds))
	for i, d := range ds {
		out, err := p.Do(d)
		if err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		outs[i] = out
		if !o.quiet {
			fmt.Fprintf(w, "%s:%d %s\n%s", path, d.Line, d.Cmd, out)
		}
		if o.check && out != d.Want {
			bad++
			fmt.Fprintf(w, "%s:%d %s: expected\n%s", path, d.Line, d.Cmd, d.Want)
		}
	}
	if o.update {
		if err := os.WriteFile(path, []byte(scenario.Format(scenario.Header(string(raw)), ds, outs)), 0o644); err != nil {
			return fmt.Errorf("update: %w", err)
		}
	}
	if bad > 0 {
		return fmt.Errorf("%s: %d directives: %w", path, bad, errMismatch)
	}
	return nil
}
