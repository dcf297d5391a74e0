package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/lab/launch"
)

var bins map[string]string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "forgive-integration-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	bins, err = launch.Binaries(ctx, "", "forgived", "trimswitch", "forgivectl")
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// fabricSeq gives every fabric of a test run its own 127.A.B.0/24, so
// fabrics never collide, also across concurrent test binaries.
var fabricSeq atomic.Int32

// hostOpts tunes one daemon's config.
type hostOpts struct {
	cc        string // dcqcn (default) or none
	forgive   bool
	pHigh     float64
	p         *float64 // the forgiveness draw; nil: the default, 1
	failAfter string
	rto       string // "low/high"; default 2ms/8ms
	// spuriousRTO turns on reliability.spurious_rto.
	spuriousRTO bool
	extra       string // more YAML lines for the daemon's file
}

// portOpts tunes the switch port of one host.
type portOpts struct {
	loss    float64 // the egress link's loss fault
	capture bool    // the switch writes the port's traffic to capture.pcap in the fabric's directory
}

// star is one trimswitch with a port per host, and one forgived per host.
type star struct {
	t       *testing.T
	dir     string
	net     string // "127.A.B."
	n       int
	rate    string
	opts    map[uint16]hostOpts
	ports   map[uint16]portOpts
	group   *launch.Group
	swStats string // switch metrics URL
}

func newStar(t *testing.T, n int, rate string, opts map[uint16]hostOpts) *star {
	t.Helper()
	return newStarPorts(t, n, rate, opts, nil)
}

// newStarPorts is newStar with per-port switch options.
func newStarPorts(t *testing.T, n int, rate string, opts map[uint16]hostOpts, ports map[uint16]portOpts) *star {
	t.Helper()
	seq := fabricSeq.Add(1)
	s := &star{t: t, dir: t.TempDir(), n: n, rate: rate, opts: opts, ports: ports,
		net: fmt.Sprintf("127.%d.%d.", 100+os.Getpid()%100, seq)}
	specs := []launch.Spec{s.switchSpec()}
	for h := 1; h <= n; h++ {
		specs = append(specs, s.hostSpec(uint16(h)))
	}
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	g, err := launch.Start(ctx, specs, 2*time.Minute) // hang guards: a loaded machine starts daemons slowly
	if err != nil {
		t.Fatal(err)
	}
	s.group = g
	t.Cleanup(func() {
		if err := g.Stop(10 * time.Second); err != nil {
			t.Errorf("stopping the fabric: %v", err)
		}
	})
	return s
}

// cliTransfer is a random file moved from host from to host to with
// forgivectl send and recv on flow 7, as a user runs them.
type cliTransfer struct {
	t        *testing.T
	s        *star
	from, to uint16
	in, out  string
	data     []byte
	recv     *exec.Cmd
	recvOut  bytes.Buffer
}

// startCLITransfer writes a file of size random bytes and starts
// forgivectl recv for it at host to.
func (s *star) startCLITransfer(from, to uint16, size int) *cliTransfer {
	t := s.t
	t.Helper()
	dir := t.TempDir()
	x := &cliTransfer{t: t, s: s, from: from, to: to,
		in: filepath.Join(dir, "in.bin"), out: filepath.Join(dir, "out.bin"), data: make([]byte, size)}
	_, _ = rand.Read(x.data)
	if err := os.WriteFile(x.in, x.data, 0o644); err != nil {
		t.Fatal(err)
	}
	x.recv = exec.Command(bins["forgivectl"], "recv", "--socket", s.socket(to), "--peer", strconv.Itoa(int(from)),
		"--flow", "7", "--out", x.out, "--wait", "1m")
	x.recv.Stdout, x.recv.Stderr = &x.recvOut, &x.recvOut
	if err := x.recv.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = x.recv.Process.Kill(); _ = x.recv.Wait() })
	return x
}

