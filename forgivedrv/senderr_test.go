package forgivedrv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/sys/unix"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/udpio"
)

// A switch address the kernel refuses to send to (the loopback's
// broadcast address, with SO_BROADCAST cleared: EACCES; Go sets it on
// every UDP socket): every refused
// datagram is counted in send_errors, the first refusal of each second is
// logged at warn with the error, not one line a packet, and the daemon
// keeps serving.
func TestRefusedSendsAreCountedAndLoggedOnceASecond(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "d.sock")
	listen := fmt.Sprintf("127.%d.249.1:0", 100+os.Getpid()%100)
	cfg, err := ParseConfig([]byte(fmt.Sprintf("host: 1\nlisten: %s\nswitch: 127.255.255.255:4793\nsocket: %s\nline_rate: 100Mbps\n"+
		"reliability: {rto_low: 1ms, rto_high: 2ms}\n", listen, sock)))
	if err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zap.InfoLevel)
	d, err := New(cfg, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	noBroadcast(t, d.conn)
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	c, err := hostapi.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	bg := context.Background()
	r, err := c.RegisterMemory(bg, 64<<10)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if err := c.CreateFlow(bg, hostapi.FlowSpec{Flow: 9, Peer: 2, Class: hostapi.ClassOther}); err != nil {
		t.Fatal(err)
	}
	if err := c.PostSend(bg, hostapi.SendReq{Flow: 9, Region: r.ID(), Length: 64 << 10, WRID: 1}); err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	var errs uint64
	for deadline := time.Now().Add(20 * time.Second); errs < 20; time.Sleep(5 * time.Millisecond) {
		ct, err := c.Counters(bg)
		if err != nil {
			t.Fatalf("the daemon stopped serving: %v", err)
		}
		errs = ct.Host.SendErrors
		if time.Now().After(deadline) {
			t.Fatalf("%d send errors after 20 s, want 20 or more", errs)
		}
	}
	took := time.Since(begin)
	warned := logs.FilterMessage("send failed").All()
	if len(warned) == 0 {
		t.Fatalf("%d refused sends, none logged", errs)
	}
	if most := int(took/time.Second) + 2; len(warned) > most || uint64(len(warned)) >= errs {
		t.Fatalf("%d refused sends in %v logged %d times, want at most %d (one a second)", errs, took, len(warned), most)
	}
	w := warned[0]
	if w.Level != zap.WarnLevel || !strings.Contains(fmt.Sprint(w.ContextMap()["error"]), "permission denied") ||
		w.ContextMap()["switch"] != "127.255.255.255:4793" {
		t.Fatalf("the warning is %v %v, want warn naming the switch and EACCES", w.Level, w.ContextMap())
	}
}

// noBroadcast clears SO_BROADCAST on c's socket.
func noBroadcast(t *testing.T, c *udpio.Conn) {
	t.Helper()
	var serr error
	if err := c.SyscallConn().Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 0)
	}); err != nil || serr != nil {
		t.Fatalf("clearing SO_BROADCAST: %v %v", err, serr)
	}
}
