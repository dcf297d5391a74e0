// Package topo turns data into a runnable fabric: an emulation profile (a
// reference fabric and the emulation target it is scaled down to), a
// topology (a star or a leaf-spine, with the ranks placed on it), and the
// placement of both on loopback addresses or in network namespaces, which
// yields the configuration file of every trimswitch and forgived the lab
// starts.
//
// # What it owns
//
//   - Profiles (profiles/*.yaml, docs/profiles.md): the ratio rules that
//     derive every emulated parameter from the reference fabric (buffer in
//     BDPs, ECN thresholds relative to the buffer, timers relative to the
//     RTT, rate steps relative to the link rate, window of one BDP) and the
//     profile's explicit overrides. Profile.Derived prints them.
//   - Topologies (topologies/*.yaml, docs/topologies.md): kinds star and
//     leaf-spine, oversubscription, rank placement, per-topology switch
//     overrides and link faults, and scaling to a run-time rank count.
//   - Placement (Place): the address plan on one 127.a.b.0/24, port names,
//     routes, ECMP uplinks, and the YAML of every process.
//   - The netns placement's layout (NetnsLayout): a namespace per switch
//     and host, a veth pair per cable with a /30 of the run's subnet,
//     names under "fgv-<run id>-". It is data; package lab/netns makes it
//     real, so this package never touches the kernel.
//
// # What it must not import
//
// Nothing of this module but internal/units and internal/yamlconf: the
// configurations it writes are data for the daemons, and the daemons'
// packages (switchd, hostd) and engines parse them. The tests import
// switchd and hostd to check that every generated file is accepted; the
// package itself never does, so a change there cannot silently change what
// a profile means.
package topo
