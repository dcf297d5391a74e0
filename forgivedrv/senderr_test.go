package forgivedrv

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sys/unix"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/udpio"
)

// A switch address the kernel refuses to send to (the loopback's
// broadcast address, with SO_BROADCAST cleared: EACCES; Go sets it on
// every UDP socket): every refused datagram is counted in send_errors,
// the first refusal of each second is logged at warn with the error, not
// one line a packet, and the daemon keeps serving. The log's clock is
// stopped, so every refusal falls in the same second, however slowly the
// test runs. The flow never fails (fail_after: 1h): the sender resends
// until the test has seen its 20 refusals, however many of the daemon's
// 2 s of default patience a loaded machine takes from it (it failed so
// at 19).
func TestRefusedSendsAreCountedAndLoggedOnceASecond(t *testing.T) {
	d, sock, logs := runDaemonTo(t, t.TempDir(), "127.255.255.255:4793", "reliability: {rto_low: 1ms, rto_high: 2ms}\nfail_after: 1h\n",
		zap.WithClock(stoppedClock{}))
	noBroadcast(t, d.conn)
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
	var errs uint64
	for deadline := time.Now().Add(5 * time.Minute); errs < 20; time.Sleep(5 * time.Millisecond) { // a hang guard
		ct, err := c.Counters(bg)
		if err != nil {
			t.Fatalf("the daemon stopped serving: %v", err)
		}
		errs = ct.Host.SendErrors
		if time.Now().After(deadline) {
			t.Fatalf("%d send errors after 5 minutes, want 20 or more", errs)
		}
	}
	warned := logs.FilterMessage("send failed").All()
	if len(warned) != 1 {
		t.Fatalf("%d refused sends in one second of the log's clock logged %d times, want once", errs, len(warned))
	}
	w := warned[0]
	if w.Level != zap.WarnLevel || !strings.Contains(fmt.Sprint(w.ContextMap()["error"]), "permission denied") ||
		w.ContextMap()["switch"] != "127.255.255.255:4793" {
		t.Fatalf("the warning is %v %v, want warn naming the switch and EACCES", w.Level, w.ContextMap())
	}
}

// stoppedClock is a log clock that never moves.
type stoppedClock struct{}

func (stoppedClock) Now() time.Time                         { return time.Unix(1_800_000_000, 0) }
func (stoppedClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

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
