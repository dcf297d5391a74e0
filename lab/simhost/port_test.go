package simhost

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/nic"
)

// fakeClock counts the wake-ups a port asks for.
type fakeClock struct {
	now   time.Duration
	wakes int
}

func (c *fakeClock) Now() time.Duration { return c.now }
func (c *fakeClock) Wake(int)           { c.wakes++ }

func newPort(t *testing.T) (*Port, *fakeClock) {
	t.Helper()
	e, err := nic.New(nic.DefaultConfig(3, 1e9))
	if err != nil {
		t.Fatal(err)
	}
	c := &fakeClock{}
	return New(e, 0, c), c
}

var ctx = context.Background()

// Every refusal a daemon's server makes, the in-process port makes with
// the same code: the workload meets the same host API in the simulator.
func TestRefusalsMatchTheDaemon(t *testing.T) {
	p, _ := newPort(t)
	mem, err := p.RegisterMemory(ctx, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CreateFlow(ctx, hostapi.FlowSpec{Flow: 7, Peer: 4, Class: hostapi.ClassGradient}); err != nil {
		t.Fatal(err)
	}
	region := mem.ID()
	cases := []struct {
		name string
		err  error
		want error
	}{
		{"zero-length region", func() error { _, err := p.RegisterMemory(ctx, 0); return err }(), hostapi.ErrBadRequest},
		{"flow 0", p.CreateFlow(ctx, hostapi.FlowSpec{Flow: 0, Peer: 4, Class: hostapi.ClassGradient}), hostapi.ErrBadRequest},
		{"no class", p.CreateFlow(ctx, hostapi.FlowSpec{Flow: 8, Peer: 4}), hostapi.ErrBadRequest},
		{"subflows without subflow entropy", p.CreateFlow(ctx, hostapi.FlowSpec{Flow: 8, Peer: 4, Class: hostapi.ClassTensor, Subflows: 3}), hostapi.ErrBadRequest},
		{"flow exists", p.CreateFlow(ctx, hostapi.FlowSpec{Flow: 7, Peer: 5, Class: hostapi.ClassGradient}), hostapi.ErrFlowExists},
		{"flow to itself", p.CreateFlow(ctx, hostapi.FlowSpec{Flow: 9, Peer: 3, Class: hostapi.ClassGradient}), hostapi.ErrBackend},
		{"unknown flow", p.PostSend(ctx, hostapi.SendReq{Flow: 99, Region: region, Length: 10, WRID: 1}), hostapi.ErrNoSuchFlow},
		{"bad region", p.PostSend(ctx, hostapi.SendReq{Flow: 7, Region: region + 1, Length: 10, WRID: 1}), hostapi.ErrNoSuchRegion},
		{"region 0", p.PostRecv(ctx, hostapi.RecvReq{Flow: 7, Region: 0, Length: 10, WRID: 1}), hostapi.ErrBadRequest},
		{"out of bounds", p.PostRecv(ctx, hostapi.RecvReq{Flow: 7, Region: region, Offset: 4000, Length: 100, WRID: 1}), hostapi.ErrOutOfBounds},
		{"offset overflows", p.PostSend(ctx, hostapi.SendReq{Flow: 7, Region: region, Offset: ^uint64(0), Length: 2, WRID: 1}), hostapi.ErrOutOfBounds},
		{"zero length", p.PostSend(ctx, hostapi.SendReq{Flow: 7, Region: region, Length: 0, WRID: 1}), hostapi.ErrBadRequest},
		{"destroy unknown flow", p.DestroyFlow(ctx, 99), hostapi.ErrNoSuchFlow},
		{"critical and norms", p.BeginStep(ctx, hostapi.StepReq{Step: 1, Critical: new(bool), Norms: []float64{1}}), hostapi.ErrBadRequest},
		{"unclassified step", p.BeginStep(ctx, hostapi.StepReq{Step: 1}), hostapi.ErrBadRequest},
		{"expected bytes past the ledger", p.BeginStep(ctx, hostapi.StepReq{Step: 1, Critical: new(bool), ExpectedGradientBytes: 1 << 62}), hostapi.ErrBackend},
		{"steps limit", func() error { _, err := p.Steps(ctx, -1); return err }(), hostapi.ErrBadRequest},
	}
	for _, c := range cases {
		if !errors.Is(c.err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, c.err, c.want)
		}
	}
	if ct, _ := p.Counters(ctx); ct.Client.Outstanding != 0 || ct.Client.Flows != 1 || ct.Client.Regions != 1 {
		t.Fatalf("refused requests changed the port's state: %+v", ct.Client)
	}
}

