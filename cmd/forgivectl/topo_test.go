package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/forgive-emu/forgive/forgivedrv"
	"github.com/forgive-emu/forgive/lab"
	"github.com/forgive-emu/forgive/lab/fabric"
	"github.com/forgive-emu/forgive/lab/netns"
	"github.com/forgive-emu/forgive/lab/topo"
	"github.com/forgive-emu/forgive/profiles"
	"github.com/forgive-emu/forgive/topologies"
)

// Started as lab --jobs starts a worker, the test binary is forgivectl's
// lab-worker and runs no test.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == lab.WorkerArg {
		os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
	}
	if os.Getenv(asMainEnv) == "1" { // forgivectl itself, signals and all
		main()
	}
	code := m.Run()
	if err := netns.CheckNoneLeft(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root: run the tests as root (CI does) to create fabrics")
	}
}

// forgivectl runs the command in-process and returns its exit code and
// output.
func forgivectl(t *testing.T, args ...string) (int, string) {
	t.Helper()
	var out bytes.Buffer
	code := run(context.Background(), args, &out, &out)
	return code, out.String()
}

// topo up creates the fabric and says how to start it, topo status shows
// it, topo down removes it with its configurations.
func TestTopoUpStatusDown(t *testing.T) {
	needRoot(t)
	id := netns.NewRunID()
	prefix := topo.RunPrefix(id)
	dir := filepath.Join(t.TempDir(), "fabric")
	t.Cleanup(func() { _, _ = netns.Cleanup(prefix) })

	code, out := forgivectl(t, "topo", "up", "leaf-spine-2x4-2spines", "--ranks", "4", "--id", id, "--dir", dir)
	if code != 0 {
		t.Fatalf("topo up: exit %d\n%s", code, out)
	}
	for _, want := range []string{prefix + "spine2", "leaf1/up2", "10.77.128.5/30",
		"forgivectl netns-exec " + prefix + "host4 -- forgived --config " + dir + "/host4.yaml"} {
		if !strings.Contains(out, want) {
			t.Errorf("topo up output lacks %q:\n%s", want, out)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "leaf1.yaml")); err != nil {
		t.Error(err)
	}
	// Sealed by default, with the fabric's own key: mode 0600 in its
	// directory, named by every host's file, and said in the output.
	key := filepath.Join(dir, fabric.KeyName)
	if fi, err := os.Stat(key); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the fabric's key %s: %v, mode %v; want mode 0600", key, err, fi)
	}
	if !strings.Contains(out, "security: every packet but PAUSE sealed for domain 1 with a fresh key, "+key) {
		t.Errorf("topo up does not say the fabric is sealed:\n%s", out)
	}
	checkSealed(t, dir, key)

	code, out = forgivectl(t, "topo", "status", "--json")
	var st struct {
		Namespaces []netns.Namespace `json:"namespaces"`
	}
	if err := json.Unmarshal([]byte(out), &st); code != 0 || err != nil {
		t.Fatalf("topo status --json: exit %d, %v\n%s", code, err, out)
	}
	ours := 0
	for _, ns := range st.Namespaces {
		if strings.HasPrefix(ns.Name, prefix) {
			ours++
		}
	}
	if ours != 8 {
		t.Errorf("status lists %d of the fabric's 8 namespaces", ours)
	}
	if code, out = forgivectl(t, "topo", "status"); code != 0 || !strings.Contains(out, prefix+"leaf2") {
		t.Errorf("topo status: exit %d\n%s", code, out)
	}

	code, out = forgivectl(t, "topo", "down", "--id", id, "--dir", dir)
	if code != 0 || !strings.Contains(out, "removed 8 namespaces") {
		t.Fatalf("topo down: exit %d\n%s", code, out)
	}
	if left, _ := netns.Names(prefix); len(left) != 0 {
		t.Errorf("namespaces left: %v", left)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("configuration directory left: %v", err)
	}
}

