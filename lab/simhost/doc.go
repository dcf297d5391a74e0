// Package simhost is the host API in process: what forgived serves on its
// unix socket, over a nic.Engine that the simulator (package sim) runs on
// its virtual clock. A Client is a thin adapter of hostapi/nicapi.Host, the
// semantics the daemon's backend runs too (the checks of the client's own
// regions and flows, bounds, per-client limits and steps, with the same
// error codes and messages, and the conversions to and from the engine),
// to the simulator's clock (Now) and its wake-ups (Wake), so the workload
// cannot tell it from a daemon except by the clock. TestRefusalsMatchTheDaemon
// holds the two to one table of refusals.
//
// One Client per host, serving one host-API client: the simulated host serves
// exactly the rank that runs on it. Completions are handed to a callback
// as the simulator produces them (workload.EventHostAPI), or queued for
// TryPoll when none is set.
//
// What it must not import: anything that does I/O or reads the real clock
// (no net, os, hostapi's client), nor the daemon (forgivedrv: its logger,
// metrics and sockets; internal/archtest holds that); it sits beside the
// lab, above sim and the engines.
package simhost
