package budget

import (
	"math"
	"testing"
)

func TestShedIsDeterministic(t *testing.T) {
	// "All variants drew from one random stream, so the sender-side
	// baseline shed the same messages": the draw depends only on its
	// inputs.
	for msg := uint64(0); msg < 1000; msg++ {
		a := Shed(42, 7, 3, msg, 0.3)
		if b := Shed(42, 7, 3, msg, 0.3); a != b {
			t.Fatalf("message %d: %v then %v", msg, a, b)
		}
	}
}

func TestShedDependsOnEveryInput(t *testing.T) {
	base := shedSet(1, 1, 1, 0.5)
	for _, other := range [][]bool{shedSet(2, 1, 1, 0.5), shedSet(1, 2, 1, 0.5), shedSet(1, 1, 2, 0.5)} {
		same := 0
		for i := range base {
			if base[i] == other[i] {
				same++
			}
		}
		// Independent draws agree about half the time.
		if same < 400 || same > 600 {
			t.Errorf("%d of %d decisions agree after changing one input; want about half", same, len(base))
		}
	}
}

func shedSet(seed uint64, step StepID, rank uint64, p float64) []bool {
	out := make([]bool, 1000)
	for i := range out {
		out[i] = Shed(seed, step, rank, uint64(i), p)
	}
	return out
}

func TestShedRate(t *testing.T) {
	// "A hash draw at the sender sheds whole gradient messages: few during
	// the critical learning regime, more after it."
	const n = 200_000
	for _, p := range []float64{0.005, 0.1, 0.5, 0.9} {
		shed := 0
		for i := uint64(0); i < n; i++ {
			step := StepID(1 + i%20)
			if Shed(7, step, i%64, i/64, p) {
				shed++
			}
		}
		// Within 5 standard deviations of the binomial mean.
		mean, sd := n*p, math.Sqrt(n*p*(1-p))
		if math.Abs(float64(shed)-mean) > 5*sd {
			t.Errorf("p = %v: shed %d of %d, want %.0f ± %.0f", p, shed, n, mean, 5*sd)
		}
	}
}

func TestShedEdges(t *testing.T) {
	for i := uint64(0); i < 10_000; i++ {
		if Shed(i, StepID(i), i, i, 0) || Shed(i, StepID(i), i, i, math.NaN()) {
			t.Fatalf("p = 0 or NaN shed message %d", i)
		}
		if !Shed(i, StepID(i), i, i, 1) {
			t.Fatalf("p = 1 kept message %d", i)
		}
	}
}