// checkSealed checks that every host file of the fabric in dir seals for
// one domain with key, which is a well-formed key file (key "" : that no
// host file seals).
func checkSealed(t *testing.T, dir, key string) {
	t.Helper()
	hosts, _ := filepath.Glob(filepath.Join(dir, "host*.yaml"))
	if len(hosts) == 0 {
		t.Fatalf("no host files in %s", dir)
	}
	for _, h := range hosts {
		b, err := os.ReadFile(h)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := forgivedrv.ParseConfig(b)
		if err != nil {
			t.Fatalf("%s: %v", h, err)
		}
		d := cfg.Security.Domains
		if key == "" {
			if len(d) != 0 {
				t.Errorf("%s seals with --seal off: %+v", h, d)
			}
			continue
		}
		if len(d) != 1 || d[0].KeyFile != key || d[0].ID != topo.SealDomain {
			t.Errorf("%s: security domains %+v, want one with key file %s", h, d, key)
			continue
		}
		if _, err := cfg.Keyring(); err != nil {
			t.Errorf("%s: the key does not load: %v", h, err)
		}
	}
}

// topo up --seal off writes no key and no host file seals, and says so.
func TestTopoUpSealOff(t *testing.T) {
	needRoot(t)
	id := netns.NewRunID()
	prefix := topo.RunPrefix(id)
	dir := filepath.Join(t.TempDir(), "fabric")
	t.Cleanup(func() { _, _ = netns.Cleanup(prefix) })
	code, out := forgivectl(t, "topo", "up", "leaf-spine-2x4-2spines", "--ranks", "4", "--id", id, "--dir", dir, "--seal", "off")
	if code != 0 {
		t.Fatalf("topo up --seal off: exit %d\n%s", code, out)
	}
	if !strings.Contains(out, "security: off (--seal off)") {
		t.Errorf("topo up --seal off does not say the packets travel plain:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dir, fabric.KeyName)); !os.IsNotExist(err) {
		t.Errorf("--seal off wrote a key: %v", err)
	}
	checkSealed(t, dir, "")
	if code, out = forgivectl(t, "topo", "down", "--id", id, "--dir", dir); code != 0 {
		t.Fatalf("topo down: exit %d\n%s", code, out)
	}
}

// A crashed run leaves its namespaces, a daemon still running in one, and
// a veth in the caller's namespace; topo down removes all of it.
func TestTopoDownRemovesACrashedRun(t *testing.T) {
	needRoot(t)
	id := netns.NewRunID()
	prefix := topo.RunPrefix(id)
	t.Cleanup(func() { _, _ = netns.Cleanup(prefix) })
	tp, err := topo.OpenTopology(topologies.Files, "star-8")
	if err != nil {
		t.Fatal(err)
	}
	prof, err := topo.OpenProfile(profiles.Files, topo.DefaultProfile)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := topo.Place(tp, prof, topo.PlaceOptions{Ranks: 2, Dir: t.TempDir(), Network: topo.Namespaces, RunID: id})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := netns.Create(plan.Netns); err != nil { // and then the run crashed
		t.Fatal(err)
	}
	daemon := exec.Command("sleep", "60")
	if err := netns.Do(plan.Hosts[0].Netns, daemon.Start); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- daemon.Wait() }()
	stray := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: prefix + "zza"}, PeerName: prefix + "zzb"}
	if err := netlink.LinkAdd(stray); err != nil {
		t.Fatal(err)
	}

	code, out := forgivectl(t, "topo", "down", "--id", id, "--dir", filepath.Join(t.TempDir(), "none"))
	if code != 0 || !strings.Contains(out, "removed 3 namespaces, 2 stray veths, 1 processes") {
		t.Fatalf("topo down: exit %d\n%s", code, out)
	}
	select {
	case <-exited:
	case <-time.After(2 * time.Minute): // a hang guard: the kill is already sent
		t.Fatal("the crashed run's daemon still runs")
	}
	names, _ := netns.Names(prefix)
	links, _ := netns.RootLinks(prefix)
	if len(names)+len(links) != 0 {
		t.Errorf("left: namespaces %v, veths %v", names, links)
	}
}

func TestTopoUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"topo", "down"},
		{"topo", "down", "--all", "--id", "abc"},
		{"topo", "down", "--id", "Not/An-Id"},
		{"topo", "down", "no-such-topology"},
		{"topo", "up"},
		{"netns-exec", "fgv-x-host1", "sleep", "1"},
		{"netns-exec"},
	} {
		if code, out := forgivectl(t, args...); code != 2 {
			t.Errorf("%v: exit %d, want 2 (usage)\n%s", args, code, out)
		}
	}
}

