package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
)

// 10,000 malformed host-API requests and a flood of garbage datagrams
// leave the daemon serving: a transfer afterwards still works, and the
// garbage is counted.
func TestGarbageLeavesDaemonServing(t *testing.T) {
	s := newStar(t, 2, "200Mbps", nil)
	junk := make([]byte, 256)
	conn, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: s.socket(1), Net: "unixpacket"})
	if err != nil {
		t.Fatal(err)
	}
	sent := 0
	for i := 0; i < 10000; i++ {
		_, _ = rand.Read(junk[:1+i%255])
		if i%3 == 0 { // a valid magic and version with a garbage body
			copy(junk, "FGV\x01")
		}
		if _, err := conn.Write(junk[:1+i%255]); err != nil {
			// A framing error closes this connection: open another.
			conn.Close()
			if conn, err = net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: s.socket(1), Net: "unixpacket"}); err != nil {
				t.Fatalf("after %d malformed requests the daemon no longer accepts connections: %v", i, err)
			}
			continue
		}
		sent++
	}
	conn.Close()

	udp, err := net.Dial("udp4", s.addr(1, 4793))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 1000; i++ {
		_, _ = rand.Read(junk)
		_, _ = udp.Write(junk[:1+i%255])
	}
	udp.Close()

	c1, c2 := s.client(1), s.client(2)
	x := post(t, c2, c1, 2, 1, 26, hostapi.ClassOther, 4<<20, 0)
	if comp := awaitKind(t, c1, hostapi.KindRecv, time.Minute); comp.Status != hostapi.StatusOK || !bytes.Equal(x.dst, x.src) {
		t.Fatalf("transfer after the garbage: %+v", comp)
	}
	ct, err := c1.Counters(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// Sent from the test's own address, not the switch's: refused as
	// foreign before anything decodes them.
	if ct.Host.ForeignSource+ct.Host.Malformed == 0 {
		t.Fatalf("garbage datagrams were not counted: %v", ct.Host)
	}
	t.Logf("%d malformed requests written; %d datagrams refused as foreign, %d malformed", sent, ct.Host.ForeignSource, ct.Host.Malformed)
}

// forgivectl send and recv move a file between two hosts through the
// fabric and verify its SHA-256.
func TestCLISendRecv(t *testing.T) {
	s := newStar(t, 2, "200Mbps", nil)
	s.startCLITransfer(2, 1, 3<<20+17).finish()
	st, err := exec.Command(bins["forgivectl"], "status", "--socket", s.socket(1)).CombinedOutput()
	if err != nil || !strings.Contains(string(st), "host") {
		t.Fatalf("status: %v\n%s", err, st)
	}
}

// An idle daemon sleeps: its CPU time over a quiet second is reported (and
// must stay well below a busy loop's 100 %).
func TestIdleDaemonSleeps(t *testing.T) {
	s := newStar(t, 1, "200Mbps", nil)
	pid := s.group.Pids()[1]
	before := cpuTicks(t, pid)
	time.Sleep(2 * time.Second)
	used := cpuTicks(t, pid) - before // clock ticks, 100 per second
	t.Logf("idle forgived used %d ticks (%.1f%% of a core) over 2 s", used, float64(used)/2)
	if used > 20 {
		t.Fatalf("idle daemon used %d%% of a core", used/2)
	}
}

func cpuTicks(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	utime, _ := strconv.Atoi(f[11])
	stime, _ := strconv.Atoi(f[12])
	return utime + stime
}
