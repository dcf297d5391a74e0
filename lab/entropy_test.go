package lab

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"
)

// --entropy message reaches every flow of the sim placement and the
// results: the checks hold (invariants, exact bytes and sums), two runs
// with the same seed are byte-identical, and subflows with it are refused
// as the daemons refuse them.
func TestSimPathPerMessage(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	o := simOptions("dcqcn", "forgive")
	o.Workload.Entropy = "message"
	a, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if a.Entropy != "message" {
		t.Fatalf("results name entropy %q", a.Entropy)
	}
	for _, r := range a.Runs {
		if !r.BudgetInvariantHeld || !r.NonGradientBytesExact || !r.GradientSumsExact {
			t.Fatalf("%s: invariant %v, exact %v %v", r.Policy, r.BudgetInvariantHeld, r.NonGradientBytesExact, r.GradientSumsExact)
		}
	}
	b, err := Run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(wallFree(t, a), wallFree(t, b)) {
		t.Fatal("two runs with a path per message and the same seed differ")
	}
	o.Workload.Subflows = 4
	if _, err := Check(o); !errors.Is(err, ErrInput) {
		t.Fatalf("--entropy message --subflows 4: %v, want ErrInput", err)
	}
}
