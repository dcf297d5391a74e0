package integration

import (
	"context"
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/wire"
)

// spoofer sends UDP datagrams with a forged source address and port, as
// an on-path attacker (or root on a fabric host) can: through a raw IPv4
// socket bound to the address it impersonates. The switch and forgived
// then see the datagram coming from the neighbour they trust, so only the
// checks behind the address check (source guard, flow tags, PSN window)
// stand in the way.
type spoofer struct {
	t    *testing.T
	conn *net.IPConn
	src  netip.AddrPort
}

// newSpoofer impersonates from (host:port). It needs CAP_NET_RAW: the
// test is skipped otherwise.
func newSpoofer(t *testing.T, from string) *spoofer {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("forging a UDP source address needs a raw socket (root, CAP_NET_RAW); CI runs as root")
	}
	src := netip.MustParseAddrPort(from)
	conn, err := net.ListenIP("ip4:udp", &net.IPAddr{IP: src.Addr().AsSlice()})
	if err != nil {
		t.Skipf("raw socket: %v", err)
	}
	// Nothing reads this socket: a tiny receive buffer keeps the copies
	// of loopback UDP traffic it is handed from piling up.
	_ = conn.SetReadBuffer(1)
	t.Cleanup(func() { conn.Close() })
	return &spoofer{t: t, conn: conn, src: src}
}

// send writes payload as a UDP datagram from the impersonated address to
// to (host:port). The UDP checksum is 0: none, as IPv4 allows.
func (sp *spoofer) send(to string, payload []byte) error {
	dst := netip.MustParseAddrPort(to)
	b := make([]byte, 8+len(payload))
	binary.BigEndian.PutUint16(b[0:], sp.src.Port())
	binary.BigEndian.PutUint16(b[2:], dst.Port())
	binary.BigEndian.PutUint16(b[4:], uint16(len(b)))
	copy(b[8:], payload)
	_, err := sp.conn.WriteToIP(b, &net.IPAddr{IP: dst.Addr().AsSlice()})
	return err
}

// flowTags returns flow id's tags as client c's daemon reports them: the
// values an on-path observer reads off the flow's packets. It waits for
// the handshake to bind the peer's tag.
func flowTags(t *testing.T, c *hostapi.Client, id hostapi.FlowID) (local, peer uint32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ct, err := c.Counters(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range ct.Flows {
			if f.Flow == id && f.PeerTag != 0 {
				return f.LocalTag, f.PeerTag
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("flow %d: no bound tags after 10 s", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// tagsTo returns the tags of a packet sent to host 2 on a flow whose tags
// at host 2 are local and peer.
func tagsTo(local, peer uint32) wire.Tags { return wire.Tags{Dst: local, Src: peer} }

// switchCounter returns the switch's counter metric with the given labels.
func (s *star) switchCounter(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	return metric(t, s.swStats, append([]string{name + "{"}, labels...)...)
}
