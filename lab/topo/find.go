package topo

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/forgive-emu/forgive/profiles"
	"github.com/forgive-emu/forgive/topologies"
)

// FindProfile opens a profile by a shipped name (package profiles) or a
// path to a YAML file.
func FindProfile(name string) (*Profile, error) {
	if IsPath(name) {
		return LoadProfile(name)
	}
	return OpenProfile(profiles.Files, name)
}

// FindTopology opens a topology by a shipped name (package topologies) or
// a path to a YAML file.
func FindTopology(name string) (*Topology, error) {
	if IsPath(name) {
		return LoadTopology(name)
	}
	return OpenTopology(topologies.Files, name)
}

// IsPath reports whether name is a file's path rather than a shipped
// name: it has a directory, or ends in .yaml and the file exists.
func IsPath(name string) bool {
	return strings.ContainsRune(name, filepath.Separator) || strings.HasSuffix(name, ".yaml") && fileExists(name)
}

func fileExists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
