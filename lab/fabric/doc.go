// Package fabric brings a placed topology up, for real or in the
// simulator, and reads it while it runs: what `forgivectl topo up` and
// every lab run use.
//
// For real (Start): it places the topology with a profile (package topo),
// writes a fresh security-domain key when the fabric is sealed (WriteKey),
// creates the namespaces and veths of a netns placement (package netns),
// writes every daemon's file and starts every trimswitch and forgived
// (package launch), each once the previous is ready; Fabric.Stop undoes
// all of it, also on a failed start. It scrapes the switches' metrics
// (QueueBytes, TrimmedBytes, SwitchCounter) and the kernel's drops at the
// fabric's sockets (SocketDrops).
//
// In the simulator (BuildSim): the same plan's files, parsed with the
// daemons' own parsers, build every nic.Engine and switchcore.Switch in
// one process, cabled by address, on a sim.Sim; the hosts' APIs are
// simhost clients, and the same readers read the engines.
//
// It never runs a workload, records or judges a run, or chooses a
// policy: the lab does (package lab), over either kind of fabric.
package fabric
