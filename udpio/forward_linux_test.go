package udpio

import (
	"context"
	"encoding/binary"
	"errors"
	"net"
	"testing"
	"time"
)

// The reference forwarder changes nothing but the destination: payload and
// TOS byte (DSCP and ECN) arrive as sent, datagrams too large for it are
// counted and dropped, and cancelling the context stops it cleanly.
func TestForwardKeepsPayloadAndTOS(t *testing.T) {
	sink := listen(t, "127.0.0.1:0", Options{})
	in := listen(t, "127.0.0.2:0", Options{})
	out := listen(t, "127.0.0.3:0", Options{})
	tx := listen(t, "127.0.0.4:0", Options{})

	ctx, cancel := context.WithCancel(context.Background())
	type result struct {
		st  ForwardStats
		err error
	}
	done := make(chan result)
	go func() {
		st, err := Forward(ctx, in, out, sink.LocalAddr())
		done <- result{st, err}
	}()

	oversized := Msg{Buf: make([]byte, ForwardBufSize+1), N: ForwardBufSize + 1, Addr: in.LocalAddr()}
	writeAllMsgs(t, tx, []Msg{oversized})
	const count, size = 20, 1000
	msgs := makeMsgs(count, size)
	numbered(msgs, size, in.LocalAddr())
	for i := range msgs {
		msgs[i].TOS = MakeTOS(byte(i), byte(i))
	}
	writeAllMsgs(t, tx, msgs)

	for _, m := range readN(t, sink, count, ForwardBufSize) {
		i := binary.BigEndian.Uint32(m.Buf)
		if m.N != size || m.TOS != MakeTOS(byte(i), byte(i)) || m.Addr != out.LocalAddr() {
			t.Errorf("datagram %d: N=%d TOS=%#x from %v; want %d, %#x, %v",
				i, m.N, m.TOS, m.Addr, size, MakeTOS(byte(i), byte(i)), out.LocalAddr())
		}
	}
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(guard):
		t.Fatal("Forward still running after cancel")
	}
	if r.err != nil {
		t.Fatalf("Forward returned %v after cancel, want nil", r.err)
	}
	want := ForwardStats{Packets: count, Bytes: count * size, Truncated: 1}
	if r.st != want {
		t.Fatalf("stats %+v, want %+v", r.st, want)
	}
}

func TestForwardStopsWhenInputCloses(t *testing.T) {
	in, err := Listen("127.0.0.2:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	out := listen(t, "127.0.0.3:0", Options{})
	done := make(chan error)
	go func() {
		_, err := Forward(context.Background(), in, out, out.LocalAddr())
		done <- err
	}()
	in.Close()
	select {
	case err := <-done:
		if !errors.Is(err, net.ErrClosed) {
			t.Fatalf("Forward returned %v, want net.ErrClosed", err)
		}
	case <-time.After(guard):
		t.Fatal("Forward still running after its input closed")
	}
}
