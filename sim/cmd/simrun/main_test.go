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

// --workers plays a scenario on several goroutines to the outputs its file
// expects (--check fails on a difference), and the same run reports the
// same packet hops as on one.
func TestWorkersPlayTheSameOutputs(t *testing.T) {
	const file = "../../testdata/scenarios/fat-tree-k4-perm.txt"
	reports := map[string]string{}
	for _, w := range []string{"1", "3"} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"--quiet", "--check", "--workers", w, file}, &stdout, &stderr); code != cli.ExitOK {
			t.Fatalf("--workers %s: exit %d: %s%s", w, code, stdout.String(), stderr.String())
		}
		// the report's counts, without the wall times
		var counts []string
		for _, line := range strings.Split(stdout.String(), "\n") {
			if _, after, ok := strings.Cut(line, "data packets"); ok {
				counts = append(counts, strings.SplitN(after, ";", 2)[0])
			}
		}
		if len(counts) == 0 {
			t.Fatalf("--workers %s reported no run:\n%s", w, stdout.String())
		}
		reports[w] = strings.Join(counts, "\n")
	}
	if reports["1"] != reports["3"] {
		t.Errorf("one worker reported\n%s\nthree\n%s", reports["1"], reports["3"])
	}
}
