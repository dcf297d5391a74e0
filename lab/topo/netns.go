package topo

import (
	"fmt"
	"net/netip"
	"strconv"

	"github.com/forgive-emu/forgive/wire"
)

// Network is where a plan's processes live. The name is not Placement:
// that word already says which leaf a rank's host sits on.
type Network string

// Networks.
const (
	// Loopback puts every process in the caller's network namespace, each
	// address on the run's 127.a.b.0/24.
	Loopback Network = "loopback"
	// Namespaces gives every switch and every host its own network
	// namespace; each cable is a veth pair whose ends carry the two
	// addresses of one /30.
	Namespaces Network = "netns"
)

// ParseNetwork reads "loopback" (or "") and "netns".
func ParseNetwork(s string) (Network, error) {
	switch Network(s) {
	case "", Loopback:
		return Loopback, nil
	case Namespaces:
		return Namespaces, nil
	}
	return "", fmt.Errorf("%q: want loopback or netns", s)
}

// The naming and address plan of a netns placement (docs/topologies.md).
const (
	// NamePrefix starts the name of every namespace and veth any run
	// creates, so a cleanup finds what a crashed run left behind.
	NamePrefix = "fgv-"
	// MaxRunIDLen keeps a veth's name, NamePrefix + run id + "-" + two
	// base-36 digits + "a", within the kernel's 15 bytes.
	MaxRunIDLen = 6
	// MetricsLocal is where every process of a netns placement serves
	// its metrics: the loopback of its own namespace.
	MetricsLocal = "127.0.0.1"
)

// ipUDPHeaders are an IPv4 header without options and a UDP header.
const ipUDPHeaders = 20 + 8

// sealBytes is what sealing adds to a DATA packet. Every veth has room for
// it, sealed fabric or not: a sealed packet over the MTU would be
// IP-fragmented, and could not be sent segmented (udpio, GSO).
const sealBytes = wire.SealOverhead

// DefaultSubnet is the address block a netns placement carves into /30s.
var DefaultSubnet = netip.MustParsePrefix("10.77.0.0/16")

// NetnsLayout is what a netns placement asks of the kernel: the
// namespaces to create and the veth pairs between them. Package lab/netns
// makes it real.
type NetnsLayout struct {
	// Prefix starts every name below: NamePrefix + the run id + "-".
	Prefix string
	Subnet netip.Prefix
	// MTU of every veth: the profile's largest datagram, sealed, with its
	// IP and UDP headers, so no packet is fragmented (at least 1500).
	MTU int
	// Namespaces are named Prefix + process name: switches, then hosts.
	Namespaces []string
	Links      []Veth
}

// Veth is one cable. On a host's cable A is the switch port and B the
// host; on a leaf-spine cable A is the leaf's uplink and B the spine's
// downlink.
type Veth struct{ A, B VethEnd }

// VethEnd is one end of a veth pair.
type VethEnd struct {
	Netns string // the namespace holding this end
	// Name is the interface: Prefix + the link's index in base 36 + "a"
	// or "b", unique in the whole system while the run lasts.
	Name string
	// Label says what the end is ("leaf1/up1", "host3"); it becomes the
	// interface's alias, which `ip link` shows.
	Label string
	Addr  netip.Prefix // this end's address, in the link's /30
	// Gateway, when valid, is the namespace's default route: a host's
	// goes through its switch port. Switches need none: every port
	// sends only to the other end of its own /30.
	Gateway netip.Addr
}

// RunPrefix is the name prefix of a run id's namespaces and veths.
func RunPrefix(runID string) string { return NamePrefix + runID + "-" }

// CheckRunID accepts 1 to MaxRunIDLen characters of [0-9a-z].
func CheckRunID(id string) error {
	if id == "" || len(id) > MaxRunIDLen {
		return fmt.Errorf("%q: want 1 to %d characters of [0-9a-z]", id, MaxRunIDLen)
	}
	for _, c := range id {
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') {
			return fmt.Errorf("%q: want 1 to %d characters of [0-9a-z]", id, MaxRunIDLen)
		}
	}
	return nil
}

// checkSubnet wants an IPv4 block of at least a /16, written with its
// host bits clear.
func checkSubnet(p netip.Prefix) error {
	if !p.IsValid() || !p.Addr().Is4() || p.Bits() > 16 || p.Masked() != p {
		return fmt.Errorf("%v: want an IPv4 block of at least /16 such as %v", p, DefaultSubnet)
	}
	return nil
}

// addressNetns assigns the netns plan: a /30 per cable, hosts' cables in
// the first half of the subnet by host id, switch-to-switch cables in the
// second half in the order of the leaves' uplinks. Every process serves
// metrics on its own namespace's loopback.
func (f *graph) addressNetns(opts PlaceOptions, mtu int) *NetnsLayout {
	l := &NetnsLayout{Prefix: RunPrefix(opts.RunID), Subnet: opts.Subnet, MTU: max(1500, mtu+dataHeaderBytes+sealBytes+ipUDPHeaders)}
	metrics := netip.AddrPortFrom(netip.MustParseAddr(MetricsLocal), MetricsPort)
	for _, s := range f.switches {
		s.netns, s.metrics = l.Prefix+s.name, metrics
		l.Namespaces = append(l.Namespaces, s.netns)
	}
	for _, h := range f.hosts {
		h.netns, h.metrics = l.Prefix+hostName(h.id), metrics
		l.Namespaces = append(l.Namespaces, h.netns)
	}
	hostHalf := l.Subnet.Addr()
	for _, h := range f.hosts {
		sw, host := l.veth(slash30(hostHalf, h.id-1), h.port.sw.netns, h.port.label(), h.netns, hostName(h.id))
		host.Gateway = sw.Addr.Addr()
		h.port.local = netip.AddrPortFrom(sw.Addr.Addr(), DataPort)
		h.listen = netip.AddrPortFrom(host.Addr.Addr(), DataPort)
	}
	cableHalf := offset(l.Subnet.Addr(), 1<<(31-l.Subnet.Bits()))
	n := 0
	for _, s := range f.switches {
		for _, p := range s.ports {
			if p.role != RoleUplink {
				continue
			}
			a, b := l.veth(slash30(cableHalf, n), s.netns, p.label(), p.peer.sw.netns, p.peer.label())
			p.local = netip.AddrPortFrom(a.Addr.Addr(), DataPort)
			p.peer.local = netip.AddrPortFrom(b.Addr.Addr(), DataPort)
			n++
		}
	}
	return l
}

// veth adds a link on the /30 at base: A takes its first address, B its
// second. It returns pointers to the two ends for the caller to finish.
func (l *NetnsLayout) veth(base netip.Addr, nsA, labelA, nsB, labelB string) (*VethEnd, *VethEnd) {
	name := l.Prefix + strconv.FormatInt(int64(len(l.Links)), 36)
	l.Links = append(l.Links, Veth{
		A: VethEnd{Netns: nsA, Name: name + "a", Label: labelA, Addr: netip.PrefixFrom(offset(base, 1), 30)},
		B: VethEnd{Netns: nsB, Name: name + "b", Label: labelB, Addr: netip.PrefixFrom(offset(base, 2), 30)},
	})
	v := &l.Links[len(l.Links)-1]
	return &v.A, &v.B
}

func (p *portNode) label() string { return p.sw.name + "/" + p.name }

// slash30 is the i-th /30 from base.
func slash30(base netip.Addr, i int) netip.Addr { return offset(base, 4*i) }

// offset adds n to an IPv4 address.
func offset(a netip.Addr, n int) netip.Addr {
	b := a.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	v += uint32(n)
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}
