package trimswitchdrv

import (
	"context"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"go.uber.org/goleak"
	"go.uber.org/zap/zaptest"

	"github.com/forgive-emu/forgive/udpio"
	"github.com/forgive-emu/forgive/wire"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Every socket of these tests binds port 0 on 127.0.0.1, so tests running
// at the same time (here or in other packages) never collide.

func listen(t testing.TB) *udpio.Conn {
	t.Helper()
	c, err := udpio.Listen("127.0.0.1:0", udpio.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// twoPortYAML is a switch whose port "in" faces the sender and port "out"
// the receiver; host 2 is behind "out" and host 1 behind "in". extra is
// appended under defaults (indented by the caller).
func twoPortYAML(sender, receiver netip.AddrPort, defaults string, extra string) string {
	return fmt.Sprintf(`name: test
seed: 7
max_datagram: 2048
defaults:
%s
ports:
  - name: in
    local: 127.0.0.1:0
    neighbor: %v
  - name: out
    local: 127.0.0.1:0
    neighbor: %v
routes:
  - dst: [1]
    ports: [in]
  - dst: [2]
    ports: [out]
%s`, defaults, sender, receiver, extra)
}

const unshapedDefaults = `  rate: 0
  data_queue: 1MiB`

func parse(t testing.TB, doc string) *Config {
	t.Helper()
	cfg, err := ParseConfig([]byte(doc))
	if err != nil {
		t.Fatalf("config:\n%s\nerror: %v", doc, err)
	}
	return cfg
}

// running is a Driver whose Run goroutine the test stops.
type running struct {
	*Driver
	cancel context.CancelFunc
	done   chan error
}

func start(t testing.TB, cfg *Config) *running {
	t.Helper()
	d, err := Open(cfg, zaptest.NewLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	return run(t, d)
}

// run runs an opened Driver until the test ends.
func run(t testing.TB, d *Driver) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{Driver: d, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- d.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	for deadline := time.Now().Add(10 * time.Second); !d.Ready(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("Run not ready after 10s")
		}
	}
	return r
}

// stop ends Run and checks it returned nil; it is safe to call twice.
func (r *running) stop(t testing.TB) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of cancel")
	}
}

// dataPacket is DATA from host 1 to host 2 with PSN psn and n payload bytes.
func dataPacket(t testing.TB, psn uint32, n int) []byte {
	t.Helper()
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = byte(int(psn) + i)
	}
	b, err := wire.AppendData(nil, wire.DataFields{
		Src: 1, Dst: 2, Flow: 9, PSN: wire.PSN(psn), Msg: 1,
		Offset: psn * uint32(n), MsgLen: 1 << 30, Entropy: uint16(psn),
	}, payload)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// send writes each datagram with its TOS to dst.
func send(t testing.TB, c *udpio.Conn, dst netip.AddrPort, pkts [][]byte, tos []byte) {
	t.Helper()
	msgs := make([]udpio.Msg, len(pkts))
	for i, p := range pkts {
		msgs[i] = udpio.Msg{Buf: p, N: len(p), Addr: dst, TOS: tos[i]}
	}
	if _, err := c.WriteBatch(msgs); err != nil {
		t.Fatal(err)
	}
}

// received is one datagram the test receiver got.
type received struct {
	data []byte
	tos  byte
}

// receive reads until want datagrams arrived or nothing arrived for quiet.
func receive(t testing.TB, c *udpio.Conn, want int, quiet time.Duration) []received {
	t.Helper()
	msgs := make([]udpio.Msg, c.BatchSize())
	for i := range msgs {
		msgs[i].Buf = make([]byte, 9216)
	}
	var got []received
	for len(got) < want {
		n, err := c.ReadBatchUntil(msgs, time.Now().Add(quiet))
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		for _, m := range msgs[:n] {
			got = append(got, received{data: append([]byte(nil), m.Payload()...), tos: m.TOS})
		}
	}
	return got
}
