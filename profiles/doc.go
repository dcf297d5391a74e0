// Package profiles holds the emulation profiles shipped with the emulator,
// as YAML files embedded in the binaries that import it, so `forgivectl
// lab --profile loopback` works from any directory. docs/profiles.md
// documents the format; package lab/topo parses and derives them.
//
// It imports nothing of this module.
package profiles

import "embed"

// Files are the shipped profiles, one <name>.yaml each.
//
//go:embed *.yaml
var Files embed.FS
