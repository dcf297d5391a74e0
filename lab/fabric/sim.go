package fabric

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	"github.com/forgive-emu/forgive/forgivedrv"
	"github.com/forgive-emu/forgive/lab/simhost"
	"github.com/forgive-emu/forgive/lab/topo"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/sim"
	"github.com/forgive-emu/forgive/switchcore"
	"github.com/forgive-emu/forgive/trimswitchdrv"
)

// ErrSimWiring reports a placed fabric whose addresses do not form a
// fabric: a port that sends to nothing of it, a host cabled to a port
// that sends elsewhere.
var ErrSimWiring = errors.New("fabric: sim: the configurations do not wire up")

// Sim is a placed fabric built in one process: every switch's
// switchcore.Switch and every host's nic.Engine made from the configuration
// its daemon would load, cabled by matching each port's neighbour
// address to the address at the other end.
type Sim struct {
	Plan *topo.Plan
	Loop *sim.Sim // the simulator: the event loop the engines and the workload run on
	// Clients are the hosts' in-process host APIs, in the plan's host
	// order (rank order).
	Clients  []*simhost.Client
	switches map[string]int // by name: the sim's index
	swCfg    []*trimswitchdrv.Config
}

// BuildSim parses every configuration of plan with the daemons' own
// parsers, builds the engines and wires them. A configuration a daemon
// would refuse is refused here, with the daemon's error. With payloadFree
// the simulation and every NIC run without payload bytes
// (sim.NewPayloadFree), and the hosts' regions are lengths.
func BuildSim(plan *topo.Plan, payloadFree bool) (*Sim, error) {
	type portRef struct {
		sw   int
		port switchcore.PortID
	}
	f := &Sim{Plan: plan, switches: map[string]int{}}
	var engines []*nic.Engine
	var hostCfg []*forgivedrv.Config
	mtu := 0
	for _, h := range plan.Hosts {
		hc, err := forgivedrv.ParseConfig(h.ConfigYAML)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", h.Name, err)
		}
		nc, err := hc.NIC()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", h.Name, err)
		}
		nc.NoPayload = payloadFree
		e, err := nic.New(nc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", h.Name, err)
		}
		engines, hostCfg = append(engines, e), append(hostCfg, hc)
		mtu = max(mtu, nc.MTU)
	}
	f.Loop = sim.New(mtu)
	if payloadFree {
		f.Loop = sim.NewPayloadFree(mtu)
	}
	byAddr := map[netip.AddrPort]portRef{}
	var locals, neighbors [][]netip.AddrPort
	name := func(r portRef) string { return plan.Switches[r.sw].Name + "/" + f.swCfg[r.sw].Ports[r.port].Name }
	for _, sp := range plan.Switches {
		sc, err := trimswitchdrv.ParseConfig(sp.ConfigYAML)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sp.Name, err)
		}
		sw, err := switchcore.New(sc.Core())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", sp.Name, err)
		}
		idx := f.Loop.AddSwitch(sw)
		f.switches[sp.Name], f.swCfg = idx, append(f.swCfg, sc)
		var ls, ns []netip.AddrPort
		for i, p := range sc.Ports {
			// Validate has parsed both addresses already.
			l, _ := netip.ParseAddrPort(p.Local)
			n, _ := netip.ParseAddrPort(p.Neighbor)
			byAddr[l] = portRef{idx, switchcore.PortID(i)}
			ls, ns = append(ls, l), append(ns, n)
		}
		locals, neighbors = append(locals, ls), append(neighbors, ns)
	}
	wired := map[portRef]bool{}
	for i, hc := range hostCfg {
		listen, swAddr, _ := hc.Addresses()
		ref, ok := byAddr[swAddr]
		switch {
		case !ok:
			return nil, fmt.Errorf("%w: %s's switch %v is no switch port", ErrSimWiring, hc.Name, swAddr)
		case neighbors[ref.sw][ref.port] != listen:
			return nil, fmt.Errorf("%w: %s is cabled to %s, which sends to %v, not to %v", ErrSimWiring, hc.Name, name(ref), neighbors[ref.sw][ref.port], listen)
		case wired[ref]:
			return nil, fmt.Errorf("%w: %s is cabled to %s, which has a host already", ErrSimWiring, hc.Name, name(ref))
		}
		// forgived adds no propagation delay of its own: the switch's
		// egress links carry all of it.
		h, err := f.Loop.AddHost(engines[i], ref.sw, ref.port, 0)
		if err != nil {
			return nil, err
		}
		wired[ref] = true
		f.Clients = append(f.Clients, simhost.New(engines[i], h, f.Loop))
	}
	for s, ns := range neighbors {
		for p, n := range ns {
			a := portRef{s, switchcore.PortID(p)}
			if wired[a] {
				continue
			}
			b, ok := byAddr[n]
			if !ok || wired[b] || neighbors[b.sw][b.port] != locals[s][p] {
				return nil, fmt.Errorf("%w: %s sends to %v, which is neither a host nor a free switch port sending back", ErrSimWiring, name(a), n)
			}
			if err := f.Loop.Connect(a.sw, a.port, b.sw, b.port); err != nil {
				return nil, err
			}
			wired[a], wired[b] = true, true
		}
	}
	f.Loop.OnCompletion = func(host int, c nic.Completion) { f.Clients[host].Complete(c) }
	return f, nil
}

// QueueBytes is a port's data-queue occupancy now.
func (f *Sim) QueueBytes(_ context.Context, sw, port string) (float64, error) {
	i, ok := f.switches[sw]
	if !ok {
		return 0, fmt.Errorf("fabric: no switch %q", sw)
	}
	p, ok := f.swCfg[i].PortIndex(port)
	if !ok {
		return 0, fmt.Errorf("fabric: switch %s has no port %q", sw, port)
	}
	data, _ := f.Loop.Switch(i).Occupancy(switchcore.PortID(p))
	return float64(data), nil
}

// TrimmedBytes is the payload bytes the switches trimmed so far, by the
// role of the egress port that trimmed them.
func (f *Sim) TrimmedBytes(context.Context) (map[topo.Role]int64, error) {
	byRole := map[topo.Role]int64{}
	for i, sp := range f.Plan.Switches {
		sw := f.Loop.Switch(i)
		for _, pi := range sp.Ports {
			p, ok := f.swCfg[i].PortIndex(pi.Name)
			if !ok {
				return byRole, fmt.Errorf("fabric: switch %s has no port %q", sp.Name, pi.Name)
			}
			byRole[pi.Role] += int64(sw.TrimmedBytes(switchcore.PortID(p)))
		}
	}
	return byRole, nil
}
