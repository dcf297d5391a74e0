// Package nicapi is the host API's semantics over a nic.Engine, in one
// place for every placement: forgived's backend (package forgivedrv) runs it
// on the daemon's event loop, and the simulator's in-process host API
// (package lab/simhost) on the simulator's clock. Host holds what each
// client has (regions by length, flows, work outstanding), checks every
// request against it and the per-client limits (hostapi.Limits), maps
// the API's flow ids to the engine's keys, checks steps, and converts
// requests, completions, counters and ledger records between the host
// API's types and the engine's.
//
// Like the engines it is sans-I/O: no sockets, files, logger, metrics or
// real clock (internal/archtest holds it so). Every method that needs
// time takes now, and the driver hands completions to its clients through
// a Sink.
package nicapi
