package forgivedrv

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/udpio"
)

func TestMain(m *testing.M) {
	if sock := os.Getenv(childSocketEnv); sock != "" {
		os.Exit(childDial(sock)) // a non-root client, started by the tests below
	}
	if sock := os.Getenv(childSquatEnv); sock != "" {
		os.Exit(childSquat(sock)) // a non-root client taking flow 1 (ownership_test.go)
	}
	goleak.VerifyTestMain(m)
}

// A daemon serves the host API, and on shutdown fails outstanding work
// with a clear status, removes its socket and leaves no goroutine behind.
func TestShutdownFailsOutstandingWork(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "d.sock")
	net := fmt.Sprintf("127.%d.250.", 100+os.Getpid()%100)
	cfg, err := ParseConfig([]byte(fmt.Sprintf("host: 1\nlisten: %s1:4793\nswitch: %s2:4793\nsocket: %s\nline_rate: 100Mbps\n", net, net, sock)))
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()

	c, err := hostapi.Dial(sock)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	defer c.Close()
	bg := context.Background()
	st, err := c.Status(bg)
	if err != nil || st.HostID != 1 || st.Backend["cc"] != "dcqcn" {
		t.Fatalf("status %+v, %v", st, err)
	}
	r, err := c.RegisterMemory(bg, 4096)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := c.CreateFlow(bg, hostapi.FlowSpec{Flow: 9, Peer: 2, Class: hostapi.ClassOther}); err != nil {
		t.Fatal(err)
	}
	if err := c.PostRecv(bg, hostapi.RecvReq{Flow: 9, Region: r.ID(), Length: 4096, WRID: 42}); err != nil {
		t.Fatal(err)
	}
	// A bad request gets an error reply and the daemon keeps serving.
	if err := c.PostSend(bg, hostapi.SendReq{Flow: 9, Region: r.ID(), Offset: 4000, Length: 4096, WRID: 1}); err == nil {
		t.Fatal("an out-of-bounds send was accepted")
	}
	if _, err := c.Status(bg); err != nil {
		t.Fatalf("daemon stopped serving after a bad request: %v", err)
	}

	cancel()
	pctx, pcancel := context.WithTimeout(bg, 30*time.Second)
	defer pcancel()
	comp, err := c.Poll(pctx)
	if err != nil {
		t.Fatalf("no completion for the outstanding receive at shutdown: %v", err)
	}
	if comp.WRID != 42 || comp.Status != hostapi.StatusError || !strings.Contains(comp.Err, "destroyed") {
		t.Fatalf("completion %+v, want WR 42 failed with a clear status", comp)
	}
	select {
	case err := <-ran:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after cancel")
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket file left behind: %v", err)
	}
}

