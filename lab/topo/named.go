package topo

import (
	"errors"
	"fmt"
	"io/fs"
	"regexp"
	"strconv"
	"strings"
)

// Topologies by parameter: a name that no shipped file has, but that
// reads as a shape, stands for the YAML NamedTopology writes for it:
//
//	fat-tree-k<K>                          kind fat-tree, k K, ranks interleaved
//	rail-<N>x<G>[-<R>to1]                  kind rail-optimized: N nodes of G ranks, one leaf per rail, G spines (R:1, default 1:1)
//	leaf-spine-<L>x<H>-<S>spines-<R>to1    kind leaf-spine: L leaves of H hosts, S spines, R:1, interleaved
//
// so `--topology fat-tree-k16` is a 1,024-host fat tree with no file to
// write. A shipped file of the same name wins.
var (
	fatTreeName   = regexp.MustCompile(`^fat-tree-k([0-9]+)$`)
	railName      = regexp.MustCompile(`^rail-([0-9]+)x([0-9]+)(?:-([0-9]+)to1)?$`)
	leafSpineName = regexp.MustCompile(`^leaf-spine-([0-9]+)x([0-9]+)-([0-9]+)spines-([0-9]+)to1$`)
)

// NamedTopology returns the YAML a topology name by parameter stands for,
// or false when name is no such name. The YAML is checked when it is
// parsed, as a file's would be.
func NamedTopology(name string) ([]byte, bool) {
	num := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil {
			return -1 // out of range: the parser names the field
		}
		return n
	}
	if m := fatTreeName.FindStringSubmatch(name); m != nil {
		k := num(m[1])
		return fmt.Appendf(nil, "name: %s\ndescription: a %d-ary three-tier fat tree, %d hosts, non-blocking, ranks interleaved over the pods\nkind: fat-tree\nk: %d\nplacement: interleaved\n",
			name, k, k*k*k/4, k), true
	}
	if m := railName.FindStringSubmatch(name); m != nil {
		nodes, rails, ratio := num(m[1]), num(m[2]), 1
		if m[3] != "" {
			ratio = num(m[3])
		}
		return fmt.Appendf(nil, "name: %s\ndescription: rail-optimized, %d nodes of %d ranks, one leaf per rail, %d spines, %d:1\nkind: rail-optimized\nnodes: %d\nrails: %d\nspines: %d\noversubscription: \"%d:1\"\n",
			name, nodes, rails, rails, ratio, nodes, rails, rails, ratio), true
	}
	if m := leafSpineName.FindStringSubmatch(name); m != nil {
		l, h, s, r := num(m[1]), num(m[2]), num(m[3]), num(m[4])
		return fmt.Appendf(nil, "name: %s\ndescription: %d leaves x %d hosts, %d spines, %d:1, ranks interleaved\nkind: leaf-spine\nleaves: %d\nhosts_per_leaf: %d\nspines: %d\noversubscription: \"%d:1\"\nplacement: interleaved\n",
			name, l, h, s, r, l, h, s, r), true
	}
	return nil, false
}

// TopologyData is the text of a shipped topology of fsys, or of a
// topology by parameter (NamedTopology), and the file name it stands
// for: what OpenTopology parses and a run's topology hash is taken over.
func TopologyData(fsys fs.FS, name string) ([]byte, string, error) {
	file := strings.TrimSuffix(name, ".yaml") + ".yaml"
	data, err := fs.ReadFile(fsys, file)
	if !errors.Is(err, fs.ErrNotExist) {
		return data, file, err
	}
	if gen, ok := NamedTopology(strings.TrimSuffix(name, ".yaml")); ok {
		return gen, file, nil
	}
	return nil, file, fmt.Errorf("no topology named %q (known: %s; or by parameter: fat-tree-k<K>, rail-<nodes>x<rails>[-<R>to1], leaf-spine-<L>x<H>-<S>spines-<R>to1)",
		name, strings.Join(Names(fsys), ", "))
}
