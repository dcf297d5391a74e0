// Package forgivedrv is the driver of the forgived daemon: it owns one host's
// UDP socket, its nic.Engine and its host-API server, and runs the loop
// that joins them.
//
// One goroutine, the loop, owns the engine. It reads the clock once per
// wake-up, hands every datagram of a batch to the engine with that time,
// runs the host-API requests queued by the server's goroutines, advances
// the engine's timers, sends what the engine transmits in one batch, and
// sleeps in the socket read until the engine's next deadline or the next
// datagram or request. An idle daemon has no deadline and sleeps.
//
// The server's goroutines never touch the engine: each request becomes a
// closure on the loop's inbox and waits for its result, so the engine
// stays single-threaded, as the sans-I/O design requires.
//
// With a security section in the config (Config.Security, package tss),
// the loop seals every packet the engine transmits and opens every
// datagram before the engine receives it, counting refusals by reason in
// LoopStats; the engine never sees a sealed packet, and PAUSE stays plain.
//
// # What it imports
//
// The configuration file (Config) is translated into nic.Config and
// nothing deeper: the engine's own setters (SetCC, SetRecovery) read the
// names of the congestion control and the loss recovery, so the driver
// imports neither congestion nor reliability. It imports budget only for
// the step id and the step-size bound that nic's host-side API takes.
// Config is also the forgived file format the lab generates (lab/topo),
// and what the simulator builds its NICs from (ParseConfig, Config.NIC).
//
// # Files
//
// The configuration is decoded, then validated: config.go is the file
// format and its two loaders (ReadConfig for forgived, whose flags change
// fields before the one check; ParseConfig, which validates, for callers
// holding a document); validate.go the field checks and the translation
// into nic.Config (NIC); keyfile.go the key files' checks; prepare.go
// start-up's preparation (Prepare, which Validate runs too). daemon.go is
// the loop, backend.go the host API on it, group.go and steer.go several
// engines behind one address, metrics.go and slog.go what it reports.
package forgivedrv
