package fabric

import (
	"bufio"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"github.com/forgive-emu/forgive/lab/topo"
)

// procUDP is the kernel's table of this network namespace's UDP sockets.
const procUDP = "/proc/net/udp"

// fabricSockets lists the local addresses of a plan's sockets: every
// switch port and every host.
func fabricSockets(plan *topo.Plan) (map[netip.AddrPort]bool, error) {
	addrs := map[netip.AddrPort]bool{}
	add := func(s string) error {
		a, err := netip.ParseAddrPort(s)
		if err != nil {
			return fmt.Errorf("fabric: socket address %q: %w", s, err)
		}
		addrs[a] = true
		return nil
	}
	for _, sw := range plan.Switches {
		for _, p := range sw.Ports {
			if err := add(p.Local); err != nil {
				return nil, err
			}
		}
	}
	for _, h := range plan.Hosts {
		if err := add(h.Listen); err != nil {
			return nil, err
		}
	}
	return addrs, nil
}

// udpDrops sums the drops column of a /proc/net/udp table over the
// sockets bound to addrs: datagrams the kernel dropped at a full receive
// buffer (or for want of memory) before the daemon read them, losses the
// emulated fabric does not model. A socket closed before the read is not
// in the table, so the lab reads it while the fabric still runs.
func udpDrops(table io.Reader, addrs map[netip.AddrPort]bool) (int64, error) {
	sc := bufio.NewScanner(table)
	var total int64
	header := true
	for sc.Scan() {
		if header { // sl local_address rem_address ... drops
			header = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 13 {
			return 0, fmt.Errorf("fabric: %s: a line of %d fields: %q", procUDP, len(f), sc.Text())
		}
		a, err := parseProcAddr(f[1])
		if err != nil {
			return 0, fmt.Errorf("fabric: %s: %w", procUDP, err)
		}
		if !addrs[a] {
			continue
		}
		n, err := strconv.ParseInt(f[len(f)-1], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("fabric: %s: drops of %v: %w", procUDP, a, err)
		}
		total += n
	}
	return total, sc.Err()
}

// parseProcAddr reads "0100007F:12B9": the IPv4 address as the kernel
// prints it, its network-order 32-bit word read in the machine's byte
// order, then the port.
func parseProcAddr(s string) (netip.AddrPort, error) {
	ip, port, ok := strings.Cut(s, ":")
	if !ok || len(ip) != 8 {
		return netip.AddrPort{}, fmt.Errorf("address %q: want 8 hex digits, a colon and a port", s)
	}
	b, err := hex.DecodeString(ip)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q: %w", s, err)
	}
	p, err := strconv.ParseUint(port, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("address %q: port: %w", s, err)
	}
	var a [4]byte
	binary.NativeEndian.PutUint32(a[:], binary.BigEndian.Uint32(b))
	return netip.AddrPortFrom(netip.AddrFrom4(a), uint16(p)), nil
}

// SocketDrops reads the kernel's drops at the fabric's sockets, on the
// loopback placement (whose sockets share this process's namespace); nil
// elsewhere.
func SocketDrops(plan *topo.Plan) (*int64, error) {
	if plan.Netns != nil {
		return nil, nil
	}
	addrs, err := fabricSockets(plan)
	if err != nil {
		return nil, err
	}
	f, err := os.Open(procUDP)
	if err != nil {
		return nil, fmt.Errorf("fabric: %w", err)
	}
	defer f.Close()
	n, err := udpDrops(f, addrs)
	if err != nil {
		return nil, err
	}
	return &n, nil
}
