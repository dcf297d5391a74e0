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

// Attack: "forgived takes PAUSE frames from any source and has no
// watchdog: 20 forged PAUSEs a second stopped a host's progress for 10 s".
// An on-path attacker forges the address of host 1's switch port, so the
// NIC's neighbour check lets its PAUSEs through (an off-path one is
// refused as foreign_source, TestForeignSourceRefused). Twenty PAUSEs a
// second, each for 65 ms of every class, would keep host 1 paused for
// good; the NIC's watchdog (100 ms) ends each endless pause and ignores
// PAUSE for its recovery time, so the transfer completes byte-exact
// within a small factor of the same transfer un-attacked, and the
// watchdog's work is counted.
func TestForgedPauseFloodBoundedByWatchdog(t *testing.T) {
	s := newStar(t, 2, "200Mbps", nil)
	c1, c2 := s.client(1), s.client(2)
	const size = 16 << 20
	base := timedTransfer(t, c1, c2, 31, size, nil)
	if v := hostValues(t, c1); v["pause_watchdog_fires"] != 0 || v["pauses_ignored"] != 0 {
		t.Fatalf("un-attacked host 1: %d watchdog fires, %d pauses ignored; want none", v["pause_watchdog_fires"], v["pauses_ignored"])
	}
	sp := newSpoofer(t, s.addr(101, 4793))
	pause := wire.AppendPause(nil, 0xff, 65535)
	var sent int
	attacked := timedTransfer(t, c1, c2, 32, size, func(stop <-chan struct{}) {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for range 600 { // 30 s at most
			if sp.send(s.addr(1, 4793), pause) != nil {
				return
			}
			sent++
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	v := hostValues(t, c1)
	t.Logf("un-attacked %v; attacked %v: %d forged PAUSEs sent, %d pauses taken, %d watchdog fires, %d ignored",
		base.Round(time.Millisecond), attacked.Round(time.Millisecond), sent, v["pauses"], v["pause_watchdog_fires"], v["pauses_ignored"])
	if v["pauses"] == 0 {
		t.Fatal("no forged PAUSE reached the NIC: the attack did not happen")
	}
	if attacked > 200*time.Millisecond && (v["pause_watchdog_fires"] == 0 || v["pauses_ignored"] == 0) {
		t.Errorf("%d watchdog fires, %d pauses ignored over %v of pausing: want the watchdog to end the pause", v["pause_watchdog_fires"], v["pauses_ignored"], attacked)
	}
	if attacked > 3*base+2*time.Second {
		t.Errorf("the attacked transfer took %v, the same un-attacked %v: more than 3x", attacked, base)
	}
}
