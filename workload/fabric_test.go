package workload

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/lab/launch"
)

// The tests against real daemons start one trimswitch with a port per
// host and one forgived per host, on loopback addresses of their own.

var (
	binsOnce sync.Once
	bins     map[string]string
	binsErr  error
)

func binaries(t *testing.T) map[string]string {
	t.Helper()
	if testing.Short() {
		t.Skip("starts real daemons; skipped with -short")
	}
	binsOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		// FORGIVE_BIN_DIR runs prebuilt binaries; otherwise they are built
		// from this source tree.
		bins, binsErr = launch.Binaries(ctx, os.Getenv("FORGIVE_BIN_DIR"), "forgived", "trimswitch")
	})
	if binsErr != nil {
		t.Fatal(binsErr)
	}
	return bins
}

// fabricSeq gives each fabric its own 127.A.B.0/24; A depends on the pid,
// so concurrent test binaries do not collide either.
var fabricSeq atomic.Int32

// fabricOpts shapes the switch and the daemons.
type fabricOpts struct {
	rate      string // every link; default 200Mbps
	dataQueue int    // bytes per switch port; default 64 KiB
	cc        string // dcqcn (default) or none
	forgive   bool
	pHigh     float64 // default 0.1
	failAfter string  // default 5s: a loaded machine can stall a daemon for seconds
}

// fabric is a star: one switch, n hosts, and a test client per host.
type fabric struct {
	t       *testing.T
	dir     string
	net     string // "127.A.B."
	n       int
	o       fabricOpts
	group   *launch.Group
	clients []*hostapi.Client
}

func newFabric(t *testing.T, n int, o fabricOpts) *fabric {
	t.Helper()
	bins := binaries(t)
	if o.rate == "" {
		o.rate = "200Mbps"
	}
	if o.dataQueue == 0 {
		o.dataQueue = 64 << 10
	}
	if o.cc == "" {
		o.cc = "dcqcn"
	}
	if o.pHigh == 0 {
		o.pHigh = 0.1
	}
	if o.failAfter == "" {
		o.failAfter = "5s"
	}
	f := &fabric{t: t, dir: t.TempDir(), n: n, o: o,
		net: fmt.Sprintf("127.%d.%d.", 200+os.Getpid()%50, fabricSeq.Add(1))}
	specs := []launch.Spec{f.switchSpec(bins["trimswitch"])}
	for h := 1; h <= n; h++ {
		specs = append(specs, f.hostSpec(bins["forgived"], h))
	}
	t.Cleanup(f.dumpLogs) // after the fabric stopped: cleanups run last first
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	g, err := launch.Start(ctx, specs, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	f.group = g
	t.Cleanup(func() {
		if err := g.Stop(10 * time.Second); err != nil {
			t.Errorf("stopping the fabric: %v", err)
		}
	})
	for h := 1; h <= n; h++ {
		c, err := hostapi.Dial(f.socket(h))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		f.clients = append(f.clients, c)
	}
	return f
}

// ranks puts rank i on host i+1.
func (f *fabric) ranks() []Rank {
	out := make([]Rank, f.n)
	for i, c := range f.clients {
		out[i] = Rank{Client: c, Host: hostapi.HostID(i + 1)}
	}
	return out
}

func (f *fabric) addr(last, port int) string { return fmt.Sprintf("%s%d:%d", f.net, last, port) }

func (f *fabric) socket(h int) string { return filepath.Join(f.dir, fmt.Sprintf("host%d.sock", h)) }

func (f *fabric) logFile(name string) io.Writer {
	w, err := os.Create(filepath.Join(f.dir, name+".log"))
	if err != nil {
		f.t.Fatal(err)
	}
	f.t.Cleanup(func() { w.Close() })
	return w
}

// dumpLogs shows the end of every process's log when the test failed.
func (f *fabric) dumpLogs() {
	if !f.t.Failed() {
		return
	}
	names, _ := filepath.Glob(filepath.Join(f.dir, "*.log"))
	for _, name := range names {
		b, err := os.ReadFile(name)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		from := max(0, len(lines)-15)
		for i, l := range lines { // a crash: its message and the top of its stack
			if strings.HasPrefix(l, "panic:") {
				from = i
				break
			}
		}
		f.t.Logf("%s:\n%s", filepath.Base(name), strings.Join(lines[from:min(len(lines), from+15)], "\n"))
	}
}

func (f *fabric) write(name, text string) string {
	path := filepath.Join(f.dir, name)
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		f.t.Fatal(err)
	}
	return path
}

// switchSpec: ECN marks from a quarter of the data queue, always above
// three quarters; a full queue trims (NDP style).
func (f *fabric) switchSpec(bin string) launch.Spec {
	var b strings.Builder
	q := f.o.dataQueue
	fmt.Fprintf(&b, "name: sw\nseed: 1\nmetrics: %s\nlog_level: warn\n", f.addr(250, 9464))
	fmt.Fprintf(&b, `defaults:
  rate: %s
  delay: 5us
  data_queue: %d
  ecn: {kmin: %d, kmax: %d, pmax: 0.2}
  trim: ndp
ports:
`, f.o.rate, q, q/4, 3*q/4)
	for h := 1; h <= f.n; h++ {
		fmt.Fprintf(&b, "  - {name: h%d, local: %q, neighbor: %q}\n", h, f.addr(100+h, 4793), f.addr(h, 4793))
	}
	b.WriteString("routes:\n")
	for h := 1; h <= f.n; h++ {
		fmt.Fprintf(&b, "  - {dst: [%d], ports: [h%d]}\n", h, h)
	}
	path := f.write("switch.yaml", b.String())
	return launch.Spec{Name: "switch", Path: bin, Args: []string{"--config", path},
		Log: f.logFile("switch"), Ready: launch.HTTPReady("http://" + f.addr(250, 9464) + "/ready")}
}

func (f *fabric) hostSpec(bin string, h int) launch.Spec {
	cfg := fmt.Sprintf(`host: %d
name: host%d
listen: %q
switch: %q
socket: %q
log_level: warn
line_rate: %s
cc: %s
fail_after: %s
seed: %d
reliability: {window: 64KiB, rto_low: 2ms, rto_high: 8ms}
forgive: {enabled: %v, p_high: %g}
`, h, h, f.addr(h, 4793), f.addr(100+h, 4793), f.socket(h), f.o.rate, f.o.cc, f.o.failAfter, h, f.o.forgive, f.o.pHigh)
	name := fmt.Sprintf("host%d", h)
	path := f.write(name+".yaml", cfg)
	return launch.Spec{Name: name, Path: bin, Args: []string{"--config", path},
		Log: f.logFile(name), Ready: launch.HostAPIReady(f.socket(h))}
}
