package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/lab"
	"github.com/forgive-emu/forgive/lab/fabric"
)

// "A detector classifies each step, and it must run before the step's
// gradient traffic starts." The lab with --norms hands each step's
// gradient norms to every daemon, whose detector classifies the step: a
// trace whose norms jump at step 3 makes step 3 critical, so every rank's
// daemon gives it a budget of P_low x expected, read back through
// `forgivectl steps`, and the steps around it P_high.
func TestNormsTraceMakesStepCriticalAtEveryRank(t *testing.T) {
	trace := filepath.Join(t.TempDir(), "norms.txt")
	// Step 1 is the detector's first interval (critical); 2 and 4 change
	// by under 5 %; 3 falls by 68 %, over Accordion's eta = 0.5.
	if err := os.WriteFile(trace, []byte("# one norm per step\n10\n9.5\n3\n2.9\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const pLow, pHigh = 0.005, 0.1 // the forgive policy's
	want := map[uint64]float64{1: pLow, 2: pHigh, 3: pLow, 4: pHigh}
	ranksSeen := 0
	inspect := func(ctx context.Context, _ string, _ uint64, f *fabric.Fabric) error {
		for _, h := range f.Plan.Hosts {
			out, err := exec.CommandContext(ctx, bins["forgivectl"], "steps", "--socket", h.Socket, "--json").Output()
			if err != nil {
				return fmt.Errorf("forgivectl steps at %s: %w", h.Name, err)
			}
			var recs []hostapi.StepRecord
			if err := json.Unmarshal(out, &recs); err != nil {
				return fmt.Errorf("%s: %w: %s", h.Name, err, out)
			}
			if len(recs) != len(want) {
				return fmt.Errorf("%s: %d step records, want %d", h.Name, len(recs), len(want))
			}
			for _, r := range recs {
				p, ok := want[r.Step]
				if !ok {
					return fmt.Errorf("%s: unexpected step %d", h.Name, r.Step)
				}
				budget := floorMul(p, r.Expected)
				if r.P != p || r.Critical != (p == pLow) || r.Budget != budget || r.Expected == 0 || !r.InvariantHeld || r.Forgiven > r.Budget {
					return fmt.Errorf("%s: step %d: critical %v, p %v, budget %d of %d expected; want p %v, budget %d, invariants held",
						h.Name, r.Step, r.Critical, r.P, r.Budget, r.Expected, p, budget)
				}
			}
			ranksSeen++
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	_, err := lab.Run(ctx, lab.Options{Ranks: 4, Steps: 4, Policies: []string{"forgive"},
		BinDir: filepath.Dir(bins["forgived"]), Inspect: inspect,
		Workload: lab.WorkloadOptions{GradientBytes: 256 << 10, NormsFile: trace}})
	if err != nil {
		t.Fatal(err)
	}
	if ranksSeen != 4 {
		t.Fatalf("read the steps of %d ranks, want 4", ranksSeen)
	}
}

// floorMul is floor(p x n) with p read as the decimal it prints as (0.005
// is 5/1000, not its binary neighbour), as the ledger computes budgets.
func floorMul(p float64, n int64) int64 {
	r, _ := new(big.Rat).SetString(strconv.FormatFloat(p, 'g', -1, 64))
	r.Mul(r, new(big.Rat).SetInt64(n))
	return new(big.Int).Quo(r.Num(), r.Denom()).Int64()
}
