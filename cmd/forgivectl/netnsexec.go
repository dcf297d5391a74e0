package main

import (
	"errors"
	"github.com/forgive-emu/forgive/internal/cli"

	"github.com/spf13/cobra"

	"github.com/forgive-emu/forgive/lab/launch"
	"github.com/forgive-emu/forgive/lab/netns"
)

// netnsExecCmd is how a daemon starts inside its namespace: the launcher
// runs `forgivectl netns-exec NAME -- trimswitch --config ...`, which
// enters NAME and execs the daemon in its own place (same pid), so the
// daemon's sockets and listeners belong to the namespace.
func netnsExecCmd() *cobra.Command {
	return &cobra.Command{
		Use:   launch.NetnsExecCommand + " NAMESPACE -- COMMAND [ARG...]",
		Short: "Run a command inside one of a fabric's network namespaces",
		Long: `netns-exec enters the named network namespace (a fabric's, "fgv-...",
as topo status lists them) and replaces itself with the command, which
keeps forgivectl's process id. The lab starts every daemon of a netns
placement this way; operators can use it to look inside:

  forgivectl netns-exec fgv-t1a2b3-leaf1 -- curl -s 127.0.0.1:9464/metrics

Needs root.`,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 && (args[0] == "-h" || args[0] == "--help") {
				return cmd.Help()
			}
			// Flag parsing is off so the command's own flags pass through:
			// --dry-run counts only before the "--".
			if args, dry := stripDryRun(args); dry {
				return dryNetnsExec(cmd.OutOrStdout(), args)
			}
			if len(args) < 3 || args[1] != "--" {
				return cli.Usage(errors.New("usage: forgivectl netns-exec NAMESPACE -- COMMAND [ARG...]"))
			}
			return netns.Exec(args[0], args[2:])
		},
	}
}

// stripDryRun removes --dry-run from the arguments before "--".
func stripDryRun(args []string) ([]string, bool) {
	out := make([]string, 0, len(args))
	dry := false
	for i, a := range args {
		if a == "--" {
			out = append(out, args[i:]...)
			break
		}
		if a == "--"+dryRunFlag {
			dry = true
			continue
		}
		out = append(out, a)
	}
	return out, dry
}