// /ready answers 503 until the daemon forwards and 200 while it does;
// /metrics and /healthz are served beside it, on the address MetricsAddr
// reports (port 0 resolved); Ready is false again once Run returns.
func TestMetricsReady(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "d.sock")
	net := fmt.Sprintf("127.%d.251.", 100+os.Getpid()%100)
	cfg, err := ParseConfig([]byte(fmt.Sprintf("host: 1\nname: h1\nlisten: %s1:4793\nswitch: %s2:4793\nsocket: %s\nmetrics: %s1:0\nline_rate: 100Mbps\n", net, net, sock, net)))
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if d.Ready() || d.MetricsAddr() != "" {
		t.Fatalf("before Run: ready %v, metrics %q", d.Ready(), d.MetricsAddr())
	}
	rec := httptest.NewRecorder()
	d.serveReady(rec, httptest.NewRequest("GET", "/ready", nil))
	if rec.Code != http.StatusServiceUnavailable {
		t.Fatalf("/ready before Run: %d %q, want 503", rec.Code, rec.Body.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
		if d.Ready() {
			t.Error("Ready after Run returned")
		}
	}()
	deadline := time.Now().Add(30 * time.Second) // a bound on the wait, not an assertion on time
	for !d.Ready() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if !d.Ready() {
		t.Fatal("the daemon never became ready")
	}
	addr := d.MetricsAddr()
	if addr == "" || strings.HasSuffix(addr, ":0") {
		t.Fatalf("metrics address %q", addr)
	}
	for path, want := range map[string]string{"/ready": "ready\n", "/healthz": "ok\n"} {
		code, body := httpGet(t, "http://"+addr+path)
		if code != http.StatusOK || body != want {
			t.Errorf("%s: %d %q, want 200 %q", path, code, body, want)
		}
	}
	// A flow's counters carry its class.
	c, err := hostapi.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.CreateFlow(context.Background(), hostapi.FlowSpec{Flow: 9, Peer: 2, Class: hostapi.ClassGradient}); err != nil {
		t.Fatal(err)
	}
	code, body := httpGet(t, "http://"+addr+"/metrics")
	for _, want := range []string{`forgived_host{counter="rx_packets",host="h1"}`,
		`forgived_flow{class="gradient",counter="forgiven_bytes",flow="9",host="h1",peer="2"}`} {
		if code != http.StatusOK || !strings.Contains(body, want) {
			t.Errorf("/metrics: %d, no %s:\n%s", code, want, body)
		}
	}
}

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 30 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// The NIC socket holds a peer's whole window: its buffers are
// socket_buffer, or twice the reliability window and at least 4 MiB. Linux
// reports twice what was asked for (its bookkeeping half).
func TestSocketBufferHoldsTheWindow(t *testing.T) {
	net := fmt.Sprintf("127.%d.251.", 100+os.Getpid()%100)
	for i, c := range []struct {
		extra string
		want  int
	}{
		{"", 4 << 20},
		{"reliability: {window: 4MiB}\n", 8 << 20},
		{"reliability: {window: 4MiB}\nsocket_buffer: 1MiB\n", 1 << 20},
	} {
		sock := filepath.Join(t.TempDir(), "d.sock")
		cfg, err := ParseConfig([]byte(fmt.Sprintf("host: 1\nlisten: %s%d:4793\nswitch: %s200:4793\nsocket: %s\nline_rate: 100Mbps\n%s",
			net, i+1, net, sock, c.extra)))
		if err != nil {
			t.Fatal(err)
		}
		d, err := New(cfg, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		recv, send, err := d.conn.SocketBuffers()
		d.conn.Close()
		d.srv.Close()
		if err != nil || recv != 2*c.want || send != 2*c.want {
			t.Errorf("%q: socket buffers %d and %d (%v), want %d each", c.extra, recv, send, err, 2*c.want)
		}
	}
}

// What the kernel drops at a full NIC socket, before the loop reads it, is
// the host counter socket_drops.
func TestSocketDropsAreAHostCounter(t *testing.T) {
	net := fmt.Sprintf("127.%d.252.", 100+os.Getpid()%100)
	sock := filepath.Join(t.TempDir(), "d.sock")
	cfg, err := ParseConfig([]byte(fmt.Sprintf("host: 1\nlisten: %s1:4793\nswitch: %s2:4793\nsocket: %s\nline_rate: 100Mbps\nsocket_buffer: 64KiB\n",
		net, net, sock)))
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer d.srv.Close()
	defer d.conn.Close()
	src, err := udpio.Listen(net+"2:4793", udpio.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	msgs := make([]udpio.Msg, 200) // 800 KiB: more than the buffer holds, and the loop does not run
	for i := range msgs {
		msgs[i] = udpio.Msg{Buf: make([]byte, 4096), N: 4096, Addr: d.conn.LocalAddr()}
	}
	if n, err := src.WriteBatch(msgs); n != len(msgs) || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	got := HostCounters(d.eng.Stats(), d.loopStats()).Map()["socket_drops"]
	if got == 0 || got > uint64(len(msgs)) {
		t.Fatalf("socket_drops = %d after %d datagrams into a 64 KiB buffer nobody read", got, len(msgs))
	}
}
