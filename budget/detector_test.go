package budget

import (
	"errors"
	"math"
	"testing"
)

func classify(t *testing.T, d *Detector, lrDecay bool, norms ...float64) bool {
	t.Helper()
	c, err := d.Classify(norms, lrDecay)
	if err != nil {
		t.Fatalf("Classify(%v, %v): %v", norms, lrDecay, err)
	}
	return c
}

func newDetector(t *testing.T) *Detector {
	t.Helper()
	d, err := NewDetector(DefaultEta)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestDetectorAccordionCriterion(t *testing.T) {
	// "A layer ... is critical when |‖G_prev‖ − ‖G_cur‖| / ‖G_prev‖ ≥ η
	// with η = 0.5 ... A zero previous norm, the first interval, and a
	// learning-rate decay all count as critical."
	d := newDetector(t)
	steps := []struct {
		norm    float64
		lrDecay bool
		want    bool
		why     string
	}{
		{10, false, true, "the first interval"},
		{9, false, false, "a 10% change"},
		{4.5, false, true, "halved: exactly η"},
		{6.7, false, false, "+49%"},
		{10.05, false, true, "+50%"},
		{10.05, true, true, "learning-rate decay"},
		{0, false, true, "a 100% drop"},
		{0, false, true, "a zero previous norm"},
		{3, false, true, "a zero previous norm again"},
		{3, false, false, "stable"},
	}
	for i, s := range steps {
		if got := classify(t, d, s.lrDecay, s.norm); got != s.want {
			t.Fatalf("interval %d (%s, norm %v): critical %v, want %v", i+1, s.why, s.norm, got, s.want)
		}
	}
}

func TestDetectorAnyLayer(t *testing.T) {
	// Accordion decides per layer; the step is critical if any layer is.
	d := newDetector(t)
	classify(t, d, false, 1, 2, 3)
	if classify(t, d, false, 1.1, 2.2, 2.9) {
		t.Fatal("no layer changed by half, yet critical")
	}
	if !classify(t, d, false, 1.1, 2.2, 1.0) {
		t.Fatal("layer 3 fell from 2.9 to 1.0, yet not critical")
	}
	if !classify(t, d, false, 1.1, 2.2) {
		t.Fatal("layer count changed: want a fresh first interval, critical")
	}
	if classify(t, d, false, 1.1, 2.2) {
		t.Fatal("unchanged two layers, yet critical")
	}
}

func TestDetectorThreshold(t *testing.T) {
	d, err := NewDetector(0.1)
	if err != nil || d.Eta() != 0.1 {
		t.Fatalf("NewDetector(0.1) = %v, %v", d, err)
	}
	classify(t, d, false, 100)
	if !classify(t, d, false, 89) {
		t.Fatal("an 11% change is critical at η = 0.1")
	}
	for _, eta := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if _, err := NewDetector(eta); !errors.Is(err, ErrNorm) {
			t.Errorf("NewDetector(%v): %v, want ErrNorm", eta, err)
		}
	}
}

func TestDetectorRejectsBadNormsAndKeepsState(t *testing.T) {
	d := newDetector(t)
	classify(t, d, false, 10)
	for _, norms := range [][]float64{nil, {math.NaN()}, {-1}, {math.Inf(1)}, {10, math.NaN()}} {
		if _, err := d.Classify(norms, false); !errors.Is(err, ErrNorm) {
			t.Errorf("Classify(%v): %v, want ErrNorm", norms, err)
		}
	}
	// The previous norm is still 10: 9 is a small change.
	if classify(t, d, false, 9) {
		t.Fatal("a rejected input replaced the previous norms")
	}
}