// Only fabric names are ever entered.
func TestNetnsExecRefusesOtherNamespaces(t *testing.T) {
	code, out := forgivectl(t, "netns-exec", "default", "--", "true")
	if code != 1 || !strings.Contains(out, "fgv-") {
		t.Errorf("exit %d\n%s", code, out)
	}
	if code, out := forgivectl(t, "netns-exec", "--help"); code != 0 || !strings.Contains(out, "NAMESPACE -- COMMAND") {
		t.Errorf("netns-exec --help: exit %d\n%s", code, out)
	}
}

// asMainEnv set to 1 makes the test binary forgivectl's main, for the
// tests that signal it.
const asMainEnv = "FORGIVECTL_TEST_AS_MAIN"

// topo up --start stopped by SIGINT (Ctrl-C) or SIGTERM (systemd, kill,
// a container's stop) removes what topo down removes: the daemons, the
// veths, the namespaces and the configuration directory with its key.
func TestTopoStartCleansUpOnSignals(t *testing.T) {
	needRoot(t)
	bins := t.TempDir()
	build := exec.Command("go", "build", "-o", bins+"/", "./cmd/forgived", "./cmd/trimswitch", "./cmd/forgivectl")
	build.Dir = "../.."
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			id := netns.NewRunID()
			prefix := topo.RunPrefix(id)
			dir := filepath.Join("/run/forgive", id) // topo up's default
			t.Cleanup(func() { _, _ = netns.Cleanup(prefix); _ = os.RemoveAll(dir) })
			cmd := exec.Command(os.Args[0], "topo", "up", "star-8", "--ranks", "2", "--start", "--id", id, "--bin-dir", bins)
			cmd.Env = append(os.Environ(), asMainEnv+"=1")
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			running := make(chan string, 1)
			go func() {
				var seen strings.Builder
				buf := make([]byte, 4096)
				for {
					n, err := stdout.Read(buf)
					seen.Write(buf[:n])
					if strings.Contains(seen.String(), "to stop and remove the fabric") {
						running <- seen.String()
						_, _ = io.Copy(io.Discard, stdout)
						break
					}
					if err != nil {
						running <- ""
						break
					}
				}
				exited <- cmd.Wait()
			}()
			// A hang guard, not a verdict: a fabric of two hosts and a
			// switch starts in seconds on a loaded machine.
			select {
			case out := <-running:
				if out == "" {
					t.Fatalf("topo up --start ended before the fabric ran: %v\n%s", <-exited, stderr.String())
				}
				if _, err := os.Stat(filepath.Join(dir, fabric.KeyName)); err != nil {
					t.Fatalf("the running fabric's key: %v\n%s", err, out)
				}
			case <-time.After(3 * time.Minute):
				_ = cmd.Process.Kill()
				t.Fatalf("no fabric after 3 minutes:\n%s", stderr.String())
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("topo up --start after %v: %v\n%s", sig, err, stderr.String())
				}
			case <-time.After(3 * time.Minute):
				_ = cmd.Process.Kill()
				t.Fatalf("still running 3 minutes after %v:\n%s", sig, stderr.String())
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s after %v: %v, want it removed with its key", dir, sig, err)
			}
			names, _ := netns.Names(prefix)
			links, _ := netns.RootLinks(prefix)
			if len(names)+len(links) != 0 {
				t.Errorf("left after %v: namespaces %v, veths %v", sig, names, links)
			}
		})
	}
}

// topo down removes a fabric directory holding what topo up and the
// fabric's daemons wrote, a sealing daemon's start file (SOCKET.start)
// included, and leaves one holding anything else in place.
func TestRemoveConfigDirTakesStartFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "fabric")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"host1.yaml", "host1.sock.start", fabric.KeyName} {
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "notes.txt"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := removeConfigDir(dir); err == nil || !strings.Contains(err.Error(), "notes.txt") {
		t.Fatalf("a directory holding notes.txt: %v, want it left in place", err)
	}
	if err := os.Remove(filepath.Join(dir, "notes.txt")); err != nil {
		t.Fatal(err)
	}
	if err := removeConfigDir(dir); err != nil {
		t.Fatalf("a fabric directory with a start file: %v", err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the directory is still there: %v", err)
	}
}
