package netns

import (
	"fmt"
	"net"
	"strings"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/forgive-emu/forgive/lab/topo"
)

// Namespace describes one namespace of a fabric as the kernel has it.
type Namespace struct {
	Name  string
	Links []Link
	Pids  []int
}

// Link is one interface of a namespace.
type Link struct {
	Name  string
	Alias string   // the veth end's label: "leaf1/up1", "host3"
	Addrs []string // IPv4 addresses with their prefix length
	Up    bool     // administratively up
	MTU   int
}

// List describes every namespace whose name starts with prefix, with its
// links (loopback left out) and processes.
func List(prefix string) ([]Namespace, error) {
	names, err := Names(prefix)
	if err != nil {
		return nil, err
	}
	out := make([]Namespace, 0, len(names))
	for _, name := range names {
		ns := Namespace{Name: name}
		if ns.Pids, err = Pids(name); err != nil {
			return nil, err
		}
		if mounted(name) {
			if ns.Links, err = links(name); err != nil {
				return nil, err
			}
		}
		out = append(out, ns)
	}
	return out, nil
}

func links(name string) ([]Link, error) {
	var out []Link
	err := withHandle(name, func(h *netlink.Handle) error {
		all, err := h.LinkList()
		if err != nil {
			return fmt.Errorf("netns: links of %s: %w", name, err)
		}
		for _, l := range all {
			a := l.Attrs()
			if a.Flags&net.FlagLoopback != 0 {
				continue
			}
			addrs, err := h.AddrList(l, unix.AF_INET)
			if err != nil {
				return fmt.Errorf("netns: addresses of %s in %s: %w", a.Name, name, err)
			}
			link := Link{Name: a.Name, Alias: a.Alias, Up: a.Flags&net.FlagUp != 0, MTU: a.MTU}
			for _, ad := range addrs {
				link.Addrs = append(link.Addrs, ad.IPNet.String())
			}
			out = append(out, link)
		}
		return nil
	})
	return out, err
}

// RunOf returns the run prefix ("fgv-<id>-") of a name made by a fabric.
func RunOf(name string) string {
	rest, ok := strings.CutPrefix(name, topo.NamePrefix)
	if !ok {
		return ""
	}
	id, _, ok := strings.Cut(rest, "-")
	if !ok {
		return ""
	}
	return topo.RunPrefix(id)
}
