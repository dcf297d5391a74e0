package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/internal/cli"
)

const good = `host: 1
name: host1
listen: 127.0.0.1:4793
switch: 127.0.0.101:4793
socket: /tmp/host1.sock
metrics: 127.0.0.1:9465
log_level: info
line_rate: 100Mbps
seed: 1
`

func check(t *testing.T, doc string, flags ...string) (int, string, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "host.yaml")
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"--check", "--config", path}, flags...), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestCheckAcceptsAGoodFile(t *testing.T) {
	if code, stdout, stderr := check(t, good); code != cli.ExitOK || !strings.Contains(stdout, ": ok") {
		t.Fatalf("exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
}

// --check refuses everything start-up refuses, names the field, and exits 2.
func TestCheckRefusesWhatStartUpRefuses(t *testing.T) {
	cases := []struct {
		name, from, to string
		flags          []string
		want           string
	}{
		{"log level", "log_level: info", "log_level: loud", nil, `log_level: "loud"`},
		{"metrics", "metrics: 127.0.0.1:9465", "metrics: 'bad addr'", nil, `metrics: "bad addr": want host:port`},
		{"ipv6 listen", "listen: 127.0.0.1:4793", `listen: "[::1]:4793"`, nil, "listen: [::1]:4793: want an IPv4 address"},
		{"fractional seed", "seed: 1\n", "seed: 1.5\n", nil, `seed: "1.5": want an integer`},
		{"log level flag", "", "", []string{"--log-level", "loud"}, `log_level: "loud"`},
		{"metrics flag", "", "", []string{"--metrics", "nowhere"}, `metrics: "nowhere": want host:port`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := strings.Replace(good, c.from, c.to, 1)
			if c.from != "" && doc == good {
				t.Fatalf("test bug: %q not in the file", c.from)
			}
			code, _, stderr := check(t, doc, c.flags...)
			if code != cli.ExitUsage || !strings.Contains(stderr, c.want) {
				t.Fatalf("exit %d, want %d; stderr %q does not contain %q", code, cli.ExitUsage, stderr, c.want)
			}
		})
	}
}

// A stray argument is a usage error (exit 2), and an error carries the
// program's name once: the library's own errors are prefixed with their
// package (forgivedrv), not with the program's.
func TestUsageErrorsAndOnePrefix(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"extra"}, &stdout, &stderr); code != cli.ExitUsage ||
		!strings.Contains(stderr.String(), `unknown command "extra"`) {
		t.Errorf("an argument: exit %d, stderr %q; want %d", code, stderr.String(), cli.ExitUsage)
	}
	code, _, errs := check(t, strings.Replace(good, "line_rate: 100Mbps", "line_rate: 0", 1))
	if code != cli.ExitUsage || strings.Count(errs, "forgived:") != 1 || !strings.HasPrefix(errs, "forgived: ") ||
		!strings.Contains(errs, "forgivedrv: bad config: line_rate") {
		t.Errorf("bad config: exit %d, stderr %q; want exit %d and one forgived: prefix", code, errs, cli.ExitUsage)
	}
}
