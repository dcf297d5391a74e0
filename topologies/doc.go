// Package topologies holds the topologies shipped with the emulator, as
// YAML files embedded in the binaries that import it, so `forgivectl lab
// --topology leaf-spine-2x4` works from any directory.
// docs/topologies.md documents the format; package lab/topo parses and
// places them.
//
// It imports nothing of this module.
package topologies

import "embed"

// Files are the shipped topologies, one <name>.yaml each.
//
//go:embed *.yaml
var Files embed.FS
