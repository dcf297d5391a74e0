// Package topo turns data into a runnable fabric: an emulation profile (a
// reference fabric and the emulation target it is scaled down to), a
// topology (a star, a leaf-spine, a three-tier fat tree or a
// rail-optimized fabric, with the ranks placed on it), and the placement
// of both on loopback addresses, in network namespaces or in the
// simulator, which yields the configuration file of every trimswitch and
// forgived the lab starts (or, in the simulator, builds in process).
//
// # What it owns
//
//   - Profiles (profiles/*.yaml, docs/profiles.md): the ratio rules that
//     derive every emulated parameter from the reference fabric (buffer in
//     BDPs, ECN thresholds relative to the buffer, timers relative to the
//     RTT, rate steps relative to the link rate, window of one BDP) and the
//     profile's explicit overrides. Profile.Derived prints them.
//   - Topologies (topologies/*.yaml, docs/topologies.md): kinds star,
//     leaf-spine, fat-tree and rail-optimized, topologies by parameter
//     (NamedTopology: fat-tree-k16, ...), oversubscription, rank
//     placement, per-topology switch overrides and link faults, and
//     scaling to a run-time rank count.
//   - Placement (Place): the address plan on one 127.a.b.0/24 (the
//     simulator's wide plan above 99 hosts, Simulated), port names,
//     routes, ECMP uplinks, and the YAML of every process.
//   - The netns placement's layout (NetnsLayout): a namespace per switch
//     and host, a veth pair per cable with a /30 of the run's subnet,
//     names under "fgv-<run id>-". It is data; package lab/netns makes it
//     real, so this package never touches the kernel.
//
// # What it imports
//
// The daemons' configuration types: forgivedrv.Config and trimswitchdrv.Config are
// the file formats of forgived and trimswitch, and Place fills them in and
// writes them with the YAML encoder (Config.Marshal), so a renamed or
// retyped field breaks this package's build rather than a run, and no text
// of a profile or topology can become a key of a generated file. It takes
// the seed's defaults from budget, the packet sizes from wire and nic, and
// DCQCN's floor on R_AI from congestion. The wiring and routes of a star
// or a leaf-spine are sim's generators' (sim.Star, sim.LeafSpine,
// sim.LeafSpineInterleaved), the ones the simulator's scenarios build;
// those of a fat tree and a rail-optimized fabric are this package's own
// (fattree.go), in sim's terms, because they place the job's ranks; this
// package names their switches and ports and gives them rates and
// addresses.
// It never starts a daemon or touches the kernel: lab and lab/netns do.
package topo
