package topo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/profiles"
	"github.com/forgive-emu/forgive/topologies"
)

// The shipped data, read from the repository (not the embedded copy, so
// a file added without rebuilding is still tested).
var (
	profileDir  = filepath.Join("..", "..", "profiles")
	topologyDir = filepath.Join("..", "..", "topologies")
)

func shippedProfiles(t *testing.T) map[string]*Profile {
	t.Helper()
	out := map[string]*Profile{}
	for _, name := range Names(os.DirFS(profileDir)) {
		p, err := LoadProfile(filepath.Join(profileDir, name+".yaml"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = p
	}
	if len(out) == 0 {
		t.Fatal("no profiles found in " + profileDir)
	}
	return out
}

func shippedTopologies(t *testing.T) map[string]*Topology {
	t.Helper()
	out := map[string]*Topology{}
	for _, name := range Names(os.DirFS(topologyDir)) {
		tp, err := LoadTopology(filepath.Join(topologyDir, name+".yaml"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = tp
	}
	if len(out) == 0 {
		t.Fatal("no topologies found in " + topologyDir)
	}
	return out
}

func mustProfile(t *testing.T, name string) *Profile {
	t.Helper()
	p, err := OpenProfile(profiles.Files, name)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustTopology(t *testing.T, name string) *Topology {
	t.Helper()
	tp, err := OpenTopology(topologies.Files, name)
	if err != nil {
		t.Fatal(err)
	}
	return tp
}

func readText(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// replace substitutes one occurrence of old in s, failing the test if it
// is not there (so a case cannot silently test the unmodified file).
func replace(t *testing.T, s, old, new string) string {
	t.Helper()
	if !strings.Contains(s, old) {
		t.Fatalf("test file has no %q", old)
	}
	return strings.Replace(s, old, new, 1)
}

func testOptions(t *testing.T) PlaceOptions {
	return PlaceOptions{Dir: t.TempDir(), Net: "127.77.3.", Host: DefaultHostPolicy(), Seed: 7}
}

func mustPlace(t *testing.T, tp *Topology, p *Profile, opts PlaceOptions) *Plan {
	t.Helper()
	plan, err := Place(tp, p, opts)
	if err != nil {
		t.Fatalf("Place(%s, %s, ranks %d): %v", tp.Name, p.Name, opts.Ranks, err)
	}
	return plan
}
