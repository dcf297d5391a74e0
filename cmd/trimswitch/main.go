// Command trimswitch is a software switch for the FORGIVE emulator: each
// port is a UDP socket, egress links are shaped to a rate and a delay, data
// queues mark ECN CE along a RED ramp and trim packets to their header onto
// a strict-priority queue when full, routes spread over several ports by
// ECMP on the entropy field, and PFC and link faults are optional. The
// switching is package switchcore's, the sockets and the loop package
// trimswitchdrv's; this command is flags and signals. docs/trimswitch.md
// documents the configuration file.
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

	"github.com/forgive-emu/forgive/internal/cli"
	"github.com/forgive-emu/forgive/trimswitchdrv"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := newCommand(stdout, stderr)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return cli.ExitOK
	}
	// A configuration error lists its problems on the following lines.
	fmt.Fprintf(stderr, "trimswitch: %s\n", err)
	if cli.IsUsage(err, trimswitchdrv.ErrConfig) {
		return cli.ExitUsage
	}
	return cli.ExitFailed
}

// options are the command's flags.
type options struct {
	config       string
	metrics      string
	logLevel     string
	capture      string
	capturePorts []string
	check        bool
	cpuProfile   string
}

func newCommand(stdout, stderr io.Writer) *cobra.Command {
	var o options
	cmd := &cobra.Command{
		Use:   "trimswitch --config FILE",
		Short: "A software switch with shaped links, ECN marking, trimming, ECMP and PFC",
		Long: `trimswitch runs one switch of the FORGIVE emulator. Every port is a UDP
socket bound to a local address that sends to one neighbour address. Egress
links are shaped to a rate and a propagation delay; data queues mark ECN CE
along a RED ramp and, when full, trim packets to their header onto a
strict-priority queue. The configuration file (YAML) describes the ports,
routes and queues; docs/trimswitch.md documents every field.

It logs "ready" once every socket is bound, and stops cleanly on SIGTERM or
SIGINT. With --metrics it serves Prometheus metrics on /metrics, and /healthz
and /ready for the lab to poll.`,
		Example: `  trimswitch --config leaf1.yaml
  trimswitch --config leaf1.yaml --check
  trimswitch --config leaf1.yaml --metrics 127.0.0.1:9464 --capture /tmp/leaf1.pcap --capture-ports host1,up1`,
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return o.run(cmd, stdout, stderr)
		},
	}
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return cli.Usage(err) })
	cli.UsageArgs(cmd)
	f := cmd.Flags()
	f.StringVarP(&o.config, "config", "c", "", "configuration file (YAML); required")
	f.StringVar(&o.metrics, "metrics", "", "serve /metrics, /healthz and /ready on this host:port (overrides the file's metrics)")
	f.StringVar(&o.logLevel, "log-level", "", "debug, info, warn or error (overrides the file's log_level; default info)")
	f.StringVar(&o.capture, "capture", "", "write a pcap of the captured ports to this file (overrides capture.file)")
	f.StringSliceVar(&o.capturePorts, "capture-ports", nil, "ports to capture, by name, comma-separated (overrides capture.ports; default all)")
	f.BoolVar(&o.check, "check", false, "validate the configuration and exit")
	f.StringVar(&o.cpuProfile, "cpu-profile", "", "write a CPU profile of the run to this file (default: none, or DIR/NAME-PID.pprof when "+cli.CPUProfileDirEnv+" names a DIR)")
	return cmd
}

func (o *options) run(cmd *cobra.Command, stdout, stderr io.Writer) error {
	if o.config == "" {
		return cli.Usage(errors.New("--config is required (see --help)"))
	}
	cfg, err := trimswitchdrv.LoadConfig(o.config)
	if err != nil {
		return fmt.Errorf("%s: %w", o.config, err)
	}
	if err := o.override(cmd, cfg); err != nil {
		return fmt.Errorf("%s: %w", o.config, err)
	}
	if o.check {
		fmt.Fprintf(stdout, "%s: ok: switch %q, %d ports, %d routes\n", o.config, cfg.SwitchName(), len(cfg.Ports), len(cfg.Routes))
		return nil
	}
	log, err := cli.NewLogger(cfg.LogLevel, stderr)
	if err != nil {
		return err
	}
	defer func() { _ = log.Sync() }()

	ctx, stop := signal.NotifyContext(cmd.Context(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	prof, stopProfile, err := cli.StartCPUProfile(o.cpuProfile, o.config)
	if err != nil {
		return err
	}
	if prof != "" {
		log.Info("cpu profile", zap.String("file", prof))
	}
	d, err := trimswitchdrv.Open(cfg, log)
	if err != nil {
		return errors.Join(err, stopProfile())
	}
	return errors.Join(d.Run(ctx), stopProfile())
}

// override applies the flags that replace fields of the file, and checks
// the result again.
func (o *options) override(cmd *cobra.Command, cfg *trimswitchdrv.Config) error {
	f := cmd.Flags()
	if f.Changed("metrics") {
		cfg.Metrics = o.metrics
	}
	if f.Changed("log-level") {
		cfg.LogLevel = o.logLevel
	}
	if f.Changed("capture") {
		cfg.Capture.File = o.capture
	}
	if f.Changed("capture-ports") {
		cfg.Capture.Ports = o.capturePorts
	}
	return cfg.Validate()
}
