package netns

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"

	"github.com/vishvananda/netlink"
	vns "github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/forgive-emu/forgive/lab/topo"
)

// Dir is where named namespaces are bind-mounted, as iproute2 does.
const Dir = "/run/netns"

// Wiring is a layout made real. Destroy removes it.
type Wiring struct {
	layout *topo.NetnsLayout
}

// Create makes the namespaces, veth pairs, addresses, aliases and routes
// of l: loopback up in every namespace, each veth end in its namespace
// with its /30 and the layout's MTU, up, and each host's default route.
// Whatever an earlier run with the same prefix left is removed first. On
// failure nothing of l remains.
func Create(l *topo.NetnsLayout) (f *Wiring, err error) {
	if err := NeedRoot(); err != nil {
		return nil, err
	}
	if err := checkPrefix(l.Prefix); err != nil || l.Prefix == topo.NamePrefix {
		return nil, fmt.Errorf("%w: a run's prefix, not %q", ErrPrefix, l.Prefix)
	}
	if _, err := Cleanup(l.Prefix); err != nil {
		return nil, fmt.Errorf("netns: clearing what an earlier run left: %w", err)
	}
	f = &Wiring{layout: l}
	defer func() {
		if err != nil {
			_, cerr := Cleanup(l.Prefix)
			err = errors.Join(err, cerr)
			f = nil
		}
	}()
	b := &builder{handles: map[string]*netlink.Handle{}, ns: map[string]vns.NsHandle{}}
	defer b.close()
	for _, name := range l.Namespaces {
		if err := b.namespace(name); err != nil {
			return nil, err
		}
	}
	for _, v := range l.Links {
		if err := b.veth(v, l.MTU); err != nil {
			return nil, err
		}
	}
	return f, nil
}

// Layout is what the fabric was made from.
func (f *Wiring) Layout() *topo.NetnsLayout { return f.layout }

// Destroy kills every process left in the fabric's namespaces and
// removes its veths and namespaces.
func (f *Wiring) Destroy() error {
	_, err := Cleanup(f.layout.Prefix)
	return err
}

// SetLinkUp sets the veth end labelled label ("host3", "leaf1/up2") up or
// down: a cable cut for fault tests.
func (f *Wiring) SetLinkUp(label string, up bool) error {
	for _, v := range f.layout.Links {
		for _, e := range []topo.VethEnd{v.A, v.B} {
			if e.Label == label {
				return setUp(e, up)
			}
		}
	}
	return fmt.Errorf("netns: no veth end labelled %q", label)
}

func setUp(e topo.VethEnd, up bool) error {
	return withHandle(e.Netns, func(h *netlink.Handle) error {
		link, err := h.LinkByName(e.Name)
		if err != nil {
			return fmt.Errorf("netns: %s in %s: %w", e.Name, e.Netns, err)
		}
		if up {
			return h.LinkSetUp(link)
		}
		return h.LinkSetDown(link)
	})
}

// withHandle runs fn with a netlink handle inside the named namespace.
func withHandle(name string, fn func(h *netlink.Handle) error) error {
	ns, err := open(name)
	if err != nil {
		return err
	}
	defer ns.Close()
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netns: netlink in %s: %w", name, err)
	}
	defer h.Close()
	return fn(h)
}

// builder holds the handles Create needs while it works: a namespace
// handle and a netlink handle per namespace. They are closed when it
// returns, since an open handle keeps a namespace alive.
type builder struct {
	ns      map[string]vns.NsHandle
	handles map[string]*netlink.Handle
}

func (b *builder) close() {
	for _, h := range b.handles {
		h.Close()
	}
	for _, ns := range b.ns {
		ns.Close()
	}
}

// namespace creates a named namespace with its loopback up.
func (b *builder) namespace(name string) error {
	if err := newNamed(name); err != nil {
		return err
	}
	ns, err := open(name)
	if err != nil {
		return err
	}
	b.ns[name] = ns
	h, err := netlink.NewHandleAt(ns, unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("netns: netlink in %s: %w", name, err)
	}
	b.handles[name] = h
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		return fmt.Errorf("netns: loopback of %s: %w", name, err)
	}
	return nil
}

// newNamed creates a namespace bind-mounted at Dir/name. The calling
// thread enters it on creation; onThread takes it back out.
func newNamed(name string) error {
	if err := checkPrefix(name); err != nil {
		return err
	}
	return onThread(func() error {
		h, err := vns.NewNamed(name)
		if err != nil {
			// NewNamed leaves the mount point behind if the mount failed.
			_ = os.Remove(filepath.Join(Dir, name))
			return fmt.Errorf("netns: create %s: %w", name, err)
		}
		return h.Close()
	})
}

// veth creates one pair with each end directly in its namespace (so it
// never appears in the caller's), then configures both ends.
func (b *builder) veth(v topo.Veth, mtu int) error {
	nsA, okA := b.ns[v.A.Netns]
	nsB, okB := b.ns[v.B.Netns]
	if !okA || !okB {
		return fmt.Errorf("netns: veth %s-%s joins a namespace the layout does not list", v.A.Name, v.B.Name)
	}
	link := &netlink.Veth{
		LinkAttrs:     netlink.LinkAttrs{Name: v.A.Name, MTU: mtu, Namespace: netlink.NsFd(nsA)},
		PeerName:      v.B.Name,
		PeerNamespace: netlink.NsFd(nsB),
	}
	if err := netlink.LinkAdd(link); err != nil {
		return fmt.Errorf("netns: veth %s (%s) - %s (%s): %w", v.A.Name, v.A.Label, v.B.Name, v.B.Label, err)
	}
	for _, e := range []topo.VethEnd{v.A, v.B} {
		if err := b.configure(e); err != nil {
			return err
		}
	}
	return nil
}

// configure gives an end its alias and address, sets it up, and adds the
// default route it names.
func (b *builder) configure(e topo.VethEnd) error {
	h := b.handles[e.Netns]
	fail := func(what string, err error) error {
		return fmt.Errorf("netns: %s (%s) in %s: %s: %w", e.Name, e.Label, e.Netns, what, err)
	}
	link, err := h.LinkByName(e.Name)
	if err != nil {
		return fail("find", err)
	}
	if err := h.LinkSetAlias(link, e.Label); err != nil {
		return fail("alias", err)
	}
	if err := h.AddrAdd(link, &netlink.Addr{IPNet: ipNet(e.Addr)}); err != nil {
		return fail("address "+e.Addr.String(), err)
	}
	if err := h.LinkSetUp(link); err != nil {
		return fail("up", err)
	}
	if e.Gateway.IsValid() {
		route := &netlink.Route{LinkIndex: link.Attrs().Index, Gw: net.IP(e.Gateway.AsSlice())}
		if err := h.RouteAdd(route); err != nil {
			return fail("default route via "+e.Gateway.String(), err)
		}
	}
	return nil
}

func ipNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: net.IP(p.Addr().AsSlice()), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}
