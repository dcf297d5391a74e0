package forgivedrv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/forgive-emu/forgive/hostapi"
)

func TestMain(m *testing.M) {
	if sock := os.Getenv(childSocketEnv); sock != "" {
		os.Exit(childDial(sock)) // a non-root client, started by the tests below
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
