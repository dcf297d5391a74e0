package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgive-emu/forgive/internal/cli"
	"github.com/forgive-emu/forgive/lab"
	"github.com/forgive-emu/forgive/lab/topo"
	"github.com/forgive-emu/forgive/workload"
)

// dryRunFlag is the persistent flag every subcommand honours: check the
// flags, arguments and input files as the command would, print what it
// would do, and start no process, contact no daemon and change no
// namespace.
const dryRunFlag = "dry-run"

// dryRun reports whether --dry-run was given to cmd or to the root.
func dryRun(cmd *cobra.Command) bool {
	v, err := cmd.Flags().GetBool(dryRunFlag)
	return err == nil && v
}

// printPreview is lab --dry-run's report: the inputs with their defaults,
// the step classification and the derived emulation profile.
func printPreview(out io.Writer, pv *lab.Preview) error {
	o := pv.Options
	names := make([]string, len(pv.Policies))
	for i, p := range pv.Policies {
		names[i] = p.Name
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "dry run\tevery input valid; nothing started\n")
	fmt.Fprintf(tw, "topology\t%s: %s, %d ranks, %d switches\n", o.Topology, pv.Plan.Kind, pv.Plan.Ranks, len(pv.Plan.Switches))
	fmt.Fprintf(tw, "profile\t%s\n", o.Profile)
	fmt.Fprintf(tw, "placement\t%s (%s)\n", o.Placement, topo.Limits(topo.Network(o.Placement)))
	fmt.Fprintf(tw, "policies\t%s (the first is the baseline)\n", strings.Join(names, ", "))
	fmt.Fprintf(tw, "seeds\t1..%d\n", o.Seeds)
	shard := "the whole sweep"
	if !o.Shard.Whole() {
		shard = "shard " + o.Shard.String()
	}
	runs := pv.Runs
	if len(runs) > 6 {
		runs = append(runs[:6:6], fmt.Sprintf("%d more", len(pv.Runs)-6))
	}
	fmt.Fprintf(tw, "sweep\t%s: %s, %d of %d runs (%s), %d at once\n", pv.SweepID, shard, len(pv.Runs), pv.SweepRuns, strings.Join(runs, ", "), max(1, min(o.Jobs, len(pv.Runs))))
	how := "the fixed schedule"
	if pv.Norms != nil {
		how = "Accordion's detector over " + o.Workload.NormsFile
	}
	fmt.Fprintf(tw, "steps\t%d; critical by %s: %s\n", o.Steps, how, joinInts(pv.Critical))
	w := o.Workload
	entropy := w.Entropy
	if w.Subflows > 0 {
		entropy = fmt.Sprintf("%s (%d)", entropy, w.Subflows)
	}
	tensor := fmt.Sprintf("tensor %d B", w.TPBytes)
	if w.TensorParallel == workload.TPLocal {
		tensor += " off the fabric (local)"
	}
	fmt.Fprintf(tw, "workload\tgradient %d B per rank per step, compute %v, %s, pipeline %d B (%s), burst %d B on steps %s, entropy %s\n",
		w.GradientBytes, w.Compute, tensor, w.PPBytes, w.ModelParallel, w.BurstBytes, joinInts(w.BurstSteps), entropy)
	if s := pv.SeedSizes; s != nil {
		switch {
		case s.Note != "":
			fmt.Fprintf(tw, "sizes\tthe seed's (--seed-sizes %s): %s\n", s.Reading, s.Note)
		default:
			fmt.Fprintf(tw, "sizes\tthe seed's under this reading (--seed-sizes %s): a rank sends %.4g B of gradient per gradient byte; %s carry %.4g B per gradient byte, 32.3 ms at their rate\n",
				s.Reading, s.SentGradient, s.Uplinks, s.PerGradientByte)
		}
	}
	if c := pv.Collective; c != nil {
		fmt.Fprintf(tw, "schedule\t%s: %d data-parallel group(s) of %d ranks; per rank and step at most %d messages, %d B sent, %d B received; fan-in up to %d\n",
			c.Schedule, c.Groups, c.GroupSize, c.Messages, c.SentBytes, c.ReceivedBytes, c.MaxFanIn)
		if pv.ProfileCollective {
			fmt.Fprintf(tw, "\t%s's reading of the job (docs/profiles.md, \"The seed profiles' reading\"); --collective and --flows choose another\n", o.Profile)
		}
		for _, ph := range c.Phases {
			fmt.Fprintf(tw, "  phase %d\t%s: fan-in %d senders into a receiver, at most %d B received by a rank\n", ph.Phase, ph.Name, ph.FanIn, ph.ReceivedBytes)
		}
		fmt.Fprintf(tw, "ideal\t%v: the busiest link's bytes at its rate (%s), congestion and dependencies ignored\n", time.Duration(c.IdealNS), c.Bottleneck)
	}
	payloads := fmt.Sprintf("every byte real: %.2f GB registered over the ranks", float64(pv.Registered)/1e9)
	if pv.PayloadFree {
		payloads = fmt.Sprintf("none (payload-free): %.2f GB would be registered over the ranks", float64(pv.Registered)/1e9)
	}
	fmt.Fprintf(tw, "payloads\t%s\n", payloads)
	fmt.Fprintf(tw, "links\thost %v, uplink %v, delay %v, path RTT %v\n", pv.Plan.HostRate, pv.Plan.UplinkRate, pv.Plan.LinkDelay, pv.Plan.PathRTT)
	out2 := o.Out
	if out2 == "" {
		out2 = "(none)"
	}
	fmt.Fprintf(tw, "results\t%s\n", out2)
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nderived profile (%s as %s uses it):\n", o.Profile, o.Topology)
	d := pv.Plan.Derived()
	keys := make([]string, 0, len(d))
	for k := range d {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	tw = tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, k := range keys {
		fmt.Fprintf(tw, "  %s\t%s\n", k, d[k])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, n := range pv.Notes {
		fmt.Fprintf(out, "note: %s\n", n)
	}
	return nil
}

func joinInts(xs []int) string {
	if len(xs) == 0 {
		return "none"
	}
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = fmt.Sprint(x)
	}
	return strings.Join(s, " ")
}

// dryDaemon is --dry-run of a command that talks to a daemon: the flags
// were parsed and checked; say what would be asked, and of whom.
func dryDaemon(cmd *cobra.Command, g *global, what string) error {
	if g.timeout <= 0 {
		return cli.Usage(fmt.Errorf("--timeout %v: want > 0", g.timeout))
	}
	fmt.Fprintf(cmd.OutOrStdout(), "dry run: would ask the daemon at %s for %s (timeout %v); nothing contacted\n", g.socket, what, g.timeout)
	return nil
}

// dryTopoUp is topo up --dry-run: the placement is computed and printed,
// no configuration written and no namespace created.
func dryTopoUp(out io.Writer, tp *topo.Topology, prof *topo.Profile, place topo.PlaceOptions) error {
	plan, err := topo.Place(tp, prof, place)
	if err != nil {
		return cli.Usage(err)
	}
	fmt.Fprintf(out, "dry run: fabric %s would hold %s with %d ranks in %d namespaces, configurations in %s; nothing created\n\n",
		plan.Netns.Prefix, plan.Topology, plan.Ranks, len(plan.Netns.Namespaces), place.Dir)
	printLayout(out, plan)
	fmt.Fprintln(out)
	if place.KeyFile != "" {
		fmt.Fprintf(out, "security: every packet but PAUSE would be sealed for domain %d with a fresh key written to %s (mode 0600); --seal off runs plain\n",
			topo.SealDomain, place.KeyFile)
	} else {
		fmt.Fprintf(out, "security: off (--seal off): packets would travel plain\n")
	}
	for _, w := range plan.Warnings {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	return nil
}

// dryNetnsExec checks netns-exec's arguments: a fabric's namespace name
// and a command that exists.
func dryNetnsExec(out io.Writer, args []string) error {
	if len(args) < 3 || args[1] != "--" {
		return cli.Usage(errors.New("usage: forgivectl netns-exec NAMESPACE -- COMMAND [ARG...]"))
	}
	if !strings.HasPrefix(args[0], topo.NamePrefix) {
		return cli.Usage(fmt.Errorf("namespace %q is not a fabric's (names start with %q)", args[0], topo.NamePrefix))
	}
	fmt.Fprintf(out, "dry run: would run %q in namespace %s; nothing entered\n", strings.Join(args[2:], " "), args[0])
	return nil
}

// readable checks that a file a command would read is there.
func readable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return f.Close()
}
