package udpio

import (
	"errors"
	"os"
	"testing"
	"time"
)

// A receiver that does not read while its buffer is full loses datagrams
// in the kernel: SocketDrops counts exactly those, so that every datagram
// sent is either read or counted.
func TestSocketDropsCountsWhatAFullBufferLost(t *testing.T) {
	rx := listen(t, "127.0.0.1:0", Options{RecvBuffer: 8 << 10})
	tx := listen(t, "127.0.0.1:0", Options{})
	if d, err := rx.SocketDrops(); err != nil || d != 0 {
		t.Fatalf("a new socket: SocketDrops() = %d, %v; want 0, nil", d, err)
	}
	const sent = 200
	msgs := makeMsgs(sent, 1000)
	numbered(msgs, 1000, rx.LocalAddr())
	if n, err := tx.WriteBatch(msgs); n != sent || err != nil {
		t.Fatalf("WriteBatch = %d, %v", n, err)
	}
	// Loopback delivers during the send; read what the buffer kept.
	read := 0
	buf := makeMsgs(64, 2000)
	for {
		if err := rx.SetReadDeadline(time.Now().Add(100 * time.Millisecond)); err != nil {
			t.Fatal(err)
		}
		n, err := rx.ReadBatch(buf)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		read += n
	}
	drops, err := rx.SocketDrops()
	if err != nil {
		t.Fatal(err)
	}
	if drops == 0 || read+int(drops) != sent {
		t.Fatalf("read %d, SocketDrops %d; want some dropped, and read + dropped = %d sent", read, drops, sent)
	}
}

func TestSocketDropsAfterClose(t *testing.T) {
	c, err := Listen("127.0.0.1:0", Options{})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	if _, err := c.SocketDrops(); err == nil {
		t.Fatal("SocketDrops on a closed Conn: no error")
	}
}
