// Package hostd is the driver of the forgived daemon: it owns one host's
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
package hostd
