package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/internal/cli"
)

// Usage errors exit 2, as flag errors do, and say what was wrong: an
// unknown command, a missing or extra argument. No command at all prints
// the help.
func TestUsageErrorsExitTwo(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `unknown command "bogus" for "forgivectl"`},
		{[]string{"statu"}, "did you mean status?"},
		{[]string{"keygen"}, "usage: forgivectl keygen FILE"},
		{[]string{"keygen", "a", "b"}, "accepts 1 arg(s), received 2"},
		{[]string{"topo", "bogus"}, `unknown command "bogus" for "forgivectl topo"`},
		{[]string{"status", "extra"}, "usage: forgivectl status"},
		{[]string{"send"}, "usage: forgivectl send"},
		{[]string{"--bogus"}, "unknown flag: --bogus"},
	} {
		code, out, errs := runCtl(c.args...)
		if code != cli.ExitUsage || !strings.Contains(errs, c.want) || strings.Count(errs, "forgivectl:") != 1 {
			t.Errorf("forgivectl %v: exit %d, stderr %q, stdout %q; want exit %d, one prefix, and %q", c.args, code, errs, out, cli.ExitUsage, c.want)
		}
	}
	for _, args := range [][]string{{"--help"}, {}, {"topo"}} {
		if code, out, errs := runCtl(args...); code != cli.ExitOK || !strings.Contains(out, "Available Commands") {
			t.Errorf("forgivectl %v: exit %d, %q %q; want the help", args, code, out, errs)
		}
	}
}

// Without a daemon on the socket, the commands that talk to one say which
// socket they tried and how to name another or start one, and exit 1.
func TestNoDaemonNamesTheSocketAndTheWayOut(t *testing.T) {
	sock := filepath.Join(t.TempDir(), "none.sock")
	for _, cmd := range []string{"status", "counters", "steps"} {
		code, _, errs := runCtl(cmd, "--socket", sock)
		if code != cli.ExitFailed {
			t.Errorf("%s: exit %d, want %d", cmd, code, cli.ExitFailed)
		}
		for _, want := range []string{sock, "no forgived listens there", "--socket PATH", "forgived --config FILE"} {
			if !strings.Contains(errs, want) {
				t.Errorf("%s: stderr %q does not say %q", cmd, errs, want)
			}
		}
	}
}