// finish runs forgivectl send at host from and checks that recv verified
// the file's SHA-256 and wrote exactly the bytes sent.
func (x *cliTransfer) finish() {
	t := x.t
	t.Helper()
	send := exec.Command(bins["forgivectl"], "send", "--socket", x.s.socket(x.from), "--peer", strconv.Itoa(int(x.to)),
		"--flow", "7", "--wait", "1m", x.in)
	if b, err := send.CombinedOutput(); err != nil {
		t.Fatalf("send: %v\n%s", err, b)
	}
	if err := x.recv.Wait(); err != nil {
		t.Fatalf("recv: %v\n%s", err, x.recvOut.String())
	}
	got, err := os.ReadFile(x.out)
	if err != nil || !bytes.Equal(got, x.data) || !strings.Contains(x.recvOut.String(), "SHA-256 verified") {
		t.Fatalf("the received file is not the one sent (err %v): %s", err, x.recvOut.String())
	}
}

// kill kills one of the fabric's processes with SIGKILL and waits for the
// launcher to report its death.
func (s *star) kill(name string) {
	s.t.Helper()
	if err := s.group.Kill(name); err != nil {
		s.t.Fatal(err)
	}
	select {
	case err := <-s.group.Died():
		if !errors.Is(err, launch.ErrDied) {
			s.t.Fatalf("unexpected report: %v", err)
		}
	case <-time.After(30 * time.Second):
		s.t.Fatalf("the launcher did not report %s's death", name)
	}
}

func (s *star) addr(last int, port int) string { return fmt.Sprintf("%s%d:%d", s.net, last, port) }

// socket returns the host-API socket of host h.
func (s *star) socket(h uint16) string { return filepath.Join(s.dir, fmt.Sprintf("host%d.sock", h)) }

func (s *star) logFile(name string) io.Writer {
	f, err := os.Create(filepath.Join(s.dir, name+".log"))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { f.Close() })
	return f
}

func (s *star) switchSpec() launch.Spec {
	var b strings.Builder
	fmt.Fprintf(&b, "name: sw\nseed: 1\nmetrics: %s\nlog_level: warn\n", s.addr(250, 9464))
	var captured []string
	for h := 1; h <= s.n; h++ {
		if s.ports[uint16(h)].capture {
			captured = append(captured, fmt.Sprintf("h%d", h))
		}
	}
	if len(captured) > 0 {
		fmt.Fprintf(&b, "capture: {file: %q, ports: [%s]}\n", filepath.Join(s.dir, "capture.pcap"), strings.Join(captured, ", "))
	}
	fmt.Fprintf(&b, `defaults:
  rate: %s
  delay: 5us
  data_queue: 64KiB
  ecn: {kmin: 16KiB, kmax: 48KiB, pmax: 0.2}
  trim: ndp
ports:
`, s.rate)
	for h := 1; h <= s.n; h++ {
		faults := ""
		if po := s.ports[uint16(h)]; po.loss > 0 {
			faults = fmt.Sprintf(", faults: {loss: %g}", po.loss)
		}
		fmt.Fprintf(&b, "  - {name: h%d, local: %q, neighbor: %q, host: %d%s}\n", h, s.addr(100+h, 4793), s.addr(h, 4793), h, faults)
	}
	b.WriteString("routes:\n")
	for h := 1; h <= s.n; h++ {
		fmt.Fprintf(&b, "  - {dst: [%d], ports: [h%d]}\n", h, h)
	}
	path := filepath.Join(s.dir, "switch.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		s.t.Fatal(err)
	}
	s.swStats = "http://" + s.addr(250, 9464) + "/metrics"
	return launch.Spec{Name: "switch", Path: bins["trimswitch"], Args: []string{"--config", path},
		Log: s.logFile("switch"), Ready: launch.HTTPReady("http://" + s.addr(250, 9464) + "/ready")}
}

