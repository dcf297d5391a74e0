package main

import (
	"github.com/forgive-emu/forgive/internal/cli"
	"os"
	"strings"
	"testing"
)

const example = "testdata/two-port.yaml"

func TestHelpListsTheFlags(t *testing.T) {
	r := runBinary(t, "--help")
	if r.code != 0 {
		t.Fatalf("--help exited %d: %s", r.code, r.stderr)
	}
	for _, flag := range []string{"--config", "--metrics", "--log-level", "--capture", "--capture-ports", "--check"} {
		if !strings.Contains(r.stdout, flag) {
			t.Errorf("--help does not mention %s:\n%s", flag, r.stdout)
		}
	}
}

func TestCheckAcceptsTheExample(t *testing.T) {
	r := runBinary(t, "--check", "--config", example)
	if r.code != 0 || !strings.Contains(r.stdout, `ok: switch "edge", 2 ports, 2 routes`) {
		t.Fatalf("--check exited %d\nstdout: %s\nstderr: %s", r.code, r.stdout, r.stderr)
	}
}

// A bad file, or a flag that makes it bad, names the field and exits 2
// without binding anything.
func TestBadConfigNamesTheFieldAndExitsNonZero(t *testing.T) {
	text, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	good := string(text)
	cases := []struct {
		name, from, to string
		args           []string
		want           []string
	}{
		{name: "unit", from: "rate: 500Mbps", to: "rate: 10Gbs",
			want: []string{`ports[1].rate: "10Gbs": unknown unit`}},
		{name: "unknown keys", from: "    neighbor: 127.0.0.3:4793", to: "    neighbour: 127.0.0.3:4793\n    colour: red",
			want: []string{"ports[1].neighbour: unknown field", "ports[1].colour: unknown field"}},
		{name: "route to no port", from: "ports: [h2]", to: "ports: [h9]",
			want: []string{`routes[1].ports[0]: no port is named "h9"`, "ports[1].neighbor: missing"}},
		{name: "yaml syntax", from: "routes:", to: "routes: [",
			want: []string{"yaml: line"}},
		{name: "queue size", from: "data_queue: 256KiB", to: "data_queue: big",
			want: []string{`defaults.data_queue: "big": invalid number`}},
		{name: "capture port flag", args: []string{"--capture", "x.pcap", "--capture-ports", "h1,nope"},
			want: []string{`capture.ports[1]: no port is named "nope"`}},
		{name: "log level flag", args: []string{"--log-level", "chatty"},
			want: []string{`log_level: "chatty"`}},
		// What start-up would refuse or truncate, the check refuses.
		{name: "fractional seed", from: "seed: 1\n", to: "seed: 1.5\n",
			want: []string{`seed: "1.5": want an integer`}},
		{name: "batch", from: "name: edge", to: "name: edge\nbatch: 5000",
			want: []string{"batch: 5000: want 0 (the default) to 1024"}},
		{name: "metrics", from: "metrics: 127.0.0.1:9464", to: "metrics: 'bad addr'",
			want: []string{`metrics: "bad addr": want host:port`}},
		{name: "log level", from: "log_level: info", to: "log_level: loud",
			want: []string{`log_level: "loud"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := good
			if c.from != "" {
				doc = strings.Replace(good, c.from, c.to, 1)
				if doc == good {
					t.Fatalf("test bug: %q not in the example", c.from)
				}
			}
			if c.name == "route to no port" {
				doc = strings.Replace(doc, "    neighbor: 127.0.0.3:4793\n", "", 1)
			}
			args := append([]string{"--check", "--config", writeConfig(t, doc)}, c.args...)
			r := runBinary(t, args...)
			if r.code != cli.ExitUsage {
				t.Fatalf("exit code %d, want %d; stderr: %s", r.code, cli.ExitUsage, r.stderr)
			}
			for _, w := range c.want {
				if !strings.Contains(r.stderr, w) {
					t.Errorf("stderr does not name %q:\n%s", w, r.stderr)
				}
			}
		})
	}
}

func TestMissingConfigFlagOrFile(t *testing.T) {
	if r := runBinary(t); r.code != cli.ExitUsage || !strings.Contains(r.stderr, "--config is required") {
		t.Errorf("no flags: exit %d, %s", r.code, r.stderr)
	}
	if r := runBinary(t, "--config", "testdata/none.yaml"); r.code != cli.ExitUsage || !strings.Contains(r.stderr, "no such file") {
		t.Errorf("missing file: exit %d, %s", r.code, r.stderr)
	}
	if r := runBinary(t, "--bogus"); r.code != cli.ExitUsage || !strings.Contains(r.stderr, "unknown flag") {
		t.Errorf("unknown flag: exit %d, %s", r.code, r.stderr)
	}
}

// A stray argument is a usage error (exit 2), and an error carries the
// program's name once.
func TestUsageErrorsAndOnePrefix(t *testing.T) {
	if r := runBinary(t, "extra"); r.code != cli.ExitUsage || !strings.Contains(r.stderr, `unknown command "extra"`) {
		t.Errorf("an argument: exit %d, %s", r.code, r.stderr)
	}
	text, err := os.ReadFile(example)
	if err != nil {
		t.Fatal(err)
	}
	doc := strings.Replace(string(text), "rate: 500Mbps", "rate: 10Gbs", 1)
	r := runBinary(t, "--check", "--config", writeConfig(t, doc))
	if r.code != cli.ExitUsage || strings.Count(r.stderr, "trimswitch:") != 1 || !strings.HasPrefix(r.stderr, "trimswitch: ") {
		t.Errorf("bad config: exit %d, stderr %q; want exit %d and one trimswitch: prefix", r.code, r.stderr, cli.ExitUsage)
	}
}
