// Command forgived is the emulated NIC of one host: RoCE-like packets over
// UDP with PSNs and SACK bitmaps, selective repeat (or go-back-N), DCQCN
// rate control, and FORGIVE's receiver budget and sender exemption. Local
// applications reach it over a unix socket (docs/hostapi.md); the
// configuration file is documented in docs/forgived.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/forgive-emu/forgive/forgivedrv"
	"github.com/forgive-emu/forgive/internal/cli"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

type options struct {
	config     string
	metrics    string
	logLevel   string
	check      bool
	cpuProfile string
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	var o options
	cmd := &cobra.Command{
		Use:   "forgived --config FILE",
		Short: "The emulated NIC of one host, with FORGIVE",
		Long: `forgived runs the emulated Ultra-Ethernet-style NIC of one host. It sends and
receives the fabric's packets on one UDP socket cabled to a switch port, and
serves local applications on a unix socket: they register memory, create
flows, post sends and receives, and begin and end training steps.

The configuration file (YAML) is documented in docs/forgived.md.`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if o.config == "" {
				return cli.Usage(errors.New("--config is required"))
			}
			return serve(cmd.Context(), o, stdout, stderr)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&o.config, "config", "c", "", "configuration file (required)")
	f.StringVar(&o.metrics, "metrics", "", "serve Prometheus /metrics on this address (overrides the file)")
	f.StringVar(&o.logLevel, "log-level", "", "debug, info, warn or error (overrides the file)")
	f.BoolVar(&o.check, "check", false, "validate the configuration and exit")
	f.StringVar(&o.cpuProfile, "cpu-profile", "", "write a CPU profile of the run to this file (default: none, or DIR/NAME-PID.pprof when "+cli.CPUProfileDirEnv+" names a DIR)")
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.Usage(err) })
	cli.UsageArgs(cmd)
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return cli.ExitOK
	}
	fmt.Fprintf(stderr, "forgived: %s\n", err)
	if cli.IsUsage(err, forgivedrv.ErrConfig) {
		return cli.ExitUsage
	}
	return cli.ExitFailed
}

func serve(ctx context.Context, o options, stdout, stderr io.Writer) error {
	cfg, err := forgivedrv.ReadConfig(o.config)
	if err != nil {
		return err
	}
	if o.metrics != "" {
		cfg.Metrics = o.metrics
	}
	if o.logLevel != "" {
		cfg.LogLevel = o.logLevel
	}
	// The flags replace fields of the file: check the result once, as
	// start-up uses it, so --check refuses what start-up refuses.
	p, err := forgivedrv.Prepare(cfg)
	if err != nil {
		return fmt.Errorf("%s: %w", o.config, err)
	}
	if o.check {
		fmt.Fprintf(stdout, "%s: ok\n", o.config)
		return nil
	}
	log, err := cli.NewLogger(cfg.LogLevel, stderr)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	prof, stopProfile, err := cli.StartCPUProfile(o.cpuProfile, o.config)
	if err != nil {
		return err
	}
	if prof != "" {
		log.Info("cpu profile", zap.String("file", prof))
	}
	d, err := forgivedrv.NewPrepared(p, log)
	if err != nil {
		return errors.Join(err, stopProfile())
	}
	err = d.Run(ctx)
	log.Info("stopped", zap.Error(err))
	return errors.Join(err, stopProfile())
}
