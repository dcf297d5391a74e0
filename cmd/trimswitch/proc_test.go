package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// These tests run the real binary, built once by TestMain, on loopback
// sockets.

var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "trimswitch-test")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "trimswitch")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building trimswitch:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// result is how a finished process ended.
type result struct {
	code   int
	stdout string
	stderr string
}

// runBinary runs trimswitch to completion (bounded by a minute).
func runBinary(t *testing.T, args ...string) result {
	t.Helper()
	cmd := exec.Command(binary, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(time.Minute, func() { _ = cmd.Process.Kill() })
	defer timer.Stop()
	err := cmd.Wait()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code: code, stdout: stdout.String(), stderr: stderr.String()}
}

// writeConfig writes a configuration file into the test's directory.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "switch.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// switchProc is a running trimswitch.
type switchProc struct {
	cmd     *exec.Cmd
	ports   map[string]netip.AddrPort // bound address of each port, from the ready line
	metrics string

	mu     sync.Mutex
	stderr strings.Builder
	exited chan struct{}
	result result
}

// readyLine is the part of the "ready" log line the tests read.
type readyLine struct {
	Msg     string   `json:"msg"`
	Ports   []string `json:"ports"`
	Metrics string   `json:"metrics"`
}

// startSwitch starts trimswitch on a configuration and waits (at most
// 10 s) for its "ready" line.
func startSwitch(t *testing.T, config string, args ...string) *switchProc {
	t.Helper()
	cmd := exec.Command(binary, append([]string{"--config", writeConfig(t, config)}, args...)...)
	pipe, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &switchProc{cmd: cmd, exited: make(chan struct{})}
	ready := make(chan readyLine, 1)
	go p.readLog(pipe, ready)
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.exited
		if t.Failed() {
			t.Logf("trimswitch stderr:\n%s", p.log())
		}
	})
	select {
	case r := <-ready:
		p.ports = parsePorts(t, r.Ports)
		p.metrics = r.Metrics
	case <-p.exited:
		t.Fatalf("trimswitch exited before ready: %+v\n%s", p.result, p.log())
	case <-time.After(10 * time.Second):
		t.Fatalf("trimswitch not ready after 10s:\n%s", p.log())
	}
	return p
}

// readLog keeps the log and reports the ready line; it ends when the
// process exits.
func (p *switchProc) readLog(r io.Reader, ready chan<- readyLine) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		p.mu.Lock()
		p.stderr.WriteString(line + "\n")
		p.mu.Unlock()
		var l readyLine
		if json.Unmarshal([]byte(line), &l) == nil && l.Msg == "ready" {
			ready <- l
		}
	}
	err := p.cmd.Wait()
	p.result.code = 0
	if ee, ok := err.(*exec.ExitError); ok {
		p.result.code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			p.result.code = -int(ws.Signal())
		}
	}
	p.result.stderr = p.log()
	close(p.exited)
}

func (p *switchProc) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// parsePorts reads "name=local>neighbor" entries.
func parsePorts(t *testing.T, entries []string) map[string]netip.AddrPort {
	t.Helper()
	ports := map[string]netip.AddrPort{}
	for _, e := range entries {
		name, rest, ok := strings.Cut(e, "=")
		local, _, ok2 := strings.Cut(rest, ">")
		ap, err := netip.ParseAddrPort(local)
		if !ok || !ok2 || err != nil {
			t.Fatalf("ready line port %q", e)
		}
		ports[name] = ap
	}
	return ports
}

// terminate sends SIGTERM and waits (at most 10 s) for the exit.
func (p *switchProc) terminate(t *testing.T) result {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		t.Fatalf("trimswitch still running 10s after SIGTERM:\n%s", p.log())
	}
	return p.result
}

// series is one scrape: "name{label="v",...}" -> value, labels sorted as
// the exposition format prints them.
type series map[string]float64

var seriesLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*(?:\{[^}]*\})?) (\S+)$`)

func scrape(t *testing.T, addr string) series {
	t.Helper()
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := client.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	s := series{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if m := seriesLine.FindStringSubmatch(sc.Text()); m != nil {
			v, err := strconv.ParseFloat(m[2], 64)
			if err == nil {
				s[m[1]] = v
			}
		}
	}
	return s
}

// sum adds the series of metric name whose labels contain every given
// `key="value"` pair.
func (s series) sum(name string, labels ...string) float64 {
	total := 0.0
	for k, v := range s {
		if !strings.HasPrefix(k, name+"{") && k != name {
			continue
		}
		match := true
		for _, l := range labels {
			if !strings.Contains(k, l) {
				match = false
			}
		}
		if match {
			total += v
		}
	}
	return total
}
