package fabric

import (
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"
)

// A line of /proc/net/udp as Linux 6 prints it, with 7 drops.
const udpTable = `   sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode ref pointer drops
 1234: 0100157F:12B9 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4242 2 0000000000000000 7
 1235: 6800157F:12B9 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4243 2 0000000000000000 11
 1236: 0100007F:0035 00000000:0000 07 00000000:00000000 00:00000000 00000000     0        0 4244 2 0000000000000000 1000
`

func TestUDPDropsSumsTheFabricsSockets(t *testing.T) {
	addrs := map[netip.AddrPort]bool{
		netip.MustParseAddrPort("127.21.0.1:4793"):   true,
		netip.MustParseAddrPort("127.21.0.104:4793"): true,
		netip.MustParseAddrPort("127.21.0.2:4793"):   true, // closed: not in the table
	}
	n, err := udpDrops(strings.NewReader(udpTable), addrs)
	if err != nil || n != 7+11 {
		t.Fatalf("udpDrops = %d, %v; want 18 (127.0.0.1:53's 1000 is not the fabric's)", n, err)
	}
	if _, err := udpDrops(strings.NewReader("header\n 1: 0100157F:12B9 short\n"), addrs); err == nil {
		t.Error("a short line: accepted")
	}
	if _, err := udpDrops(strings.NewReader("header\n"+strings.Replace(strings.Split(udpTable, "\n")[1], "0100157F", "0100157G", 1)+"\n"), addrs); err == nil {
		t.Error("a bad address: accepted")
	}
}

// A socket nobody reads overflows, and the kernel's count of what it
// dropped is what udpDrops reads back.
func TestUDPDropsSeesARealOverflow(t *testing.T) {
	rx, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	if err := rx.SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	tx, err := net.DialUDP("udp4", nil, rx.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Close()
	addr := rx.LocalAddr().(*net.UDPAddr).AddrPort()
	addrs := map[netip.AddrPort]bool{netip.AddrPortFrom(addr.Addr().Unmap(), addr.Port()): true}
	payload := make([]byte, 4096)
	deadline := time.Now().Add(10 * time.Second)
	for {
		for range 100 { // far beyond 64 KiB
			_, _ = tx.Write(payload)
		}
		f, err := os.Open(procUDP)
		if err != nil {
			t.Skipf("no %s: %v", procUDP, err)
		}
		n, err := udpDrops(f, addrs)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v: no drops counted after 10 s of sending to an unread 64 KiB buffer", addr)
		}
	}
}
