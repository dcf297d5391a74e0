package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/internal/cli"
)

// Usage errors exit 2, with one prefix: no scenario, an unknown flag, a
// scenario file that is not there.
func TestUsageErrorsExitTwo(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "usage: simrun"},
		{[]string{"--bogus", "x"}, "unknown flag: --bogus"},
		{[]string{"no/such/scenario.txt"}, "no/such/scenario.txt"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), c.args, &stdout, &stderr)
		if code != cli.ExitUsage || !strings.Contains(stderr.String(), c.want) || strings.Count(stderr.String(), "simrun:") != 1 {
			t.Errorf("simrun %v: exit %d, stderr %q; want exit %d, one prefix and %q", c.args, code, stderr.String(), cli.ExitUsage, c.want)
		}
	}
}
