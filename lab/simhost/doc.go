// Package simhost is the host API in process: what forgived serves on its
// unix socket, implemented directly over a nic.Engine that the simulator
// (package sim) runs on its virtual clock. A Port checks what the daemon's
// server checks (request fields, the client's own regions and flows,
// bounds, per-client limits) with the same error codes, and translates to
// and from the engine with the daemon's own conversions (hostd's
// convert.go), so the workload cannot tell it from a daemon except by the
// clock.
//
// One Port per host, one client per Port: the simulated host serves
// exactly the rank that runs on it. Completions are handed to a callback
// as the simulator produces them (workload.EventPort), or queued for
// TryPoll when none is set.
//
// What it must not import: anything that does I/O or reads the real clock
// (no net, os, hostapi's client); it sits beside the lab, above sim and
// the engines.
package simhost
