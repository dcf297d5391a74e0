package lab

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/forgive-emu/forgive/forgivedrv"
	"github.com/forgive-emu/forgive/lab/simhost"
	"github.com/forgive-emu/forgive/lab/topo"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/sim"
	"github.com/forgive-emu/forgive/switchcore"
	"github.com/forgive-emu/forgive/trimswitchdrv"
	"github.com/forgive-emu/forgive/workload"
)

// PlacementSim is the placement that runs the fabric in the simulator.
const PlacementSim = "sim"

// The simulator is the workload's event loop as it is.
var _ workload.Loop = (*sim.Sim)(nil)

// ErrSimWiring reports a placed fabric whose addresses do not form a
// fabric: a port that sends to nothing of it, a host cabled to a port
// that sends elsewhere.
var ErrSimWiring = errors.New("lab: sim: the configurations do not wire up")

// The sim placement places the topology exactly as for loopback (the same
// YAML for every daemon) in a fixed network and directory, so the
// configurations, and with them the run, depend only on the inputs.
const (
	simNet = "127.0.0."
	simDir = "/forgive-sim"
)

// simFabric is a placed fabric built in one process: every switch's
// switchcore.Switch and every host's nic.Engine made from the configuration
// its daemon would load, cabled by matching each port's neighbour
// address to the address at the other end.
type simFabric struct {
	placed   *topo.Plan
	sim      *sim.Sim
	ports    []*simhost.Client // by rank
	switches map[string]int    // by name: the sim's index
	swCfg    []*trimswitchdrv.Config
	every    time.Duration // the recorder's sampling period
}

// buildSim parses every configuration of plan with the daemons' own
// parsers, builds the engines and wires them. A configuration a daemon
// would refuse is refused here, with the daemon's error. With payloadFree
// the simulation and every NIC run without payload bytes
// (sim.NewPayloadFree), and the hosts' regions are lengths.
func buildSim(plan *topo.Plan, payloadFree bool) (*simFabric, error) {
	type portRef struct {
		sw   int
		port switchcore.PortID
	}
	f := &simFabric{placed: plan, switches: map[string]int{}}
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
	f.sim = sim.New(mtu)
	if payloadFree {
		f.sim = sim.NewPayloadFree(mtu)
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
		idx := f.sim.AddSwitch(sw)
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
		h, err := f.sim.AddHost(engines[i], ref.sw, ref.port, 0)
		if err != nil {
			return nil, err
		}
		wired[ref] = true
		f.ports = append(f.ports, simhost.New(engines[i], h, f.sim))
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
			if err := f.sim.Connect(a.sw, a.port, b.sw, b.port); err != nil {
				return nil, err
			}
			wired[a], wired[b] = true, true
		}
	}
	f.sim.OnCompletion = func(host int, c nic.Completion) { f.ports[host].Complete(c) }
	return f, nil
}

// queueBytes implements switchReader: the port's data-queue occupancy.
func (f *simFabric) queueBytes(_ context.Context, sw, port string) (float64, error) {
	i, ok := f.switches[sw]
	if !ok {
		return 0, fmt.Errorf("lab: no switch %q", sw)
	}
	p, ok := f.swCfg[i].PortIndex(port)
	if !ok {
		return 0, fmt.Errorf("lab: switch %s has no port %q", sw, port)
	}
	data, _ := f.sim.Switch(i).Occupancy(switchcore.PortID(p))
	return float64(data), nil
}

// trimmedBytes implements switchReader.
func (f *simFabric) trimmedBytes(context.Context) (map[topo.Role]int64, error) {
	byRole := map[topo.Role]int64{}
	for i, sp := range f.placed.Switches {
		st := f.sim.Switch(i).Stats()
		for _, pi := range sp.Ports {
			p, ok := f.swCfg[i].PortIndex(pi.Name)
			if !ok {
				return byRole, fmt.Errorf("lab: switch %s has no port %q", sp.Name, pi.Name)
			}
			for _, cs := range st.Ports[p].Classes {
				byRole[pi.Role] += int64(cs.Trimmed.Bytes)
			}
		}
	}
	return byRole, nil
}

// simSampleRTTs is the sim placement's sampling period of the rate and
// the queue, in the profile's base RTTs: on the loopback profile's 2 ms it
// is the real placements' sampleEvery, and it follows the profile's time
// scale (10 us at seed-400g: a sample every 100 us of virtual time).
const simSampleRTTs = 10

// simStepTimeout bounds a step in virtual time.
const simStepTimeout = 2 * time.Minute
