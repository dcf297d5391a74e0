package simhost

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/nic"
)

// fakeClock counts the wake-ups a host API asks for.
type fakeClock struct {
	now   time.Duration
	wakes int
}

func (c *fakeClock) Now() time.Duration { return c.now }
func (c *fakeClock) Wake(int)           { c.wakes++ }

func newClient(t *testing.T) (*Client, *fakeClock) {
	t.Helper()
	e, err := nic.New(nic.DefaultConfig(3, 1e9))
	if err != nil {
		t.Fatal(err)
	}
	c := &fakeClock{}
	return New(e, 0, c), c
}

var ctx = context.Background()

// A posted receive on a destroyed flow completes with an error before
// DestroyFlow returns, to the handler when one is set and to TryPoll
// otherwise; a region with posted work cannot be closed until then.
func TestDestroyFailsPostedWorkAndFreesTheRegion(t *testing.T) {
	p, clock := newClient(t)
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
	p, _ := newClient(t)
	for i := range hostapi.DefaultLimits.MaxRegions {
		if _, err := p.RegisterMemory(ctx, 8); err != nil {
			t.Fatalf("region %d: %v", i, err)
		}
	}
	if _, err := p.RegisterMemory(ctx, 8); !errors.Is(err, hostapi.ErrLimitExceeded) {
		t.Fatalf("one region past the limit: %v", err)
	}
}

// What hostapi.Client refuses before sending, and so the daemon's table
// cannot hold, the host API refuses as the daemon's decoder would.
func TestPortRefusesWhatTheClientCannotSend(t *testing.T) {
	p, _ := newClient(t)
	if _, err := p.RegisterMemory(ctx, 0); !errors.Is(err, hostapi.ErrBadRequest) {
		t.Errorf("zero-length region: %v", err)
	}
	if err := p.CreateFlow(ctx, hostapi.FlowSpec{Flow: 8, Peer: 4}); !errors.Is(err, hostapi.ErrBadRequest) {
		t.Errorf("flow without a class: %v", err)
	}
	mem, err := p.RegisterMemory(ctx, 64)
	if err != nil {
		t.Fatal(err)
	}
	if err := mem.Close(); err != nil {
		t.Fatal(err)
	}
	if err := mem.Close(); !errors.Is(err, hostapi.ErrNoSuchRegion) {
		t.Errorf("closing a region twice: %v", err)
	}
	if ct, _ := p.Counters(ctx); ct.Client.Regions != 0 || ct.Client.Flows != 0 || ct.Client.RegisteredBytes != 0 {
		t.Errorf("refused requests left state: %+v", ct.Client)
	}
}

// The simulator's host API opens a flow with a path per message, as the
// daemon does.
func TestMessageEntropyFlow(t *testing.T) {
	p, _ := newClient(t)
	if err := p.CreateFlow(ctx, hostapi.FlowSpec{Flow: 5, Peer: 4, Class: hostapi.ClassGradient, Entropy: hostapi.EntropyMessage}); err != nil {
		t.Fatal(err)
	}
	r, ok := p.Engine().Flow(nic.FlowKey{Peer: 4, ID: 5})
	if !ok || r.Spec.Entropy != nic.EntropyMessage {
		t.Fatalf("the engine's flow: %+v, %v", r.Spec, ok)
	}
}
