package trimswitchdrv

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	"golang.org/x/sys/unix"

	"github.com/forgive-emu/forgive/udpio"
	"github.com/forgive-emu/forgive/wire"
)

// A neighbour the kernel refuses to send to (the loopback's broadcast
// address, with SO_BROADCAST cleared on the port's socket: EACCES; Go sets
// it on every UDP socket): every datagram for it is counted a send error
// of its port, the first refusal of each second is logged at warn, not
// one line a packet, and the switch keeps forwarding the other way. The
// log's clock is stopped, so every refusal falls in the same second,
// however slowly the test runs.
func TestRefusedSendsAreCountedAndLoggedOnceASecond(t *testing.T) {
	sender := listen(t)
	refused := netip.MustParseAddrPort("127.255.255.255:9")
	core, logs := observer.New(zap.InfoLevel)
	d, err := Open(parse(t, twoPortYAML(sender.LocalAddr(), refused, unshapedDefaults, "")), zap.New(core, zap.WithClock(stoppedClock{})))
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	if err := d.ports[1].conn.SyscallConn().Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_BROADCAST, 0)
	}); err != nil || serr != nil {
		t.Fatalf("clearing SO_BROADCAST: %v %v", err, serr)
	}
	r := run(t, d)
	const n = 40
	for i := range n { // one datagram a batch: each is its own send
		send(t, sender, r.LocalAddr(0), [][]byte{dataPacket(t, uint32(i), 1000)}, []byte{udpio.ECT0})
	}
	var errs uint64
	for deadline := time.Now().Add(10 * time.Second); errs < n; time.Sleep(time.Millisecond) {
		errs = r.Snapshot().Ports[1].SendErrors
		if time.Now().After(deadline) {
			t.Fatalf("port out counted %d send errors of %d datagrams", errs, n)
		}
	}
	warned := logs.FilterMessage("send failed").All()
	if len(warned) != 1 {
		t.Fatalf("%d refused sends in one second of the log's clock logged %d times, want once", errs, len(warned))
	}
	w := warned[0].ContextMap()
	if warned[0].Level != zap.WarnLevel || w["port"] != "out" || w["neighbor"] != refused.String() ||
		!strings.Contains(fmt.Sprint(w["error"]), "permission denied") {
		t.Fatalf("the warning is %v %v, want warn naming port out, its neighbour and EACCES", warned[0].Level, w)
	}
	// The other way still forwards: host 1 is behind port in.
	back, err := wire.AppendData(nil, wire.DataFields{Src: 2, Dst: 1, Flow: 9, MsgLen: 4, Entropy: 1}, []byte("back"))
	if err != nil {
		t.Fatal(err)
	}
	send(t, sender, r.LocalAddr(0), [][]byte{back}, []byte{udpio.ECT0})
	got := receive(t, sender, 1, 2*time.Second)
	if len(got) != 1 || !bytes.Equal(got[0].data, back) {
		t.Fatalf("after the refusals, the switch returned %d datagrams to host 1, want the one sent", len(got))
	}
}

// stoppedClock is a log clock that never moves.
type stoppedClock struct{}

func (stoppedClock) Now() time.Time                         { return time.Unix(1_800_000_000, 0) }
func (stoppedClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }
