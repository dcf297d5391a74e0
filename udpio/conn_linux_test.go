package udpio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"
)

// Every test below must leave no goroutine behind: in particular a reader
// unblocked by Close or Wake must have returned.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// guard bounds how long a test may wait on the network. It is a safety net
// that turns a hang into a failure with a message; no result depends on it.
const guard = 10 * time.Second

func listen(t testing.TB, addr string, opts Options) *Conn {
	t.Helper()
	c, err := Listen(addr, opts)
	if err != nil {
		t.Fatalf("Listen(%s): %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func makeMsgs(n, size int) []Msg {
	msgs := make([]Msg, n)
	for i := range msgs {
		msgs[i].Buf = make([]byte, size)
	}
	return msgs
}

// numbered fills msgs[i] with payload i (a big-endian uint32 padded to size)
// addressed to dst.
func numbered(msgs []Msg, size int, dst netip.AddrPort) {
	for i := range msgs {
		binary.BigEndian.PutUint32(msgs[i].Buf, uint32(i))
		msgs[i].N = size
		msgs[i].Addr = dst
	}
}

// readN reads until want datagrams have arrived and returns copies of them.
func readN(t testing.TB, c *Conn, want, bufSize int) []Msg {
	t.Helper()
	if err := c.SetReadDeadline(time.Now().Add(guard)); err != nil {
		t.Fatal(err)
	}
	var got []Msg
	msgs := makeMsgs(c.BatchSize(), bufSize)
	for len(got) < want {
		n, err := c.ReadBatch(msgs)
		if err != nil {
			t.Fatalf("ReadBatch after %d of %d datagrams: %v", len(got), want, err)
		}
		for _, m := range msgs[:n] {
			m.Buf = bytes.Clone(m.Buf[:m.N])
			got = append(got, m)
		}
	}
	return got
}

func writeAllMsgs(t testing.TB, c *Conn, msgs []Msg) {
	t.Helper()
	if n, err := c.WriteBatch(msgs); n != len(msgs) || err != nil {
		t.Fatalf("WriteBatch = %d, %v; want %d, nil", n, err, len(msgs))
	}
}

// "ECN and DSCP read and written per packet through control messages"
// (design brief, section 2). One batch carries every ECN codepoint under the
// DSCPs the project uses (CS0, AF11, AF31, EF for ACKs, CS6 for CNPs); the
// receiver must read back exactly the byte each datagram was sent with,
// which proves both the IP_TOS control message on sendmmsg and IP_RECVTOS.
func TestTOSRoundTripsPerPacketInOneBatch(t *testing.T) {
	rx := listen(t, "127.0.0.1:0", Options{})
	tx := listen(t, "127.0.0.2:0", Options{})
	var want []byte
	for _, dscp := range []byte{0, 10, 26, 46, 48} {
		for _, ecn := range []byte{NotECT, ECT1, ECT0, CE} {
			want = append(want, MakeTOS(dscp, ecn))
		}
	}
	msgs := makeMsgs(len(want), 64)
	numbered(msgs, 64, rx.LocalAddr())
	for i := range msgs {
		msgs[i].TOS = want[i]
	}
	writeAllMsgs(t, tx, msgs)

	got := readN(t, rx, len(want), 64)
	for _, m := range got {
		i := binary.BigEndian.Uint32(m.Buf)
		if int(i) >= len(want) {
			t.Fatalf("datagram with unknown index %d", i)
		}
		if m.TOS != want[i] {
			t.Errorf("datagram %d: TOS %#x (DSCP %d ECN %02b), sent %#x (DSCP %d ECN %02b)",
				i, m.TOS, DSCP(m.TOS), ECN(m.TOS), want[i], DSCP(want[i]), ECN(want[i]))
		}
		if m.Addr != tx.LocalAddr() {
			t.Errorf("datagram %d from %v, want %v", i, m.Addr, tx.LocalAddr())
		}
	}
}

// Loopback delivers a burst in order and recvmmsg hands it over in one call
// when the batch has room: the batch API must return several datagrams at
// once, each with its own length.
func TestReadBatchReturnsSeveralDatagrams(t *testing.T) {
	rx := listen(t, "127.0.0.1:0", Options{BatchSize: 16})
	tx := listen(t, "127.0.0.3:0", Options{})
	out := makeMsgs(8, 100)
	numbered(out, 100, rx.LocalAddr())
	for i := range out {
		out[i].N = 10 + i // distinct lengths
	}
	writeAllMsgs(t, tx, out)

	in := makeMsgs(16, 200)
	if err := rx.SetReadDeadline(time.Now().Add(guard)); err != nil {
		t.Fatal(err)
	}
	n, err := rx.ReadBatch(in)
	if err != nil {
		t.Fatal(err)
	}
	if n < 2 {
		t.Fatalf("ReadBatch returned %d datagram(s) of 8 queued; want a batch", n)
	}
	for i, m := range in[:n] {
		if m.N != 10+i || binary.BigEndian.Uint32(m.Buf) != uint32(i) || m.Truncated {
			t.Errorf("datagram %d: N=%d index=%d truncated=%v", i, m.N, binary.BigEndian.Uint32(m.Buf), m.Truncated)
		}
	}
}

// A datagram longer than the buffer offered for it is cut to the buffer and
// flagged (MSG_TRUNC in msg_flags); the next datagram in the same batch is
// unaffected.
func TestOversizedDatagramIsTruncatedAndFlagged(t *testing.T) {
	rx := listen(t, "127.0.0.1:0", Options{})
	tx := listen(t, "127.0.0.2:0", Options{})
	big := bytes.Repeat([]byte("0123456789"), 30)
	out := []Msg{
		{Buf: big, N: len(big), Addr: rx.LocalAddr()},
		{Buf: []byte("small"), N: 5, Addr: rx.LocalAddr()},
	}
	writeAllMsgs(t, tx, out)

	got := readN(t, rx, 2, 16)
	if !got[0].Truncated || got[0].N != 16 || !bytes.Equal(got[0].Buf, big[:16]) {
		t.Errorf("oversized: truncated=%v N=%d payload=%q; want true, 16, %q", got[0].Truncated, got[0].N, got[0].Buf, big[:16])
	}
	if got[1].Truncated || string(got[1].Buf) != "small" {
		t.Errorf("small: truncated=%v payload=%q", got[1].Truncated, got[1].Buf)
	}
}

// WriteBatch sends more messages than one sendmmsg carries by looping, and
// the datagrams arrive in order.
func TestWriteBatchLargerThanBatchSize(t *testing.T) {
	rx := listen(t, "127.0.0.1:0", Options{BatchSize: 4})
	tx := listen(t, "127.0.0.4:0", Options{BatchSize: 4})
	out := makeMsgs(11, 32)
	numbered(out, 32, rx.LocalAddr())
	writeAllMsgs(t, tx, out)
	for i, m := range readN(t, rx, 11, 32) {
		if got := binary.BigEndian.Uint32(m.Buf); got != uint32(i) {
			t.Fatalf("datagram %d carries index %d", i, got)
		}
	}
}

// A message WriteBatch cannot send stops the batch at that message: the ones
// before it are sent, the count says where it stopped, and nothing panics.
func TestWriteBatchStopsAtInvalidMessage(t *testing.T) {
	rx := listen(t, "127.0.0.1:0", Options{})
	tx := listen(t, "127.0.0.2:0", Options{})
	v6 := netip.MustParseAddrPort("[::1]:9")
	for name, bad := range map[string]Msg{
		"N past buffer":  {Buf: make([]byte, 4), N: 5, Addr: rx.LocalAddr()},
		"negative N":     {Buf: make([]byte, 4), N: -1, Addr: rx.LocalAddr()},
		"IPv6 address":   {Buf: make([]byte, 4), N: 4, Addr: v6},
		"no destination": {Buf: make([]byte, 4), N: 4},
	} {
		good := Msg{Buf: []byte("ok"), N: 2, Addr: rx.LocalAddr()}
		n, err := tx.WriteBatch([]Msg{good, bad, good})
		if n != 1 || !errors.Is(err, ErrInvalidMsg) {
			t.Errorf("%s: WriteBatch = %d, %v; want 1, ErrInvalidMsg", name, n, err)
		}
	}
	// Exactly one datagram per attempt reached the receiver.
	got := readN(t, rx, 4, 8)
	for _, m := range got {
		if string(m.Buf) != "ok" {
			t.Errorf("received %q", m.Buf)
		}
	}
	if n, _ := rx.ReadBatchUntil(makeMsgs(4, 8), aLongTimeAgo); n != 0 {
		t.Errorf("%d extra datagram(s) received", n)
	}
}

func TestCloseUnblocksReader(t *testing.T) {
	for _, until := range []bool{false, true} {
		rx, err := Listen("127.0.0.1:0", Options{})
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error)
		go func() {
			var err error
			if until {
				_, err = rx.ReadBatchUntil(makeMsgs(1, 8), time.Time{})
			} else {
				_, err = rx.ReadBatch(makeMsgs(1, 8))
			}
			done <- err
		}()
		if err := rx.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if !errors.Is(err, net.ErrClosed) {
				t.Errorf("until=%v: reader returned %v, want net.ErrClosed", until, err)
			}
		case <-time.After(guard):
			t.Fatalf("until=%v: reader still blocked after Close", until)
		}
	}
}

// The event loop's wake-up: a goroutine that queued work calls Wake, and the
// loop's ReadBatchUntil returns empty-handed even with no deadline.
func TestWakeUnblocksReadBatchUntil(t *testing.T) {
	rx := listen(t, "127.0.0.1:0", Options{})
	done := make(chan error)
	go func() {
		n, err := rx.ReadBatchUntil(makeMsgs(1, 8), time.Time{})
		if n != 0 && err == nil {
			err = errors.New("returned a datagram nobody sent")
		}
		done <- err
	}()
	rx.Wake()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("ReadBatchUntil after Wake: %v", err)
		}
	case <-time.After(guard):
		t.Fatal("ReadBatchUntil still blocked after Wake")
	}
	// The Conn still works, and the wake was consumed: the next call
	// waits for a datagram and gets it.
	tx := listen(t, "127.0.0.2:0", Options{})
	writeAllMsgs(t, tx, []Msg{{Buf: []byte("x"), N: 1, Addr: rx.LocalAddr()}})
	n, err := rx.ReadBatchUntil(makeMsgs(1, 8), time.Now().Add(guard))
	if n != 1 || err != nil {
		t.Fatalf("ReadBatchUntil after the wake = %d, %v; want 1, nil", n, err)
	}
}

// A Wake that comes before the loop blocks is not lost.
func TestWakeBeforeReadIsRemembered(t *testing.T) {
	rx := listen(t, "127.0.0.1:0", Options{})
	rx.Wake()
	n, err := rx.ReadBatchUntil(makeMsgs(1, 8), time.Now().Add(guard))
	if n != 0 || err != nil {
		t.Fatalf("ReadBatchUntil = %d, %v; want 0, nil", n, err)
	}
}

// A deadline that has passed means "the engine is due": ReadBatchUntil must
// return at once, but it must still hand over datagrams already queued, or a
// loop whose timers are always due would never read.
func TestReadBatchUntilPastDeadline(t *testing.T) {
	rx := listen(t, "127.0.0.1:0", Options{})
	msgs := makeMsgs(4, 8)
	if n, err := rx.ReadBatchUntil(msgs, aLongTimeAgo); n != 0 || err != nil {
		t.Fatalf("empty socket: ReadBatchUntil = %d, %v; want 0, nil", n, err)
	}
	tx := listen(t, "127.0.0.2:0", Options{})
	writeAllMsgs(t, tx, []Msg{{Buf: []byte("due"), N: 3, Addr: rx.LocalAddr()}})
	// Wait (bounded) until the datagram is queued, without consuming it.
	waitReadable(t, rx)
	n, err := rx.ReadBatchUntil(msgs, aLongTimeAgo)
	if n != 1 || err != nil || string(msgs[0].Payload()) != "due" {
		t.Fatalf("queued datagram: ReadBatchUntil = %d, %v, %q; want 1, nil, \"due\"", n, err, msgs[0].Payload())
	}
}

// waitReadable polls the socket until a datagram is queued.
func waitReadable(t *testing.T, c *Conn) {
	t.Helper()
	raw, err := c.udp.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var perr error
	err = raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		_, perr = unix.Poll(fds, int(guard/time.Millisecond))
	})
	if err != nil || perr != nil {
		t.Fatal(err, perr)
	}
}

func TestReadDeadlinePassesThrough(t *testing.T) {
	rx := listen(t, "127.0.0.1:0", Options{})
	if err := rx.SetReadDeadline(aLongTimeAgo); err != nil {
		t.Fatal(err)
	}
	_, err := rx.ReadBatch(makeMsgs(1, 8))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("ReadBatch past the deadline: %v, want os.ErrDeadlineExceeded", err)
	}
}

func TestListenRejectsIPv6(t *testing.T) {
	if c, err := Listen("[::1]:0", Options{}); err == nil {
		c.Close()
		t.Fatal("Listen on ::1 succeeded; the package is IPv4 only")
	}
}

// SO_REUSEADDR is off unless asked for: a second socket on a taken UDP port
// fails, while two sockets that both ask for it may share the port.
func TestReuseAddrOption(t *testing.T) {
	first := listen(t, "127.0.0.5:0", Options{})
	if c, err := Listen(first.LocalAddr().String(), Options{}); err == nil {
		c.Close()
		t.Fatal("second Listen on a taken port succeeded without ReuseAddr")
	}
	shared := listen(t, "127.0.0.5:0", Options{ReuseAddr: true})
	second := listen(t, shared.LocalAddr().String(), Options{ReuseAddr: true})
	if second.LocalAddr() != shared.LocalAddr() {
		t.Fatalf("shared port: %v vs %v", second.LocalAddr(), shared.LocalAddr())
	}
}

// As root SO_RCVBUFFORCE lifts the net.core.rmem_max ceiling; otherwise the
// kernel clamps the request. Either way the buffers are at least the default
// the kernel would have given.
func TestSocketBuffersAreSized(t *testing.T) {
	const want = 8 << 20
	c := listen(t, "127.0.0.1:0", Options{RecvBuffer: want, SendBuffer: want})
	recv, send, err := c.SocketBuffers()
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		// Linux doubles the value it stores (half is bookkeeping).
		if recv < 2*want || send < 2*want {
			t.Fatalf("as root: buffers %d/%d, want at least %d", recv, send, 2*want)
		}
		return
	}
	if recv <= 0 || send <= 0 {
		t.Fatalf("buffers %d/%d", recv, send)
	}
}

// The per-packet path allocates nothing once a Conn exists: buffers belong
// to the caller and the kernel-facing headers to the Conn.
func TestSteadyStateBatchesDoNotAllocate(t *testing.T) {
	rx := listen(t, "127.0.0.1:0", Options{})
	tx := listen(t, "127.0.0.2:0", Options{})
	const batch = 16
	out := makeMsgs(batch, 256)
	numbered(out, 256, rx.LocalAddr())
	in := makeMsgs(batch, 256)
	round := func() {
		if n, err := tx.WriteBatch(out); n != batch || err != nil {
			t.Fatalf("WriteBatch = %d, %v", n, err)
		}
		for got := 0; got < batch; {
			n, err := rx.ReadBatchUntil(in, time.Time{})
			if err != nil {
				t.Fatalf("ReadBatchUntil: %v", err)
			}
			got += n
		}
	}
	round() // warm the runtime poller and the sync.Pools of the net package
	if allocs := testing.AllocsPerRun(50, round); allocs != 0 {
		t.Fatalf("one write+read round of %d datagrams allocates %v times, want 0", batch, allocs)
	}
}
