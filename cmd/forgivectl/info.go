package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"slices"
	"sort"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/internal/cli"
)

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func statusCmd(g *global) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show a daemon's identity, configuration and load",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dryRun(cmd) {
				return dryDaemon(cmd, g, "its status")
			}
			var st hostapi.Status
			if err := g.with(cmd.Context(), func(ctx context.Context, c *hostapi.Client) (err error) {
				st, err = c.Status(ctx)
				return err
			}); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.json {
				return printJSON(out, st)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "host\t%d (%s)\n", st.HostID, st.HostName)
			fmt.Fprintf(tw, "protocol\t%d\n", st.Protocol)
			fmt.Fprintf(tw, "uptime\t%v\n", st.Uptime)
			fmt.Fprintf(tw, "clients\t%d\n", st.Clients)
			fmt.Fprintf(tw, "regions\t%d (%d bytes)\n", st.Regions, st.RegisteredBytes)
			fmt.Fprintf(tw, "flows\t%d\n", st.Flows)
			keys := make([]string, 0, len(st.Backend))
			for k := range st.Backend {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				fmt.Fprintf(tw, "%s\t%s\n", k, st.Backend[k])
			}
			return tw.Flush()
		},
	}
}

func countersCmd(g *global) *cobra.Command {
	return &cobra.Command{
		Use:   "counters",
		Short: "Show the daemon's host counters and this client's flow counters",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dryRun(cmd) {
				return dryDaemon(cmd, g, "its counters")
			}
			var ct hostapi.Counters
			if err := g.with(cmd.Context(), func(ctx context.Context, c *hostapi.Client) (err error) {
				ct, err = c.Counters(ctx)
				return err
			}); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.json {
				return printJSON(out, ct)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "COUNTER\tVALUE")
			row := func(k string, v uint64) { fmt.Fprintf(tw, "%s\t%d\n", k, v) }
			each(ct.Host.Map(), row)
			for _, f := range ct.Flows {
				fmt.Fprintf(tw, "\nFLOW %d (peer %d)\t\n", f.Flow, f.Peer)
				each(f.Values.Map(), row)
			}
			return tw.Flush()
		},
	}
}

// each calls f with the counters in name order.
func each(m map[string]uint64, f func(string, uint64)) {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		f(k, m[k])
	}
}

func stepsCmd(g *global) *cobra.Command {
	limit := 0
	cmd := &cobra.Command{
		Use:   "steps",
		Short: "Show the FORGIVE ledger of the most recent training steps",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if limit < 0 {
				return cli.Usage(fmt.Errorf("--limit %d: want >= 0", limit))
			}
			if dryRun(cmd) {
				return dryDaemon(cmd, g, "its step records")
			}
			var recs []hostapi.StepRecord
			if err := g.with(cmd.Context(), func(ctx context.Context, c *hostapi.Client) (err error) {
				recs, err = c.Steps(ctx, limit)
				return err
			}); err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if g.json {
				return printJSON(out, recs)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', tabwriter.AlignRight)
			fmt.Fprintln(tw, "STEP\tCRITICAL\tP\tEXPECTED\tBUDGET\tRECEIVED\tFORGIVEN\tOUTSTANDING\tOPEN\tINVARIANT\t")
			for _, r := range recs {
				fmt.Fprintf(tw, "%d\t%v\t%g\t%d\t%d\t%d\t%d\t%d\t%v\t%v\t\n", r.Step, r.Critical, r.P, r.Expected,
					r.Budget, r.Received, r.Forgiven, r.Outstanding, r.Open, held(r.InvariantHeld))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().IntVar(&limit, "limit", 0, "most recent records to show (0: the daemon's default)")
	return cmd
}

func held(b bool) string {
	if b {
		return "held"
	}
	return "BROKEN"
}
