package nicapi_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/hostapi/nicapi"
	"github.com/forgive-emu/forgive/nic"
)

type routed struct {
	c    hostapi.ClientID
	comp hostapi.Completion
}

// newHost returns a host whose driver hands each completion to its client
// at once, as the simulator's does (written: Written as it routes).
func newHost(t *testing.T, limits hostapi.Limits) (*nicapi.Host, *[]routed) {
	return newHostWriting(t, limits, true)
}

func newHostWriting(t *testing.T, limits hostapi.Limits, written bool) (*nicapi.Host, *[]routed) {
	t.Helper()
	e, err := nic.New(nic.DefaultConfig(3, 1e9))
	if err != nil {
		t.Fatal(err)
	}
	var got []routed
	var h *nicapi.Host
	h = nicapi.New(e, limits, func(c hostapi.ClientID, comp hostapi.Completion) {
		got = append(got, routed{c, comp})
		if written {
			h.Written(c, 1)
		}
	})
	return h, &got
}

// A work request stays outstanding until its completion is written to
// the client (Written), not when the engine makes it: a client that stops
// reading runs into MaxOutstanding.
func TestOutstandingUntilWritten(t *testing.T) {
	h, got := newHostWriting(t, hostapi.Limits{MaxOutstanding: 2}, false)
	const a, b hostapi.ClientID = 1, 2
	r, err := h.RegisterMemory(a, make([]byte, 100))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.CreateFlow(0, a, hostapi.FlowSpec{Flow: 1, Peer: 4, Class: hostapi.ClassOther}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := h.PostRecv(a, hostapi.RecvReq{Flow: 1, Region: r, Length: 10, WRID: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.DestroyFlow(a, 1); err != nil {
		t.Fatal(err)
	}
	if len(*got) != 2 {
		t.Fatalf("%d completions routed, want the two failed receives", len(*got))
	}
	if err := h.CreateFlow(0, a, hostapi.FlowSpec{Flow: 2, Peer: 4, Class: hostapi.ClassOther}); err != nil {
		t.Fatal(err)
	}
	if c := h.Counters(a).Client; c.Outstanding != 2 {
		t.Fatalf("outstanding %d with two completions routed and not written, want 2", c.Outstanding)
	}
	if err := h.PostRecv(a, hostapi.RecvReq{Flow: 2, Region: r, Length: 10, WRID: 5}); !errors.Is(err, hostapi.ErrLimitExceeded) {
		t.Fatalf("a post while both completions are unwritten: %v, want limit_exceeded", err)
	}
	h.Written(b, 1) // another client's writes free none of a's
	h.Written(a, 1)
	if err := h.PostRecv(a, hostapi.RecvReq{Flow: 2, Region: r, Length: 10, WRID: 5}); err != nil {
		t.Fatalf("a post after one completion was written: %v", err)
	}
	h.Written(a, 5) // past the work outstanding: none left, not fewer than none
	if c := h.Counters(a).Client; c.Outstanding != 0 {
		t.Fatalf("outstanding %d after more writes than work, want 0", c.Outstanding)
	}
	if c := h.Counters(b).Client; c.Outstanding != 0 {
		t.Fatalf("b outstanding %d", c.Outstanding)
	}
	h.ClientGone(a)
	h.Written(a, 1) // a completion written after the client went: nothing to release
	if c := h.Counters(a).Client; c != (hostapi.ClientCounters{}) {
		t.Fatalf("a gone client holds %+v", c)
	}
}

// Two clients of one host: neither can name the other's regions or
// flows, a flow id is the host's, and each one's completions go to it.
func TestClientsAreIsolated(t *testing.T) {
	h, got := newHost(t, hostapi.Limits{})
	const a, b hostapi.ClientID = 1, 2
	ra, err := h.RegisterMemory(a, make([]byte, 4096))
	if err != nil {
		t.Fatal(err)
	}
	rb, err := h.RegisterMemory(b, make([]byte, 4096))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.CreateFlow(0, a, hostapi.FlowSpec{Flow: 5, Peer: 4, Class: hostapi.ClassOther}); err != nil {
		t.Fatal(err)
	}
	if err := h.CreateFlow(0, b, hostapi.FlowSpec{Flow: 6, Peer: 4, Class: hostapi.ClassOther}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"send on a's flow", h.PostSend(0, b, hostapi.SendReq{Flow: 5, Region: rb, Length: 1}), hostapi.ErrNoSuchFlow},
		{"recv into a's region", h.PostRecv(b, hostapi.RecvReq{Flow: 6, Region: ra, Length: 1}), hostapi.ErrNoSuchRegion},
		{"deregister a's region", h.DeregisterMemory(b, ra), hostapi.ErrNoSuchRegion},
		{"destroy a's flow", h.DestroyFlow(b, 5), hostapi.ErrNoSuchFlow},
		{"create a's flow id", h.CreateFlow(0, b, hostapi.FlowSpec{Flow: 5, Peer: 4, Class: hostapi.ClassOther}), hostapi.ErrFlowExists},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if owner, ok := h.FlowOwner(5); !ok || owner != a {
		t.Fatalf("FlowOwner(5) = %d, %v", owner, ok)
	}
	if err := h.PostRecv(a, hostapi.RecvReq{Flow: 5, Region: ra, Length: 64, WRID: 41}); err != nil {
		t.Fatal(err)
	}
	if err := h.PostRecv(b, hostapi.RecvReq{Flow: 6, Region: rb, Length: 64, WRID: 42}); err != nil {
		t.Fatal(err)
	}
	if ca, cb := h.Counters(a).Client, h.Counters(b).Client; ca.Outstanding != 1 || cb.Outstanding != 1 || ca.Flows != 1 || cb.Regions != 1 {
		t.Fatalf("counters a %+v, b %+v", ca, cb)
	}
	if fl := h.Counters(a).Flows; len(fl) != 1 || fl[0].Flow != 5 || fl[0].Peer != 4 {
		t.Fatalf("a's flows: %+v", fl)
	}

	// a goes: its flow's work fails to a, its flow id is free again, and
	// b is untouched.
	h.ClientGone(a)
	if len(*got) != 1 || (*got)[0].c != a || (*got)[0].comp.WRID != 41 || (*got)[0].comp.Status != hostapi.StatusError {
		t.Fatalf("completions after a left: %+v", *got)
	}
	if _, ok := h.FlowOwner(5); ok || h.Flows() != 1 {
		t.Fatalf("a's flow outlived it: %d flows", h.Flows())
	}
	if err := h.CreateFlow(0, b, hostapi.FlowSpec{Flow: 5, Peer: 4, Class: hostapi.ClassOther}); err != nil {
		t.Fatalf("a's flow id after a left: %v", err)
	}
	if n := len(h.Engine().Flows()); n != 2 {
		t.Fatalf("%d engine flows, want b's two", n)
	}
	if err := h.DestroyFlow(b, 6); err != nil {
		t.Fatal(err)
	}
	if len(*got) != 2 || (*got)[1].c != b || (*got)[1].comp.WRID != 42 {
		t.Fatalf("completions after destroy: %+v", *got)
	}
	if cb := h.Counters(b).Client; cb.Outstanding != 0 || cb.Flows != 1 {
		t.Fatalf("b after its flow's work failed: %+v", cb)
	}
	// A completion of a flow no client holds is dropped and counted.
	h.Route(nic.Completion{Flow: nic.FlowKey{Peer: 4, ID: 99}, WR: 1, Kind: nic.WorkRecv})
	if len(*got) != 2 || h.Unrouted() != 1 {
		t.Fatalf("a stray completion: %d routed, %d unrouted", len(*got), h.Unrouted())
	}
}

// Limits are per client: one client at its limit does not stop another,
// and what a client releases it may take again.
func TestLimitsArePerClient(t *testing.T) {
	h, _ := newHost(t, hostapi.Limits{MaxRegions: 2, MaxRegisteredBytes: 100, MaxFlows: 1, MaxOutstanding: 2})
	if lim := h.Limits(); lim.CompletionQueue != hostapi.DefaultLimits.CompletionQueue || lim.MaxFlows != 1 {
		t.Fatalf("limits %+v: zero fields take the defaults, the others stay", lim)
	}
	const a, b hostapi.ClientID = 1, 2
	r1, err := h.RegisterMemory(a, make([]byte, 60))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.RegisterMemory(a, make([]byte, 41)); !errors.Is(err, hostapi.ErrLimitExceeded) {
		t.Fatalf("60+41 bytes: %v", err)
	}
	if _, err := h.RegisterMemory(a, make([]byte, 40)); err != nil {
		t.Fatalf("60+40 bytes: %v", err)
	}
	if err := h.CheckRegister(a, 1); !errors.Is(err, hostapi.ErrLimitExceeded) {
		t.Fatalf("a third region: %v", err)
	}
	if err := h.CheckRegister(b, 100); err != nil {
		t.Fatalf("b's first region: %v", err)
	}
	if err := h.CheckRegister(b, 0); !errors.Is(err, hostapi.ErrBadRequest) {
		t.Fatalf("an empty region: %v", err)
	}
	if err := h.CreateFlow(0, a, hostapi.FlowSpec{Flow: 1, Peer: 4, Class: hostapi.ClassOther}); err != nil {
		t.Fatal(err)
	}
	if err := h.CreateFlow(0, a, hostapi.FlowSpec{Flow: 2, Peer: 4, Class: hostapi.ClassOther}); !errors.Is(err, hostapi.ErrLimitExceeded) {
		t.Fatalf("a's second flow: %v", err)
	}
	if err := h.CreateFlow(0, b, hostapi.FlowSpec{Flow: 2, Peer: 4, Class: hostapi.ClassOther}); err != nil {
		t.Fatalf("b's first flow: %v", err)
	}
	for i := range 2 {
		if err := h.PostRecv(a, hostapi.RecvReq{Flow: 1, Region: r1, Length: 10, WRID: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.PostRecv(a, hostapi.RecvReq{Flow: 1, Region: r1, Length: 10, WRID: 9}); !errors.Is(err, hostapi.ErrLimitExceeded) {
		t.Fatalf("a third work request: %v", err)
	}
	if err := h.DeregisterMemory(a, r1); !errors.Is(err, hostapi.ErrBackend) {
		t.Fatalf("deregistering a region with posted work: %v", err)
	}
	if err := h.DestroyFlow(a, 1); err != nil {
		t.Fatal(err)
	}
	if err := h.DeregisterMemory(a, r1); err != nil {
		t.Fatal(err)
	}
	if c := h.Counters(a).Client; c.Regions != 1 || c.RegisteredBytes != 40 || c.Flows != 0 || c.Outstanding != 0 {
		t.Fatalf("a after releasing: %+v", c)
	}
	if err := h.CheckRegister(a, 60); err != nil {
		t.Fatalf("a's released bytes: %v", err)
	}
}

// Steps, EndStep and BeginStep check what the ledger can hold.
func TestStepChecks(t *testing.T) {
	h, _ := newHost(t, hostapi.Limits{})
	if err := h.EndStep(0, 1, 1); !errors.Is(err, hostapi.ErrNoSuchStep) {
		t.Fatalf("EndStep of a step never begun: %v", err)
	}
	crit := false
	for s := range uint64(3) {
		if err := h.BeginStep(0, 1, hostapi.StepReq{Step: s + 1, Critical: &crit, ExpectedGradientBytes: 4096}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.EndStep(0, 1, 2); err != nil {
		t.Fatalf("EndStep of a begun step: %v", err)
	}
	recs, err := h.Steps(1, 2)
	if err != nil || len(recs) != 2 || recs[0].Step != 2 || recs[1].Step != 3 {
		t.Fatalf("the last two records: %+v, %v", recs, err)
	}
	for _, r := range recs {
		if !r.InvariantHeld || r.Forgiven > r.Budget || float64(r.Forgiven) > r.P/(1-r.P)*float64(r.Received) {
			t.Fatalf("record %+v breaks the invariants", r)
		}
	}
	if _, err := h.Steps(1, -1); !errors.Is(err, hostapi.ErrBadRequest) {
		t.Fatalf("Steps(-1): %v", err)
	}
	if err := h.BeginStep(0, 1, hostapi.StepReq{Step: 9, Critical: &crit, ExpectedGradientBytes: 1 << 62}); !errors.Is(err, hostapi.ErrBackend) {
		t.Fatalf("a step past the ledger: %v", err)
	}
}

// A job's steps outlive its clients, for a later client of the same job
// (forgivectl steps after a run); a host keeps at most MaxJobs jobs,
// forgetting the one idle longest, and refuses a new job's hello by name
// when every job has a client.
func TestJobsKeptUntilTheRoomIsNeeded(t *testing.T) {
	h, _ := newHost(t, hostapi.Limits{})
	crit := true
	if err := h.Hello(1, hostapi.Job{UID: 0, Name: "a"}); err != nil {
		t.Fatal(err)
	}
	if err := h.BeginStep(0, 1, hostapi.StepReq{Step: 3, Critical: &crit, ExpectedGradientBytes: 10}); err != nil {
		t.Fatal(err)
	}
	h.ClientGone(1)
	if err := h.Hello(2, hostapi.Job{UID: 0, Name: "a"}); err != nil {
		t.Fatal(err)
	}
	if recs, err := h.Steps(2, 0); err != nil || len(recs) != 1 || recs[0].Step != 3 {
		t.Fatalf("a later client of job a: steps %+v, %v; want its job's step 3", recs, err)
	}
	if recs, _ := h.Steps(3, 0); len(recs) != 0 {
		t.Fatalf("a client of the default job sees job a's steps: %+v", recs)
	}
	// Fill the host with connected jobs: one more is refused; once one
	// goes idle, a new job takes its room and the idle one is forgotten.
	for c := hostapi.ClientID(10); c < 10+nicapi.MaxJobs-1; c++ {
		if err := h.Hello(c, hostapi.Job{UID: 1, Name: fmt.Sprint(c)}); err != nil {
			t.Fatalf("job %d: %v", c, err)
		}
	}
	if err := h.Hello(5000, hostapi.Job{UID: 1, Name: "one-more"}); !errors.Is(err, hostapi.ErrLimitExceeded) {
		t.Fatalf("a job over MaxJobs, every job connected: %v", err)
	}
	h.ClientGone(2)
	if err := h.Hello(5001, hostapi.Job{UID: 1, Name: "one-more"}); err != nil {
		t.Fatalf("a new job once job a is idle: %v", err)
	}
	if err := h.Hello(5002, hostapi.Job{UID: 0, Name: "a"}); !errors.Is(err, hostapi.ErrLimitExceeded) {
		t.Fatalf("job a again, forgotten and the host full: %v", err)
	}
}