func (s *star) hostConfig(h uint16) string {
	o := s.opts[h]
	if o.cc == "" {
		o.cc = "dcqcn"
	}
	if o.pHigh == 0 {
		o.pHigh = 0.1
	}
	if o.failAfter == "" {
		o.failAfter = "5s" // a loaded machine can stall a daemon for a second
	}
	if o.rto == "" {
		o.rto = "2ms/8ms"
	}
	rtoLow, rtoHigh, _ := strings.Cut(o.rto, "/")
	p := ""
	if o.p != nil {
		p = fmt.Sprintf(", p: %g", *o.p)
	}
	return fmt.Sprintf(`host: %d
name: host%d
listen: %q
switch: %q
socket: %q
metrics: %q
log_level: warn
line_rate: %s
cc: %s
fail_after: %s
seed: %d
reliability: {window: 64KiB, rto_low: %s, rto_high: %s, spurious_rto: %v}
forgive: {enabled: %v, p_high: %g%s}
%s`, h, h, s.addr(int(h), 4793), s.addr(100+int(h), 4793), s.socket(h), s.addr(int(h), 9465),
		s.rate, o.cc, o.failAfter, h, rtoLow, rtoHigh, o.spuriousRTO, o.forgive, o.pHigh, p, o.extra)
}

func (s *star) hostSpec(h uint16) launch.Spec {
	path := filepath.Join(s.dir, fmt.Sprintf("host%d.yaml", h))
	if err := os.WriteFile(path, []byte(s.hostConfig(h)), 0o644); err != nil {
		s.t.Fatal(err)
	}
	name := fmt.Sprintf("host%d", h)
	return launch.Spec{Name: name, Path: bins["forgived"], Args: []string{"--config", path},
		Log: s.logFile(name), Ready: launch.HostAPIReady(s.socket(h))}
}

// client connects the test, as an application, to host h.
func (s *star) client(h uint16) *hostapi.Client {
	s.t.Helper()
	c, err := hostapi.Dial(s.socket(h))
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { c.Close() })
	return c
}

// metric sums the samples of a Prometheus text exposition whose name and
// labels contain every given fragment.
func metric(t *testing.T, url string, fragments ...string) float64 {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	sum := 0.0
lines:
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		for _, f := range fragments {
			if !strings.Contains(line[:sp], f) {
				continue lines
			}
		}
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

// settle polls cond every 20 ms until it holds or 30 s have passed: on a
// loaded machine the daemons and switches may take seconds to read what
// was sent to them. It decides nothing; the caller's checks that follow
// do.
func settle(cond func() bool) {
	for deadline := time.Now().Add(30 * time.Second); !cond() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
}

// createFlow creates flow id to peer at client c, of class tensor.
func createFlow(ctx context.Context, t *testing.T, c *hostapi.Client, id hostapi.FlowID, peer hostapi.HostID) {
	t.Helper()
	if err := c.CreateFlow(ctx, hostapi.FlowSpec{Flow: id, Peer: peer, Class: hostapi.ClassTensor}); err != nil {
		t.Fatal(err)
	}
}

// restartHost kills host h with SIGKILL, starts it again and returns a
// client of its new start.
func (s *star) restartHost(ctx context.Context, h uint16) *hostapi.Client {
	s.t.Helper()
	s.kill(fmt.Sprintf("host%d", h))
	if err := s.group.Add(ctx, s.hostSpec(h), 20*time.Second); err != nil {
		s.t.Fatal(err)
	}
	return s.client(h)
}

// postRecvs posts n zeroed receives of size bytes on flow id at client c,
// with work-request ids wrid, wrid+1, ..., and returns their regions.
func postRecvs(ctx context.Context, t *testing.T, c *hostapi.Client, id hostapi.FlowID, n, size int, wrid uint64) []*hostapi.Region {
	t.Helper()
	var rs []*hostapi.Region
	for i := range n {
		rr, err := c.RegisterMemory(ctx, size)
		if err != nil {
			t.Fatal(err)
		}
		clear(rr.Bytes())
		if err := c.PostRecv(ctx, hostapi.RecvReq{Flow: id, Region: rr.ID(), Length: uint64(size), WRID: wrid + uint64(i)}); err != nil {
			t.Fatal(err)
		}
		rs = append(rs, rr)
	}
	return rs
}
