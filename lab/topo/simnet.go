package topo

import (
	"fmt"
	"net/netip"
)

// Simulated is the simulator's placement (`forgivectl lab --placement
// sim`): the same configuration files as on loopback, read by the
// daemons' own parsers and built into engines in one process, where no
// address is ever bound. A fabric that fits the loopback plan of one /24
// gets exactly that plan (on PlaceOptions.Net); a larger one gets the
// wide plan of docs/topologies.md ("Address plan"), so its size is bound
// only by the 16-bit host id and the workload's flow ids.
const Simulated Network = "sim"

// The simulator's wide address plan, on 127.0.0.0/8 (never bound).
var (
	// wideHosts + id is host id's NIC and metrics address.
	wideHosts = netip.MustParseAddr("127.1.0.0")
	// widePorts + i is switch port i (0-based over the fabric), on
	// DataPort.
	widePorts = netip.MustParseAddr("127.2.0.0")
	// wideMetrics + s is switch s's metrics address, on MetricsPort.
	wideMetrics = netip.MustParseAddr("127.32.0.0")
)

// Limits of each placement's address plan.
const (
	// MaxSimHosts is the most hosts the simulator places: host ids are
	// 16 bits on the wire, and the workload's ranks (workload.MaxRanks)
	// stop at the same count.
	MaxSimHosts = 1 << 15
	// MaxSimSwitchPorts is the most switch ports of the wide plan: the
	// addresses from widePorts up to wideMetrics.
	MaxSimSwitchPorts = 30 << 16
)

// Limits states what a placement's address plan holds, for the dry run
// and for an error that refuses a fabric.
func Limits(n Network) string {
	switch n {
	case Simulated:
		return fmt.Sprintf("at most %d hosts and %d switch ports: 16-bit host ids, no address bound", MaxSimHosts, MaxSimSwitchPorts)
	case Namespaces:
		return fmt.Sprintf("at most %d hosts and %d switch ports, as on loopback: a process and a namespace each", MaxHosts, MaxSwitchPorts)
	}
	return fmt.Sprintf("at most %d hosts and %d switch ports: the address plan of one /24", MaxHosts, MaxSwitchPorts)
}

// fitsSlash24 reports whether t fits the loopback plan of one /24.
func fitsSlash24(t *Topology) bool {
	return t.Ranks() <= MaxHosts && t.switchPorts() <= MaxSwitchPorts
}

// addressWide assigns the simulator's wide plan: host id at wideHosts +
// id, switch port i at widePorts + i, switch s's metrics at wideMetrics +
// s, every one on its usual UDP or TCP port.
func (f *graph) addressWide() {
	i := 0
	for si, s := range f.switches {
		for _, p := range s.ports {
			p.local = netip.AddrPortFrom(offset(widePorts, i), DataPort)
			i++
		}
		s.metrics = netip.AddrPortFrom(offset(wideMetrics, si), MetricsPort)
	}
	for _, h := range f.hosts {
		a := offset(wideHosts, h.id)
		h.listen = netip.AddrPortFrom(a, DataPort)
		h.metrics = netip.AddrPortFrom(a, MetricsPort)
	}
}
