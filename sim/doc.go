// Package sim runs the real engines, nic.Engine for hosts and switchcore.Switch
// for switches, on a virtual clock in one goroutine: the same code the
// forgived and trimswitch daemons run, with links replaced by event
// queues. A run is a pure function of its configuration and seeds, so
// scenario tests are reproducible and a paper-scale fabric runs on one
// core without real time. SetWorkers splits one run's fabric across
// several goroutines (parallel.go) with the same results.
//
// A host's NIC paces its own uplink; the switch models serialization and
// propagation of its egress links. A host uplink adds only its
// propagation delay.
//
// The scheduler touches only what is due. Every engine is filed in a
// winner tree under its NextDeadline and read again after it ran, after it was handed
// a packet, and after Wake; packets in flight wait in a heap by arrival
// time (or, when due at the instant they were sent, a FIFO); At callbacks
// in a third heap. Ties are broken by sequence number and by the order
// engines were added, never by map order, goroutines or the wall clock.
// Besides the scheduler, sim holds the engines' wiring: the topology
// generators (Star, LeafSpine, LeafSpineInterleaved, FatTree), which the
// lab's placement shares, and BuildFabric. The scripts of
// testdata/scenarios are package sim/scenario's. docs/simulator.md
// describes the design, the scenario format and the speed figures.
package sim
