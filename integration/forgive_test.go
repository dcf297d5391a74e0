package integration

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
)

// flowValues returns the counters of flow id as client c's daemon reports
// them.
func flowValues(t *testing.T, c *hostapi.Client, id hostapi.FlowID) map[string]uint64 {
	t.Helper()
	ct, err := c.Counters(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range ct.Flows {
		if f.Flow == id {
			return f.Values.Map()
		}
	}
	t.Fatalf("no counters for flow %d", id)
	return nil
}

// stepRecord returns the daemon's ledger record of one step and checks
// FORGIVE's invariants on it: forgiven <= budget, forgiven <= p/(1-p) x
// received (as the daemon checks it exactly: InvariantHeld), and nothing
// counted twice (received + forgiven never exceeds what was expected).
func stepRecord(t *testing.T, c *hostapi.Client, step uint64) hostapi.StepRecord {
	t.Helper()
	recs, err := c.Steps(context.Background(), 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range recs {
		if r.Step != step {
			continue
		}
		if !r.InvariantHeld || r.Forgiven > r.Budget || r.Received+r.Forgiven > r.Expected {
			t.Fatalf("step %d breaks FORGIVE's invariants: %+v", step, r)
		}
		return r
	}
	t.Fatalf("no record of step %d among %d", step, len(recs))
	return hostapi.StepRecord{}
}

// checkReceived checks a completed receive: successful, every byte either
// the sender's or inside a listed forgiven range (and zero there).
func checkReceived(t *testing.T, comp hostapi.Completion, x *transfer) uint64 {
	t.Helper()
	if comp.Status != hostapi.StatusOK {
		t.Fatalf("receive %d failed: %s", comp.WRID, comp.Err)
	}
	forgiven := make([]bool, len(x.dst))
	var n uint64
	for _, r := range comp.Forgiven {
		n += r.Len()
		for i := r.Start; i < r.End; i++ {
			forgiven[i] = true
			if x.dst[i] != 0 {
				t.Fatalf("forgiven byte %d of receive %d is %#x, want 0", i, comp.WRID, x.dst[i])
			}
		}
	}
	for i := range x.dst {
		if !forgiven[i] && x.dst[i] != x.src[i] {
			t.Fatalf("byte %d of receive %d neither received nor forgiven", i, comp.WRID)
		}
	}
	return n
}

// awaitFlowBytes waits until client c's daemon has received at least n
// bytes on flow id.
func awaitFlowBytes(t *testing.T, c *hostapi.Client, id hostapi.FlowID, n uint64, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		got := flowValues(t, c, id)["recv_bytes"]
		if got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("flow %d received %d bytes in %v; waiting for %d", id, got, within, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// "budget-exhausted is set while forgiven + outstanding + one packet > p
// x expected ... The sender obeys congestion control again when a report
// sets budget-exhausted, and ignores congestion signals again if a later
// report clears the flag." Under a trimming bottleneck with P_high = 0.002
// the budget of an 8 MiB step is 16.7 KB: four trimmed packets
// outstanding exhaust it, the exempt gradient sender obeys DCQCN (CNPs cut
// its rate, counted by its daemon) and becomes exempt again once the
// retransmissions arrive and take their bytes off outstanding.
//
// The draw forgives nothing (P = 0), so the flag's last word is the
// protocol's, not the machine's speed: when the last retransmission
// arrives, forgiven + outstanding is zero and the report that acknowledges
// it clears the flag. With ranges forgiven, forgiven fills the budget to
// within a packet and the flag ends set; whether it also cleared in
// between then depended on how the daemons' batches fell, and a loaded
// machine, handling trims in larger batches, could set it once for good
// (2 mode changes; it failed so once).
func TestExhaustedBudgetMakesSenderObeyUntilCleared(t *testing.T) {
	p0 := 0.0
	opts := map[uint16]hostOpts{1: {forgive: true, pHigh: 0.002, p: &p0}, 2: {forgive: true}, 3: {cc: "none"}}
	s := newStar(t, 3, "200Mbps", opts)
	c1, c2, c3 := s.client(1), s.client(2), s.client(3)
	const size = 8 << 20
	nc := false
	ctx := context.Background()
	if err := c1.BeginStep(ctx, hostapi.StepReq{Step: 1, Critical: &nc, ExpectedGradientBytes: size}); err != nil {
		t.Fatal(err)
	}
	grad := prepare(t, c2, c1, 2, 1, 41, hostapi.ClassGradient, size, 1)
	noise := prepare(t, c3, c1, 3, 1, 42, hostapi.ClassOther, 32<<20, 0)
	// The bottleneck needs both senders at once. Sent together, a loaded
	// machine can run one transfer before the other (a starved daemon
	// sends nothing for a while), and a lone gradient flow at line rate
	// is never trimmed. So the noise goes first, and the gradient once
	// the noise is seen arriving; the noise is four times the gradient,
	// so it outlasts it.
	noise.send()
	awaitFlowBytes(t, c1, 42, 1<<20, hangGuard)
	grad.send()
	for range 2 {
		comp := awaitKind(t, c1, hostapi.KindRecv, hangGuard)
		switch comp.WRID {
		case 41:
			checkReceived(t, comp, grad)
		case 42:
			if comp.Status != hostapi.StatusOK || len(comp.Forgiven) != 0 || !bytes.Equal(noise.dst, noise.src) {
				t.Fatalf("non-gradient receive: status %s (%s), %d bytes forgiven; want it exact, nothing forgiven", comp.Status, comp.Err, comp.ForgivenBytes())
			}
		}
	}
	// The send completes once the sender has taken the last
	// acknowledgement, and its report, so its counters are final.
	if comp := awaitKind(t, c2, hostapi.KindSend, hangGuard); comp.WRID != 41 || comp.Status != hostapi.StatusOK {
		t.Fatalf("gradient send %d: status %s (%s)", comp.WRID, comp.Status, comp.Err)
	}
	tx := flowValues(t, c2, 41)
	obeyed := tx["cnps_recv"] - tx["cnps_ignored"]
	t.Logf("gradient sender: %d mode changes, %d exhausted-flag changes, %d CNPs (%d ignored, %d obeyed), %d rate cuts, %d NACKs",
		tx["mode_changes"], tx["exhausted_changes"], tx["cnps_recv"], tx["cnps_ignored"], obeyed, tx["rate_cuts"], tx["nacks_recv"])
	if tx["ever_exempt"] != 1 || tx["cnps_ignored"] == 0 {
		t.Fatalf("the gradient sender was never exempt (ignored %d CNPs)", tx["cnps_ignored"])
	}
	if tx["reobeyed"] == 0 || obeyed == 0 || tx["rate_cuts"] == 0 {
		t.Fatalf("the exhausted budget never made the sender obey: re-obeyed %d times, obeyed %d CNPs, %d rate cuts",
			tx["reobeyed"], obeyed, tx["rate_cuts"])
	}
	// Obeying -> exempt -> obeying -> exempt: a later report cleared the
	// flag, at the latest the one that acknowledged the last retransmission.
	if tx["mode_changes"] < 3 || tx["exhausted_changes"] < 2 || tx["exempt"] != 1 {
		t.Fatalf("the sender was never exempt again after obeying: %d mode changes, %d flag changes, exempt now %d",
			tx["mode_changes"], tx["exhausted_changes"], tx["exempt"])
	}
	if err := c1.EndStep(ctx, 1); err != nil {
		t.Fatal(err)
	}
	r := stepRecord(t, c1, 1)
	t.Logf("step 1: budget %d, forgiven %d, received %d of %d, outstanding %d, trimmed %d", r.Budget, r.Forgiven, r.Received, r.Expected, r.Outstanding, r.TrimmedBytes)
	if r.TrimmedBytes == 0 || r.DrawRefusals == 0 {
		t.Fatalf("the bottleneck trimmed %d gradient bytes and the draw refused %d ranges; want both", r.TrimmedBytes, r.DrawRefusals)
	}
	if r.Forgiven != 0 || r.Outstanding != 0 || r.Received != r.Expected {
		t.Fatalf("after every retransmission arrived at P = 0: outstanding %d, received %d + forgiven %d of %d", r.Outstanding, r.Received, r.Forgiven, r.Expected)
	}
}

// "Only gradients are forgivable. Everything else is requested for
// retransmission." A tensor-parallel flow whose receive carries the tag
// of a step with an open budget (P_high = 0.5) is trimmed and never
// forgiven: it arrives byte-exact, and the step's ledger counts none of it.
func TestNonGradientOnOpenStepIsNeverForgiven(t *testing.T) {
	opts := map[uint16]hostOpts{1: {forgive: true, pHigh: 0.5}, 2: {forgive: true, cc: "none"}, 3: {cc: "none"}}
	s := newStar(t, 3, "200Mbps", opts)
	c1, c2, c3 := s.client(1), s.client(2), s.client(3)
	const size = 8 << 20
	nc := false
	ctx := context.Background()
	if err := c1.BeginStep(ctx, hostapi.StepReq{Step: 5, Critical: &nc, ExpectedGradientBytes: size}); err != nil {
		t.Fatal(err)
	}
	tensor := prepare(t, c2, c1, 2, 1, 51, hostapi.ClassTensor, size, 5) // tagged with the open step
	noise := prepare(t, c3, c1, 3, 1, 52, hostapi.ClassOther, size, 0)
	tensor.send()
	noise.send()
	for range 2 {
		comp := awaitKind(t, c1, hostapi.KindRecv, hangGuard)
		if comp.Status != hostapi.StatusOK || len(comp.Forgiven) != 0 {
			t.Fatalf("receive %d: status %s (%s), %d bytes forgiven in %d ranges; want success with nothing forgiven",
				comp.WRID, comp.Status, comp.Err, comp.ForgivenBytes(), len(comp.Forgiven))
		}
	}
	if !bytes.Equal(tensor.dst, tensor.src) || !bytes.Equal(noise.dst, noise.src) {
		t.Fatal("received bytes differ from the bytes sent")
	}
	rx := flowValues(t, c1, 51)
	if rx["trimmed_recv"] == 0 {
		t.Fatalf("the tensor flow was never trimmed (%d CE marks): the test saw no chance to forgive", rx["ce_marked"])
	}
	if rx["forgiven_bytes"] != 0 {
		t.Fatalf("the receiver forgave %d tensor-parallel bytes", rx["forgiven_bytes"])
	}
	if tx := flowValues(t, c2, 51); tx["ever_exempt"] != 0 {
		t.Fatal("a tensor-parallel sender was exempt")
	}
	r := stepRecord(t, c1, 5)
	if r.Forgiven != 0 || r.Received != 0 || r.Trims != 0 {
		t.Fatalf("step 5 counted non-gradient traffic: %+v", r)
	}
	t.Logf("tensor flow: %d trimmed headers, %d bytes trimmed, all retransmitted; step 5 untouched", rx["trimmed_recv"], rx["trimmed_bytes"])
}

// "An exempt sender ignores ECN marks as well as trims" and "A refusal
// alone does not end the exemption": with P = 0 the receiver forgives
// nothing and requests every trimmed range, but the budget (P_high = 0.5)
// is never exhausted, so the gradient sender stays exempt; it neither cuts
// its rate on the CNPs nor on the NACKs.
func TestExemptSenderIgnoresCNPsAndNACKs(t *testing.T) {
	p0 := 0.0
	opts := map[uint16]hostOpts{1: {forgive: true, pHigh: 0.5, p: &p0}, 2: {forgive: true}, 3: {cc: "none"}}
	s := newStar(t, 3, "200Mbps", opts)
	c1, c2, c3 := s.client(1), s.client(2), s.client(3)
	const size = 8 << 20
	nc := false
	ctx := context.Background()
	if err := c1.BeginStep(ctx, hostapi.StepReq{Step: 1, Critical: &nc, ExpectedGradientBytes: size}); err != nil {
		t.Fatal(err)
	}
	grad := prepare(t, c2, c1, 2, 1, 61, hostapi.ClassGradient, size, 1)
	noise := prepare(t, c3, c1, 3, 1, 62, hostapi.ClassOther, size, 0)
	grad.send()
	noise.send()
	for range 2 {
		comp := awaitKind(t, c1, hostapi.KindRecv, hangGuard)
		if comp.Status != hostapi.StatusOK || len(comp.Forgiven) != 0 {
			t.Fatalf("receive %d: status %s (%s), %d bytes forgiven; want success with nothing forgiven at P = 0",
				comp.WRID, comp.Status, comp.Err, comp.ForgivenBytes())
		}
	}
	if !bytes.Equal(grad.dst, grad.src) {
		t.Fatal("gradient bytes differ at P = 0")
	}
	tx := flowValues(t, c2, 61)
	t.Logf("exempt sender: %d CNPs (%d ignored), %d NACKs, %d rate cuts, %d mode changes, rate %d b/s",
		tx["cnps_recv"], tx["cnps_ignored"], tx["nacks_recv"], tx["rate_cuts"], tx["mode_changes"], tx["rate_bps"])
	if tx["nacks_recv"] == 0 || tx["cnps_recv"] == 0 {
		t.Fatalf("the sender saw %d NACKs and %d CNPs; the test needs both", tx["nacks_recv"], tx["cnps_recv"])
	}
	if tx["ever_exempt"] != 1 || tx["mode_changes"] != 1 {
		t.Fatalf("the sender should turn exempt once and stay so: ever exempt %d, %d mode changes", tx["ever_exempt"], tx["mode_changes"])
	}
	if tx["cnps_ignored"] != tx["cnps_recv"] || tx["rate_cuts"] != 0 || tx["rate_bps"] != 200e6 {
		t.Fatalf("the exempt sender ignored %d of %d CNPs and cut its rate %d times (ends at %d b/s); want no cut at all",
			tx["cnps_ignored"], tx["cnps_recv"], tx["rate_cuts"], tx["rate_bps"])
	}
	r := stepRecord(t, c1, 1)
	if r.Forgiven != 0 || r.DrawRefusals == 0 {
		t.Fatalf("at P = 0 the draw should refuse every trimmed range: %+v", r)
	}
}
