package lab

import (
	"errors"
	"github.com/forgive-emu/forgive/budget"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadNorms(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.txt")
	if err := os.WriteFile(good, []byte("# per-layer norms\n1.0, 2.0\n\n0.4 1.9\n0.41,1.88\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	n, err := ReadNorms(good, 2)
	if err != nil || len(n) != 2 || n[1][0] != 0.4 || n[1][1] != 1.9 {
		t.Fatalf("ReadNorms = %v, %v", n, err)
	}
	for content, want := range map[string]string{
		"1\n2\n":      "2 steps of norms, the run has 3",
		"1\nx\n3\n":   `line 2: "x" is not a gradient norm`,
		"1 2\n3\n4\n": "line 2: 1 norms, the first step had 2",
		"1\n-2\n3\n":  `line 2: "-2"`,
	} {
		p := filepath.Join(dir, "bad.txt")
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadNorms(p, 3); !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want ErrInput containing %q", content, err, want)
		}
	}
}

// The shipped trace makes Accordion's detector reach the seed's schedule:
// critical steps 1, 2, 3 and 20 of 20.
func TestShippedTraceMatchesTheSchedule(t *testing.T) {
	norms, err := ReadNorms(filepath.Join("..", "traces", "accordion-20.txt"), 20)
	if err != nil {
		t.Fatal(err)
	}
	det, err := budget.NewDetector(budget.DefaultEta)
	if err != nil {
		t.Fatal(err)
	}
	sched := budget.DefaultSchedule()
	for i, n := range norms {
		step := budget.StepID(i + 1)
		got, err := det.Classify(n, false)
		if err != nil {
			t.Fatal(err)
		}
		if want := sched.Critical(step); got != want {
			t.Errorf("step %d: detector says critical=%v, the schedule %v", step, got, want)
		}
	}
}
