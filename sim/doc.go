// Package sim runs the real engines, nic.Engine for hosts and fabric.Switch
// for switches, on a virtual clock in one goroutine: the same code the
// forgived and trimswitch daemons run, with links replaced by an event
// queue. A run is a pure function of its configuration and seeds, so
// scenario tests are reproducible and a paper-scale fabric runs on one
// core without real time.
//
// A host's NIC paces its own uplink; the switch models serialization and
// propagation of its egress links. A host uplink adds only its
// propagation delay.
package sim
