// Package scenario is the simulator's script language: scripts of
// directives in the style of etcd raft's testdata (a command line of
// key=value arguments, optional input lines, a "----" line, then the
// output the command is expected to print, up to the next empty line),
// and a Player that builds a fabric with package sim and plays the
// directives on it. docs/simulator.md lists the commands.
//
// # What it owns
//
//   - script.go: parsing and printing a script (Parse, Format, Header).
//   - player.go: the player of the directives.
//   - args.go: reading a directive's arguments; sizes, rates and
//     durations in internal/units' notation, the names of congestion
//     controls, loss recoveries and trim modes through the engines' own
//     parsers (nic.Config.SetCC and SetRecovery, switchcore.ParseTrimMode).
//   - traffic.go: the flow counters of every host, summed.
//
// # What it imports
//
// The simulator (sim) for the topologies and their wiring, the engines
// whose configurations the directives set (nic, fabric, budget,
// reliability for the default MTU), and internal/units. It does no I/O
// and never reads the real clock: a caller that wants the wall time of a
// run directive sets Player.Wall.
package scenario
