package budget

import (
	"errors"
	"fmt"
	"math"
)

// DefaultEta is Accordion's threshold η on the relative change of a gradient
// norm.
const DefaultEta = 0.5

// ErrNorm reports a gradient norm or threshold the detector cannot use.
var ErrNorm = errors.New("budget: invalid gradient norm")

// Detector is Accordion's critical-regime criterion, InCriticalRegime in the
// seed: "Accordion's criterion, the rate of change in gradient norms, puts
// the step inside or outside the critical learning regime, and that
// classification picks the loss budget."
//
// A layer is critical when |prev − cur| / prev >= η, comparing its norm with
// the norm one detection interval earlier; the step is critical when any
// layer is (Accordion decides per layer; pass one norm for DBLP's
// whole-model version). A zero previous norm, the first interval and a
// learning-rate decay all count as critical. The caller chooses the
// detection interval by calling Classify once per interval.
type Detector struct {
	eta  float64
	prev []float64 // norms at the previous interval; nil before the first
}

// NewDetector returns a detector with threshold eta (> 0, finite).
func NewDetector(eta float64) (*Detector, error) {
	if !(eta > 0) || math.IsInf(eta, 1) {
		return nil, fmt.Errorf("%w: eta = %v, want a finite eta > 0", ErrNorm, eta)
	}
	return &Detector{eta: eta}, nil
}

// Eta returns the detector's threshold.
func (d *Detector) Eta() float64 { return d.eta }

// Classify reports whether the interval whose per-layer gradient norms are
// given is critical, and remembers the norms for the next interval.
// lrDecay says the learning rate decayed at this interval. A change in the
// number of layers restarts the comparison, as a first interval does. Norms
// must be finite and not negative; on error nothing is remembered.
func (d *Detector) Classify(norms []float64, lrDecay bool) (bool, error) {
	if len(norms) == 0 {
		return false, fmt.Errorf("%w: no norms", ErrNorm)
	}
	for i, n := range norms {
		if !(n >= 0) || math.IsInf(n, 1) {
			return false, fmt.Errorf("%w: layer %d norm %v", ErrNorm, i, n)
		}
	}
	critical := lrDecay || len(d.prev) != len(norms) || d.anyLayerCritical(norms)
	d.prev = append(d.prev[:0], norms...)
	return critical, nil
}

func (d *Detector) anyLayerCritical(norms []float64) bool {
	for i, cur := range norms {
		prev := d.prev[i]
		if prev == 0 || math.Abs(prev-cur)/prev >= d.eta {
			return true
		}
	}
	return false
}
