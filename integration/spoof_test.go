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
// refused as foreign_source, TestForeignSourceRefused). Fifty PAUSEs a
// second, each for 65 ms of every class, would keep host 1 paused for
// good; the NIC's watchdog (100 ms) ends each endless pause and ignores
// PAUSE for its recovery time, so the transfer completes byte-exact, the
// watchdog's work is counted, and no pause the NIC reports lasted longer
// than the watchdog's limit. The verdict is on what the NIC measures, not
// on how long the transfer took: on a loaded machine the attacker's and
// the daemons' timing varies, the watchdog's bound does not.
func TestForgedPauseFloodBoundedByWatchdog(t *testing.T) {
	const limit = 100 * time.Millisecond // forgived's default pfc watchdog
	s := newStar(t, 2, "200Mbps", nil)
	c1, c2 := s.client(1), s.client(2)
	const size = 16 << 20
	base := timedTransfer(t, c1, c2, 31, size, nil)
	if v := hostValues(t, c1); v["pause_watchdog_fires"] != 0 || v["pauses_ignored"] != 0 || v["paused_ns"] != 0 {
		t.Fatalf("un-attacked host 1: %d watchdog fires, %d pauses ignored, paused %v; want none",
			v["pause_watchdog_fires"], v["pauses_ignored"], time.Duration(v["paused_ns"]))
	}
	sp := newSpoofer(t, s.addr(101, 4793))
	pause := wire.AppendPause(nil, 0xff, 65535)
	var sent int
	// flood sends a PAUSE every 20 ms until stop is closed or n are sent.
	flood := func(stop <-chan struct{}, n int) {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for range n {
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
	}
	window := daemonClock(t, c1) // the PAUSEs reach host 1 after this
	attacked := timedTransfer(t, c1, c2, 32, size, func(stop <-chan struct{}) { flood(stop, 1500) })
	// A machine loaded enough to stall the attacker for 45 ms at every
	// PAUSE would break each pause before the watchdog's limit: flood on,
	// without a transfer, until the watchdog has fired (30 s at most).
	v := hostValues(t, c1)
	for range 30 {
		if v["pause_watchdog_fires"] > 0 {
			break
		}
		flood(nil, 50)
		v = hostValues(t, c1)
	}
	elapsed := daemonClock(t, c1) - window
	paused, longest := time.Duration(v["paused_ns"]), time.Duration(v["longest_pause_ns"])
	fires := v["pause_watchdog_fires"]
	t.Logf("un-attacked %v; attacked %v: %d forged PAUSEs sent, %d received, %d watchdog fires, %d ignored; paused %v in all, the longest %v, over %v",
		base.Round(time.Millisecond), attacked.Round(time.Millisecond), sent, v["pauses"], fires, v["pauses_ignored"],
		paused.Round(time.Millisecond), longest, elapsed.Round(time.Millisecond))
	if v["pauses"] == 0 {
		t.Fatal("no forged PAUSE reached the NIC: the attack did not happen")
	}
	if fires == 0 {
		t.Fatalf("%d PAUSEs of 65 ms every 20 ms, %v paused in all: the watchdog never fired", v["pauses"], paused)
	}
	// Each pause the watchdog ended lasted its limit, and none longer.
	if longest > limit {
		t.Errorf("a pause lasted %v: longer than the watchdog's %v", longest, limit)
	}
	if paused < limit {
		t.Errorf("paused %v in all over %d watchdog fires: less than the first pause's %v", paused, fires, limit)
	}
	// The NIC's paused time fits in the span the PAUSEs were sent in,
	// read on the daemon's own clock, however slow the machine, and the
	// watchdog's window bounds it within that span.
	if bound := windowAllowance(limit, elapsed); paused > bound {
		t.Errorf("paused %v in all over the %v the attack lasted: more than the watchdog's window allows, %v", paused, elapsed, bound)
	}
}

// daemonClock is host c's own clock: the time since its daemon started,
// as the daemon reports it. The NIC measures its paused time on that clock,
// so a span read from it bounds the paused time inside it whatever the
// load: a busy machine stretches both alike.
func daemonClock(t *testing.T, c *hostapi.Client) time.Duration {
	t.Helper()
	st, err := c.Status(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return st.Uptime
}

// windowAllowance is the most forgived's PAUSE watchdog lets a host be
// paused over a span of length T: one limit, and a limit per window
// (forgived's default window, ten limits; nic.Config.WatchdogWindow).
func windowAllowance(limit, T time.Duration) time.Duration {
	return limit + T/10 + time.Millisecond
}

// Attack: "PAUSE 0 followed by PAUSE 65535 every 60 ms restarts the
// continuous pause clock each time, so the NIC's watchdog never fires: a
// 20 s attack stalled a transfer for 22.9 s with 0 watchdog fires." The
// switch's address is forged through a raw socket, as above. The
// watchdog's bucket keeps the paused time across the breaks: it fires,
// the transfer completes byte-exact while the attack goes on, and the
// paused time the NIC reports is within what the window allows over the
// span the attack lasted (a bound on the NIC's own clock, which a loaded
// machine only loosens). With a watchdog of continuous pause the host
// stays paused until the attack's 20 s end, and the bound fails.
func TestForgedResumedPausesBoundedByWindow(t *testing.T) {
	const limit = 100 * time.Millisecond // forgived's default pfc watchdog
	s := newStar(t, 2, "200Mbps", nil)
	c1, c2 := s.client(1), s.client(2)
	const size = 16 << 20
	base := timedTransfer(t, c1, c2, 41, size, nil)
	sp := newSpoofer(t, s.addr(101, 4793))
	resume, pause := wire.AppendPause(nil, 0xff, 0), wire.AppendPause(nil, 0xff, 65535)
	var sent int
	window := daemonClock(t, c1)
	attacked := timedTransfer(t, c1, c2, 42, size, func(stop <-chan struct{}) {
		tick := time.NewTicker(60 * time.Millisecond)
		defer tick.Stop()
		for range 333 { // 20 s at most
			if sp.send(s.addr(1, 4793), resume) != nil || sp.send(s.addr(1, 4793), pause) != nil {
				return
			}
			sent += 2
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	})
	v := hostValues(t, c1)
	elapsed := daemonClock(t, c1) - window
	paused, longest := time.Duration(v["paused_ns"]), time.Duration(v["longest_pause_ns"])
	t.Logf("un-attacked %v; attacked %v: %d forged PAUSEs sent, %d received, %d watchdog fires, %d ignored; paused %v in all, the longest %v, over %v (the window allows %v)",
		base.Round(time.Millisecond), attacked.Round(time.Millisecond), sent, v["pauses"], v["pause_watchdog_fires"], v["pauses_ignored"],
		paused.Round(time.Millisecond), longest, elapsed.Round(time.Millisecond), windowAllowance(limit, elapsed))
	if v["pauses"] == 0 {
		t.Fatal("no forged PAUSE reached the NIC: the attack did not happen")
	}
	if v["pause_watchdog_fires"] == 0 {
		t.Errorf("%d PAUSEs, paused %v in all: the watchdog never fired", v["pauses"], paused)
	}
	if longest > limit {
		t.Errorf("a pause lasted %v: longer than the watchdog's %v", longest, limit)
	}
	if bound := windowAllowance(limit, elapsed); paused > bound {
		t.Errorf("paused %v in all over %v: more than the watchdog's window allows, %v", paused, elapsed, bound)
	}
}

// Attack: "200k CONNECTs on a live flow reflected 147,891 ACCEPTs one for
// one." The switch's address is forged toward host 1, as for PAUSE, with
// 20,000 CONNECTs naming host 2 and flow 52 and a fresh source tag each,
// while the flow carries a transfer. Host 1 answers a flow's CONNECTs with at
// most a burst of 4 ACCEPTs and one per 64 high RTOs (8 ms here: one per
// 512 ms); the rest are counted as accepts_limited, and the transfer
// arrives byte-exact. The bound is on host 1's own counters over the
// span of the flood, which a loaded machine only loosens. Without the
// limit every CONNECT that reaches host 1 draws an ACCEPT, and the test
// fails.
func TestForgedConnectFloodAcceptsRateLimited(t *testing.T) {
	const rtoHigh = 8 * time.Millisecond // the harness's rto_high
	s := newStar(t, 2, "200Mbps", nil)
	c1, c2 := s.client(1), s.client(2)
	sp := newSpoofer(t, s.addr(101, 4793))
	const n = 20000
	var sent int
	start := daemonClock(t, c1)
	timedTransfer(t, c1, c2, 52, 4<<20, func(<-chan struct{}) {
		for i := range n { // all n, past the transfer's end: the flow stays live
			c := wire.AppendConnect(nil, wire.ConnectFields{Src: 2, Dst: 1, Flow: 52, Tags: wire.Tags{Src: uint32(i) | 1<<31}})
			if sp.send(s.addr(1, 4793), c) != nil {
				return
			}
			sent++
		}
	})
	var flow hostapi.FlowStats
	ct, err := c1.Counters(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	elapsed := daemonClock(t, c1) - start // on the clock the limit's tokens are timed by
	for _, f := range ct.Flows {
		if f.Flow == 52 {
			flow = f.Values
		}
	}
	bound := 4 + uint64(elapsed/(64*rtoHigh)) + 1
	t.Logf("%d forged CONNECTs sent in %v: host 1 sent %d ACCEPTs (bound %d), %d limited (host-wide %d)",
		sent, elapsed.Round(time.Millisecond), flow.AcceptsSent, bound, flow.AcceptsLimited, ct.Host.AcceptsLimited)
	if flow.AcceptsSent > bound {
		t.Errorf("host 1 sent %d ACCEPTs in %v: more than the limit's %d", flow.AcceptsSent, elapsed, bound)
	}
	if flow.AcceptsLimited == 0 || ct.Host.AcceptsLimited < flow.AcceptsLimited {
		t.Errorf("no CONNECT was limited (flow %d, host %d): the flood did not reach host 1, or nothing limits it", flow.AcceptsLimited, ct.Host.AcceptsLimited)
	}
}