// A posted receive on a destroyed flow completes with an error before
// DestroyFlow returns, to the handler when one is set and to TryPoll
// otherwise; a region with posted work cannot be closed until then.
func TestDestroyFailsPostedWorkAndFreesTheRegion(t *testing.T) {
	p, clock := newPort(t)
	mem, err := p.RegisterMemory(ctx, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CreateFlow(ctx, hostapi.FlowSpec{Flow: 7, Peer: 4, Class: hostapi.ClassPipeline}); err != nil {
		t.Fatal(err)
	}
	if err := p.PostRecv(ctx, hostapi.RecvReq{Flow: 7, Region: mem.ID(), Length: 512, WRID: 42}); err != nil {
		t.Fatal(err)
	}
	if clock.wakes < 2 {
		t.Fatalf("%d wake-ups after creating a flow and posting: the simulator would not see the work", clock.wakes)
	}
	if err := mem.Close(); !errors.Is(err, hostapi.ErrBackend) {
		t.Fatalf("closing a region with posted work: %v", err)
	}
	if err := p.DestroyFlow(ctx, 7); err != nil {
		t.Fatal(err)
	}
	c, ok := p.TryPoll()
	if !ok || c.WRID != 42 || c.Status != hostapi.StatusError || c.Kind != hostapi.KindRecv {
		t.Fatalf("completion after destroy: %+v, %v", c, ok)
	}
	if _, ok := p.TryPoll(); ok {
		t.Fatal("a second completion for one work request")
	}
	if err := mem.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mem.Close(); !errors.Is(err, hostapi.ErrNoSuchRegion) {
		t.Fatalf("closing twice: %v", err)
	}

	// With a handler, the completion goes there and not to the queue.
	if err := p.CreateFlow(ctx, hostapi.FlowSpec{Flow: 8, Peer: 4, Class: hostapi.ClassOther}); err != nil {
		t.Fatal(err)
	}
	mem, _ = p.RegisterMemory(ctx, 64)
	if err := p.PostSend(ctx, hostapi.SendReq{Flow: 8, Region: mem.ID(), Length: 64, WRID: 43}); err != nil {
		t.Fatal(err)
	}
	var got []hostapi.Completion
	p.OnCompletion(func(c hostapi.Completion) { got = append(got, c) })
	if err := p.DestroyFlow(ctx, 8); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].WRID != 43 || got[0].Kind != hostapi.KindSend {
		t.Fatalf("handler saw %+v", got)
	}
	if _, ok := p.TryPoll(); ok {
		t.Fatal("the completion was queued as well")
	}
	// A completion of a flow the client does not have is dropped.
	p.Complete(nic.Completion{Flow: nic.FlowKey{Peer: 4, ID: 99}, WR: 1, Kind: nic.WorkRecv})
	if len(got) != 1 {
		t.Fatal("a foreign completion reached the client")
	}
}

// Limits are the server's defaults: a client cannot register past them.
func TestRegionLimit(t *testing.T) {
	p, _ := newPort(t)
	for i := range hostapi.DefaultLimits.MaxRegions {
		if _, err := p.RegisterMemory(ctx, 8); err != nil {
			t.Fatalf("region %d: %v", i, err)
		}
	}
	if _, err := p.RegisterMemory(ctx, 8); !errors.Is(err, hostapi.ErrLimitExceeded) {
		t.Fatalf("one region past the limit: %v", err)
	}
}
