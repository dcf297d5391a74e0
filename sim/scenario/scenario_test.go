package scenario_test

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/sim/scenario"
)

var update = flag.Bool("update", false, "rewrite the expected outputs in sim/testdata/scenarios/")

// playScenario runs every directive of a scenario file and returns their
// outputs.
func playScenario(t *testing.T, ds []scenario.Directive) []string {
	t.Helper()
	p := scenario.NewPlayer()
	outs := make([]string, len(ds))
	for i, d := range ds {
		out, err := p.Do(d)
		if err != nil {
			t.Fatal(err)
		}
		outs[i] = out
	}
	return outs
}

// Every scenario in sim/testdata/scenarios is played twice: the runs must
// agree (the simulator is deterministic) and match the outputs the file
// expects (go test ./sim/scenario -run TestScenarios -update rewrites them after an
// intended change). A step the scenario closes must keep the FORGIVE
// invariants, and every verified receive must hold the bytes sent.
func TestScenarios(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "scenarios", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 5 {
		t.Fatalf("found %d scenarios in sim/testdata/scenarios, want the incasts, the multi-hop and the 64-rank ones", len(files))
	}
	for _, path := range files {
		t.Run(strings.TrimSuffix(filepath.Base(path), ".txt"), func(t *testing.T) {
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			ds, err := scenario.Parse(string(raw))
			if err != nil {
				t.Fatal(err)
			}
			got := playScenario(t, ds)
			again := playScenario(t, ds)
			for i := range got {
				if got[i] != again[i] {
					t.Fatalf("line %d %s: two runs differ: the simulation is not deterministic:\n%s\n---\n%s", ds[i].Line, ds[i].Cmd, got[i], again[i])
				}
			}
			if *update {
				if err := os.WriteFile(path, []byte(scenario.Format(scenario.Header(string(raw)), ds, got)), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			for i, d := range ds {
				if got[i] != d.Want {
					t.Errorf("%s:%d: %s printed\n%s--- want\n%s", path, d.Line, d.Cmd, got[i], d.Want)
				}
				if strings.Contains(got[i], "received bytes differ") {
					t.Errorf("%s:%d: a receive does not hold the bytes sent", path, d.Line)
				}
				if d.Cmd == "endstep" && !strings.Contains(got[i], "invariant true") {
					t.Errorf("%s:%d: the step's FORGIVE invariant did not hold", path, d.Line)
				}
				if d.Cmd == "run" && !strings.Contains(got[i], "done at") {
					t.Errorf("%s:%d: the run did not finish", path, d.Line)
				}
			}
		})
	}
}

// The speed scenarios (sim/testdata/bench, played by sim/cmd/simrun) are too long
// for a unit test; they must at least parse and name a known fabric.
func TestBenchScenariosParse(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "bench", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no speed scenarios in sim/testdata/bench (%v)", err)
	}
	for _, path := range files {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		ds, err := scenario.Parse(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		p := scenario.NewPlayer()
		for _, d := range ds[:2] { // nic and fabric: builds, runs nothing
			if _, err := p.Do(d); err != nil {
				t.Fatalf("%s: %v", path, err)
			}
		}
		if p.Sim() == nil {
			t.Fatalf("%s: no fabric built", path)
		}
	}
}

func TestScenarioErrors(t *testing.T) {
	for _, text := range []string{
		"fabric kind=ring\n----\n",
		"fabric kind=star hosts=0\n----\n",
		"fabric kind=star rate=fast\n----\n",
		"fabric kind=star colour=blue\n----\n",
		"fabric kind=star trim=tail\n----\n",
		"fabric kind=star ecn=16KiB:lots:0.2\n----\n",
		"nic cc=cubic\n----\n\nfabric kind=star\n----\n",
		"nic mode=tcp\n----\n\nfabric kind=star\n----\n",
		"nic rto=1ms\n----\n\nfabric kind=star\n----\n",
		"flow a=1 b=2\n----\n",
		"fabric kind=star hosts=2\n----\n\nflow a=1 b=9\n----\n",
		"fabric kind=star hosts=2\n----\n\nmatrix size=10\n0->0\n----\n",
		"fabric kind=star hosts=2\n----\n\nfrobnicate\n----\n",
	} {
		ds, err := scenario.Parse(text)
		if err != nil {
			t.Fatal(err)
		}
		p := scenario.NewPlayer()
		var last error
		for _, d := range ds {
			if _, last = p.Do(d); last != nil {
				break
			}
		}
		if !errors.Is(last, scenario.ErrScenario) {
			t.Errorf("%q: got %v, want a scenario error", text, last)
		}
	}
	if _, err := scenario.Parse("run\n"); !errors.Is(err, scenario.ErrScenario) {
		t.Errorf("a directive without ---- parsed: %v", err)
	}
}

// Every scenario plays to the same outputs on several workers as on one:
// the parallel scheduler hands every engine the same calls in the same
// order, so the completions, their times, every counter and the
// scheduler's own Stats are the single-threaded run's.
func TestScenariosParallel(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "testdata", "scenarios", "*.txt"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenarios (%v)", err)
	}
	for _, path := range files {
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		ds, err := scenario.Parse(string(raw))
		if err != nil {
			t.Fatal(err)
		}
		for _, workers := range []int{2, 3, 5, 8} {
			t.Run(fmt.Sprintf("%s/workers=%d", strings.TrimSuffix(filepath.Base(path), ".txt"), workers), func(t *testing.T) {
				p := scenario.NewPlayer()
				p.Workers = workers
				split := false
				for _, d := range ds {
					out, err := p.Do(d)
					if err != nil {
						t.Fatal(err)
					}
					if out != d.Want {
						t.Fatalf("%s:%d: %s printed\n%s--- want (one worker)\n%s", path, d.Line, d.Cmd, out, d.Want)
					}
					split = split || p.Sim() != nil && p.Sim().Workers() > 1
				}
				if !split {
					t.Fatalf("%s never ran on more than one worker", path)
				}
			})
		}
	}
}
