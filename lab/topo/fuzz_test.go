package topo

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/forgive-emu/forgive/forgivedrv"
	"github.com/forgive-emu/forgive/trimswitchdrv"
)

func addShipped(f *testing.F, dir string) {
	files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// Any input either parses or is refused with ErrProfile, and a parsed
// profile's derived values pass the package's own checks.
func FuzzParseProfile(f *testing.F) {
	addShipped(f, profileDir)
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParseProfile(data)
		if err != nil {
			if !errors.Is(err, ErrProfile) {
				t.Fatalf("error %v is not ErrProfile", err)
			}
			return
		}
		var probs problems
		params := p.Params()
		params.check(&probs)
		if len(probs) > 0 {
			t.Fatalf("accepted a profile whose values fail the checks: %v", probs)
		}
	})
}

// Any topology that parses and places yields switch and host files the
// daemons accept and read back as exactly the configuration the plan
// holds (text from the topology, such as its name, cannot add or change a
// field); what does not place is refused with the package's errors.
func FuzzPlaceTopology(f *testing.F) {
	addShipped(f, topologyDir)
	f.Add([]byte("name: x\nkind: leaf-spine\nleaves: 2\nhosts_per_leaf: 1\nspines: 3\noversubscription: 3:2\n" +
		"switch: {buffer_bdp: 1/3, ecn: {kmin_frac: 0, kmax_frac: 1}, pfc: {xoff_frac: 0.001}}\n"))
	prof, err := LoadProfile(filepath.Join(profileDir, DefaultProfile+".yaml"))
	if err != nil {
		f.Fatal(err)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		tp, err := ParseTopology(data)
		if err != nil {
			if !errors.Is(err, ErrTopology) {
				t.Fatalf("error %v is not ErrTopology", err)
			}
			return
		}
		plan, err := Place(tp, prof, PlaceOptions{Dir: dir, Net: "127.77.9.", Host: DefaultHostPolicy()})
		if err != nil {
			if !errors.Is(err, ErrPlace) {
				t.Fatalf("error %v is not ErrPlace", err)
			}
			return
		}
		for _, s := range plan.Switches {
			readsBack(t, s.Name, s.ConfigYAML, s.Config, trimswitchdrv.ParseConfig)
		}
		for _, h := range plan.Hosts {
			readsBack(t, h.Name, h.ConfigYAML, h.Config, forgivedrv.ParseConfig)
		}
	})
}

// readsBack checks that a generated file parses as exactly the config it
// was encoded from.
func readsBack[C any](t *testing.T, name string, file []byte, want *C, parse func([]byte) (*C, error)) {
	t.Helper()
	got, err := parse(file)
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, file)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s: the file reads back as\n%+v\nnot\n%+v\n%s", name, got, want, file)
	}
}
