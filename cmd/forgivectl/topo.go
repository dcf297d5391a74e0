package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/forgive-emu/forgive/internal/cli"
	"github.com/forgive-emu/forgive/lab/fabric"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/forgive-emu/forgive/lab"
	"github.com/forgive-emu/forgive/lab/launch"
	"github.com/forgive-emu/forgive/lab/netns"
	"github.com/forgive-emu/forgive/lab/topo"
)

// topoCmd brings fabrics up in network namespaces and down again.
func topoCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "topo",
		Short: "Place a topology in network namespaces, list fabrics, remove them",
		Long: `topo places a topology in network namespaces: one per switch and per host,
a veth pair per cable, a /30 of 10.77.0.0/16 per veth (docs/topologies.md,
"Namespaces"). Every name starts with "fgv-" and the fabric's id, so topo
down and topo status find fabrics whatever happened to the process that
made them. Needs root.`,
	}
	cmd.AddCommand(topoUpCmd(), topoDownCmd(), topoStatusCmd())
	return cmd
}

// usageArgs makes a wrong argument count a usage error (exit status 2).
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := check(cmd, args); err != nil {
			return cli.Usage(err)
		}
		return nil
	}
}

// topoFlags are what up and down share: which fabric.
type topoFlags struct {
	id  string
	dir string
}

func (f *topoFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.id, "id", "", "the fabric's id (1-6 of [0-9a-z]; default: derived from the topology's name)")
	cmd.Flags().StringVar(&f.dir, "dir", "", "directory of the configurations and host sockets (default /run/forgive/<id>)")
}

// resolve fills the id from the topology's name and the directory from
// the id.
func (f *topoFlags) resolve(name string) {
	if f.id == "" {
		f.id = netns.DerivedRunID(name)
	}
	if f.dir == "" {
		f.dir = filepath.Join("/run/forgive", f.id)
	}
}

