package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// UsageArgs makes every argument error of cmd and its subcommands a usage
// error (exit status 2), as flag errors are: a wrong argument count or an
// unknown subcommand. Call it once the command tree is built.
func UsageArgs(cmd *cobra.Command) {
	if check := cmd.Args; check != nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if err := check(c, args); err != nil {
				return Usage(fmt.Errorf("%w (usage: %s)", err, c.UseLine()))
			}
			return nil
		}
	}
	if cmd.HasSubCommands() && cmd.Run == nil && cmd.RunE == nil {
		cmd.Args = func(c *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
			if s := c.SuggestionsFor(args[0]); len(s) > 0 {
				msg += "; did you mean " + strings.Join(s, " or ") + "?"
			}
			return Usage(fmt.Errorf("%s (see %s --help)", msg, c.CommandPath()))
		}
		// Given no command, it prints its help, as cobra does.
		cmd.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	}
	for _, sub := range cmd.Commands() {
		UsageArgs(sub)
	}
}
