// Command forgivectl is the operator's tool for the FORGIVE emulator: it
// talks to a forgived daemon over its unix socket (status, counters, step
// records, file transfers that verify their SHA-256) and runs the lab that
// drives a training workload through a fabric of real daemons and
// switches.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRoot(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	fmt.Fprintf(stderr, "forgivectl: %s\n", err)
	if cli.IsUsage(err) {
		return 2
	}
	return 1
}

// global holds the flags every daemon command shares.
type global struct {
	socket  string
	timeout time.Duration
	json    bool
}

func newRoot(stdout, stderr io.Writer) *cobra.Command {
	g := &global{}
	root := &cobra.Command{
		Use:   "forgivectl",
		Short: "Operate forgived daemons and run the FORGIVE lab",
		Long: `forgivectl talks to a forgived daemon over its unix socket and runs the lab:
a fabric of trimswitch and forgived processes driven by a training workload,
reported against FORGIVE's baselines.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.Usage(err) })
	pf := root.PersistentFlags()
	pf.StringVarP(&g.socket, "socket", "s", "/run/forgived.sock", "the daemon's host-API socket")
	pf.DurationVar(&g.timeout, "timeout", 10*time.Second, "timeout of each request to the daemon")
	pf.BoolVar(&g.json, "json", false, "print JSON instead of a table")
	pf.Bool(dryRunFlag, false, "check flags, arguments and input files and print what would be done, without starting a process, contacting a daemon or touching a namespace")
	root.AddCommand(statusCmd(g), countersCmd(g), stepsCmd(g), sendCmd(g), recvCmd(g), labCmd(), labWorkerCmd(), reportCmd(), topoCmd(), netnsExecCmd(), keygenCmd())
	cli.UsageArgs(root)
	return root
}

// dial connects to the daemon named by --socket.
func (g *global) dial(ctx context.Context) (*hostapi.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	c, err := hostapi.DialContext(ctx, g.socket)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ECONNREFUSED) {
		return nil, fmt.Errorf("connect to %s: no forgived listens there (%w); name the daemon's socket with --socket PATH, or start one with forgived --config FILE", g.socket, err)
	}
	if err != nil {
		return nil, fmt.Errorf("connect to %s: %w", g.socket, err)
	}
	return c, nil
}

// with connects to the daemon, runs one request under the per-request
// timeout, and disconnects.
func (g *global) with(ctx context.Context, fn func(ctx context.Context, c *hostapi.Client) error) error {
	c, err := g.dial(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	return fn(ctx, c)
}