func topoUpCmd() *cobra.Command {
	var tf topoFlags
	var profile, policy, binDir, seal string
	var ranks int
	var start bool
	cmd := &cobra.Command{
		Use:   "up TOPOLOGY",
		Short: "Create a topology's namespaces, veths and configurations (and with --start, run it)",
		Long: `up places TOPOLOGY (a shipped name or a YAML file) with an emulation profile
in network namespaces, writes every trimswitch and forgived configuration
into --dir, and creates the namespaces, veths, addresses and routes. It
prints the command that starts each daemon in its namespace. An earlier
fabric with the same id is removed first.

With --start it also starts every daemon, prints where the host sockets
are, and stays in the foreground until interrupted; then it stops the
daemons and removes the fabric.

Every forgived seals every packet (docs/security.md) with a key made for
this fabric at up time: --dir's domain.key, mode 0600, removed by topo down.
--seal off runs the fabric with plain packets, which any process that
reaches its addresses can forge.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			tp, err := topo.FindTopology(args[0])
			if err != nil {
				return cli.Usage(err)
			}
			prof, err := topo.FindProfile(profile)
			if err != nil {
				return cli.Usage(err)
			}
			pols, err := lab.LookupPolicies([]string{policy})
			if err != nil {
				return cli.Usage(err)
			}
			if seal != lab.SealOn && seal != lab.SealOff {
				return cli.Usage(fmt.Errorf("--seal %q: want on or off", seal))
			}
			sealed := seal == lab.SealOn
			tf.resolve(tp.Name)
			place := topo.PlaceOptions{Ranks: ranks, Dir: tf.dir, Network: topo.Namespaces, RunID: tf.id,
				Host: pols[0].HostPolicy, Seed: 1, LogLevel: "info"}
			if sealed {
				// The path the key will have: the dry run places with it.
				place.KeyFile = filepath.Join(tf.dir, fabric.KeyName)
			}
			if dryRun(cmd) {
				return dryTopoUp(cmd.OutOrStdout(), tp, prof, place)
			}
			if err := netns.NeedRoot(); err != nil {
				return err
			}
			if start {
				place.KeyFile = "" // fabric.Start writes it
				return topoRun(cmd.Context(), cmd.OutOrStdout(), tp, prof, place, binDir, sealed)
			}
			return topoUp(cmd.OutOrStdout(), tp, prof, place)
		},
	}
	tf.add(cmd)
	fl := cmd.Flags()
	fl.StringVar(&profile, "profile", topo.DefaultProfile, "emulation profile: a shipped name or a YAML file")
	fl.IntVar(&ranks, "ranks", 0, "ranks (default: the topology's)")
	fl.StringVar(&policy, "policy", "forgive", "the lab policy every forgived is configured with")
	fl.BoolVar(&start, "start", false, "start every daemon and stay in the foreground until interrupted")
	fl.StringVar(&binDir, "bin-dir", "", "with --start: directory holding forgived, trimswitch and forgivectl")
	fl.StringVar(&seal, "seal", lab.SealOn, "on: every forgived seals every packet with a key made for this fabric (--dir's domain.key, mode 0600); off: plain packets")
	return cmd
}

// printSeal says how the fabric's packets travel.
func printSeal(out io.Writer, keyFile string) {
	if keyFile == "" {
		fmt.Fprintf(out, "security: off (--seal off): packets travel plain; anyone who reaches the fabric's addresses can forge them\n")
		return
	}
	fmt.Fprintf(out, "security: every packet but PAUSE sealed for domain %d with a fresh key, %s (mode 0600; topo down removes it); --seal off runs plain\n",
		topo.SealDomain, keyFile)
}

// topoUp creates the fabric and leaves it for the operator to run.
func topoUp(out io.Writer, tp *topo.Topology, prof *topo.Profile, place topo.PlaceOptions) error {
	if place.KeyFile != "" {
		key, err := fabric.WriteKey(place.Dir)
		if err != nil {
			return err
		}
		place.KeyFile = key
	}
	plan, err := topo.Place(tp, prof, place)
	if err != nil {
		return cli.Usage(err)
	}
	paths, err := plan.Write(place.Dir)
	if err != nil {
		return err
	}
	if _, err := netns.Create(plan.Netns); err != nil {
		return err
	}
	fmt.Fprintf(out, "fabric %s: %s with %d ranks in %d namespaces, configurations in %s\n\n",
		plan.Netns.Prefix, plan.Topology, plan.Ranks, len(plan.Netns.Namespaces), place.Dir)
	printLayout(out, plan)
	fmt.Fprintln(out)
	printSeal(out, place.KeyFile)
	fmt.Fprintf(out, "\nstart the daemons (switches first):\n")
	for _, sw := range plan.Switches {
		fmt.Fprintf(out, "  forgivectl %s %s -- trimswitch --config %s &\n", launch.NetnsExecCommand, sw.Netns, paths[sw.Name])
	}
	for _, h := range plan.Hosts {
		fmt.Fprintf(out, "  forgivectl %s %s -- forgived --config %s &\n", launch.NetnsExecCommand, h.Netns, paths[h.Name])
	}
	fmt.Fprintf(out, "\nremove it all: forgivectl topo down --id %s\n", place.RunID)
	for _, w := range plan.Warnings {
		fmt.Fprintf(out, "warning: %s\n", w)
	}
	return nil
}

// topoRun starts the fabric and runs it until ctx ends (SIGINT or SIGTERM:
// main's context) or a daemon dies, then removes it all as topo down does:
// processes, veths, namespaces, and the configuration directory with its
// key.
func topoRun(ctx context.Context, out io.Writer, tp *topo.Topology, prof *topo.Profile, place topo.PlaceOptions, binDir string, sealed bool) (err error) {
	bins, err := launch.Binaries(ctx, binDir, "forgived", "trimswitch", "forgivectl")
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, removeConfigDir(place.Dir)) }()
	fab, err := fabric.Start(ctx, fabric.Config{Topology: tp, Profile: prof, Place: place, Bins: bins, Logs: os.Stderr, Seal: sealed})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, fab.Stop()) }()
	fmt.Fprintf(out, "fabric %s running: %s with %d ranks\n\n", fab.Plan.Netns.Prefix, fab.Plan.Topology, fab.Plan.Ranks)
	printLayout(out, fab.Plan)
	fmt.Fprintln(out)
	key := ""
	if sealed {
		key = filepath.Join(place.Dir, fabric.KeyName)
	}
	printSeal(out, key)
	fmt.Fprintf(out, "\nhost sockets:\n")
	for _, h := range fab.Plan.Hosts {
		fmt.Fprintf(out, "  %s (host id %d): %s\n", h.Name, h.ID, h.Socket)
	}
	fmt.Fprintf(out, "\ninterrupt (Ctrl-C) or SIGTERM to stop and remove the fabric and %s\n", place.Dir)
	select {
	case <-ctx.Done():
		return nil
	case died := <-fab.Died():
		return died
	}
}

// printLayout prints every veth with its two ends.
func printLayout(out io.Writer, plan *topo.Plan) {
	tw := tabwriter.NewWriter(out, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "cable\tend\taddress\tnamespace\t\tend\taddress\tnamespace")
	for _, v := range plan.Netns.Links {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t<->\t%s\t%s\t%s\n", strings.TrimSuffix(v.A.Name, "a"),
			v.A.Label, v.A.Addr, v.A.Netns, v.B.Label, v.B.Addr, v.B.Netns)
	}
	tw.Flush()
}

func topoDownCmd() *cobra.Command {
	var tf topoFlags
	var all bool
	cmd := &cobra.Command{
		Use:   "down [TOPOLOGY]",
		Short: "Remove a fabric: its processes, veths, namespaces and configurations",
		Long: `down kills every process inside the fabric's namespaces, deletes its veths
and namespaces, and removes its configuration directory. The fabric is the
one topo up made from TOPOLOGY, or the one --id names; --all removes every
fabric, whoever made it (what a crashed lab leaves behind).`,
		Args: usageArgs(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			prefix, err := downPrefix(&tf, args, all)
			if err != nil {
				return err
			}
			if dryRun(cmd) {
				fmt.Fprintf(cmd.OutOrStdout(), "dry run: would remove every namespace, veth and process under %s; nothing removed\n", prefix)
				return nil
			}
			if err := netns.NeedRoot(); err != nil {
				return err
			}
			r, err := netns.Cleanup(prefix)
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "removed %d namespaces, %d stray veths, %d processes under %s\n", len(r.Namespaces), len(r.Links), len(r.Pids), prefix)
			for _, n := range r.Namespaces {
				fmt.Fprintf(out, "  %s\n", n)
			}
			if !all {
				err = errors.Join(err, removeConfigDir(tf.dir))
			}
			return err
		},
	}
	tf.add(cmd)
	cmd.Flags().BoolVar(&all, "all", false, "remove every fabric (every name starting with fgv-)")
	return cmd
}

// downPrefix is the names down removes.
func downPrefix(tf *topoFlags, args []string, all bool) (string, error) {
	switch {
	case all && (len(args) > 0 || tf.id != ""):
		return "", cli.Usage(errors.New("--all takes neither a topology nor --id"))
	case all:
		return topo.NamePrefix, nil
	case len(args) == 0 && tf.id == "":
		return "", cli.Usage(errors.New("name the fabric: a TOPOLOGY, --id ID, or --all"))
	case tf.id == "":
		tp, err := topo.FindTopology(args[0])
		if err != nil {
			return "", cli.Usage(err)
		}
		tf.resolve(tp.Name)
	default:
		tf.resolve("")
	}
	if err := topo.CheckRunID(tf.id); err != nil {
		return "", cli.Usage(fmt.Errorf("--id %w", err))
	}
	return topo.RunPrefix(tf.id), nil
}

// removeConfigDir removes what topo up wrote, and only that: a directory
// holding nothing but configurations, sockets, captures, the fabric's
// key and the sealing daemons' start files (SOCKET.start, forgivedrv's
// security.start_file default).
func removeConfigDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if ext := filepath.Ext(e.Name()); ext != ".yaml" && ext != ".sock" && ext != ".pcap" && ext != ".start" && e.Name() != fabric.KeyName {
			return fmt.Errorf("left %s in place: it holds %s, which topo up did not write", dir, e.Name())
		}
	}
	return os.RemoveAll(dir)
}

func topoStatusCmd() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "List every fabric's namespaces, veths and processes",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if dryRun(cmd) {
				fmt.Fprintf(cmd.OutOrStdout(), "dry run: would list every namespace and veth named %s*\n", topo.NamePrefix)
				return nil
			}
			if err := netns.NeedRoot(); err != nil {
				return err
			}
			nss, err := netns.List(topo.NamePrefix)
			if err != nil {
				return err
			}
			stray, err := netns.RootLinks(topo.NamePrefix)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON {
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(struct {
					Namespaces []netns.Namespace `json:"namespaces"`
					StrayLinks []string          `json:"stray_links"`
				}{nss, stray})
			}
			printStatus(out, nss, stray)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func printStatus(out io.Writer, nss []netns.Namespace, stray []string) {
	if len(nss) == 0 && len(stray) == 0 {
		fmt.Fprintln(out, "no fabric")
		return
	}
	tw := tabwriter.NewWriter(out, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "namespace\tprocesses\tinterface\tlabel\taddress\tstate")
	for _, ns := range nss {
		pids := fmt.Sprint(ns.Pids)
		if len(ns.Links) == 0 {
			fmt.Fprintf(tw, "%s\t%s\t-\t\t\t\n", ns.Name, pids)
		}
		for i, l := range ns.Links {
			state := "down"
			if l.Up {
				state = "up"
			}
			name := ns.Name
			if i > 0 {
				name, pids = "", ""
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", name, pids, l.Name, l.Alias, strings.Join(l.Addrs, ","), state)
		}
	}
	tw.Flush()
	if len(stray) > 0 {
		fmt.Fprintf(out, "\nveths left in this namespace: %s\n", strings.Join(stray, " "))
	}
}
