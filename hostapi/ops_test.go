package hostapi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"testing"

	"github.com/forgive-emu/forgive/hostapi"
)

// TestEveryOpRoundTrips drives one rank through a whole step: every op
// reaches the backend with the fields the client sent, and every reply
// comes back with the backend's answer.
func TestEveryOpRoundTrips(t *testing.T) {
	h := newHarness(t, hostapi.ServerConfig{HostID: 3, HostName: "rank-host-3"})
	c := h.dial()
	ctx := context.Background()

	info := c.Info()
	if info.Version != hostapi.Version || info.HostID != 3 || info.HostName != "rank-host-3" || info.Client == 0 {
		t.Fatalf("hello = %+v", info)
	}
	if info.Limits != hostapi.DefaultLimits {
		t.Errorf("hello limits = %+v, want the defaults %+v", info.Limits, hostapi.DefaultLimits)
	}

	src, err := c.RegisterMemory(ctx, 8192)
	must(t, err)
	dst, err := c.RegisterMemory(ctx, 8192)
	must(t, err)
	if src.ID() == dst.ID() || src.Len() != 8192 {
		t.Fatalf("regions %d and %d of %d bytes", src.ID(), dst.ID(), src.Len())
	}

	spec := hostapi.FlowSpec{Flow: 11, Peer: 4, Class: hostapi.ClassGradient, Entropy: hostapi.EntropySubflows, Subflows: 4}
	must(t, c.CreateFlow(ctx, spec))
	if got := h.be.flowSpec(11); got != spec {
		t.Errorf("backend flow spec = %+v, want %+v", got, spec)
	}

	// "Which step is beginning, and what its gradient norms say. How many
	// gradient bytes the step will bring this rank."
	must(t, c.BeginStep(ctx, hostapi.StepReq{Step: 1, Norms: []float64{1.5, 0.25}, LRDecay: true, ExpectedGradientBytes: 5000}))
	must(t, c.BeginStep(ctx, hostapi.StepReq{Step: 2, Critical: new(false), ExpectedGradientBytes: 6000}))

	h.be.set(func(b *echoBackend) { b.forgive = []hostapi.Range{{Start: 100, End: 150}} })
	payload := bytes.Repeat([]byte("gradient"), 500) // 4000 bytes
	copy(src.Bytes()[1000:], payload)
	must(t, c.PostRecv(ctx, hostapi.RecvReq{Flow: 11, Region: dst.ID(), Offset: 2000, Length: 4096, Step: 1, WRID: 7}))
	must(t, c.PostSend(ctx, hostapi.SendReq{Flow: 11, Region: src.ID(), Offset: 1000, Length: 4000, WRID: 8}))

	recv, send := poll(t, c), poll(t, c)
	wantRecv := hostapi.Completion{WRID: 7, Kind: hostapi.KindRecv, Flow: 11, Status: hostapi.StatusOK, Len: 4000, Step: 1,
		Forgiven: []hostapi.Range{{Start: 100, End: 150}}}
	if !reflect.DeepEqual(recv, wantRecv) {
		t.Errorf("recv completion = %+v, want %+v", recv, wantRecv)
	}
	if want := (hostapi.Completion{WRID: 8, Kind: hostapi.KindSend, Flow: 11, Status: hostapi.StatusOK, Len: 4000}); !reflect.DeepEqual(send, want) {
		t.Errorf("send completion = %+v, want %+v", send, want)
	}
	// "the application gets a completion that lists the byte ranges that
	// were forgiven (zero-filled in its memory)".
	want := slices.Clone(payload)
	clear(want[100:150])
	if got := dst.Bytes()[2000:6000]; !bytes.Equal(got, want) {
		t.Errorf("received bytes differ from sent bytes outside the forgiven range")
	}

	must(t, c.EndStep(ctx, 1))
	if err := c.EndStep(ctx, 99); !isCode(err, "no_such_step") {
		t.Errorf("EndStep(99) = %v, want the backend's own code no_such_step", err)
	}

	steps, err := c.Steps(ctx, 0)
	must(t, err)
	wantSteps := []hostapi.StepRecord{
		{Step: 1, Critical: true, Expected: 5000, Open: false, InvariantHeld: true},
		{Step: 2, Critical: false, Expected: 6000, Open: true, InvariantHeld: true},
	}
	if !reflect.DeepEqual(steps, wantSteps) {
		t.Errorf("steps = %+v, want %+v", steps, wantSteps)
	}
	if last, err := c.Steps(ctx, 1); err != nil || len(last) != 1 || last[0].Step != 2 {
		t.Errorf("Steps(limit 1) = %+v, %v; want only the latest step", last, err)
	}

	ctr, err := c.Counters(ctx)
	must(t, err)
	if ctr.Host.TxPackets != 1 || len(ctr.Flows) != 1 || ctr.Flows[0].Flow != 11 || ctr.Flows[0].Peer != 4 {
		t.Errorf("backend counters = %+v", ctr)
	}
	if cc := ctr.Client; cc.Regions != 2 || cc.RegisteredBytes != 16384 || cc.Flows != 1 || cc.Outstanding != 0 ||
		cc.Completions != 2 || cc.ErrorReplies != 1 || cc.Requests < 9 {
		t.Errorf("client counters = %+v", cc)
	}

	st, err := c.Status(ctx)
	must(t, err)
	if st.HostID != 3 || st.HostName != "rank-host-3" || st.Protocol != hostapi.Version || st.Clients != 1 ||
		st.Regions != 2 || st.RegisteredBytes != 16384 || st.Flows != 1 || st.Backend["kind"] != "echo" || st.Uptime <= 0 {
		t.Errorf("status = %+v", st)
	}

	must(t, c.DestroyFlow(ctx, 11))
	must(t, src.Close())
	must(t, dst.Close())
	if got, want := h.be.callsOf(info.Client), []string{
		"register_memory", "register_memory", "create_flow", "begin_step", "begin_step",
		"post_recv", "post_send", "end_step", "end_step", "steps", "steps", "counters",
		"destroy_flow", "deregister_memory", "deregister_memory",
	}; !slices.Equal(got, want) {
		t.Errorf("backend calls = %v\nwant %v", got, want)
	}
	if st := h.srv.Stats(); st.Regions != 0 || st.Flows != 0 || st.RegisteredBytes != 0 {
		t.Errorf("server still holds %+v", st)
	}
}

func poll(tb testing.TB, c *hostapi.Client) hostapi.Completion {
	tb.Helper()
	comp, err := c.Poll(context.Background())
	must(tb, err)
	return comp
}

// TestRegisteredMemoryIsShared: "a memfd passed over the unix socket,
// mapped by the daemon: the emulated memory registration". What the
// application writes the backend reads, and the other way round, with no
// payload crossing the socket.
func TestRegisteredMemoryIsShared(t *testing.T) {
	h := newHarness(t, hostapi.ServerConfig{})
	c := h.dial()
	r, err := c.RegisterMemory(context.Background(), 3*4096+5) // not page aligned
	must(t, err)

	copy(r.Bytes(), "written by the application")
	r.Bytes()[r.Len()-1] = 0xA5
	daemon := h.be.region(c.Info().Client, r.ID())
	if len(daemon) != r.Len() {
		t.Fatalf("backend sees %d bytes, region has %d", len(daemon), r.Len())
	}
	if !bytes.HasPrefix(daemon, []byte("written by the application")) || daemon[len(daemon)-1] != 0xA5 {
		t.Errorf("backend does not see the application's writes")
	}

	copy(daemon[4096:], "written by the daemon")
	if !bytes.HasPrefix(r.Bytes()[4096:], []byte("written by the daemon")) {
		t.Errorf("application does not see the backend's writes")
	}
}

// TestClientsAreIsolated: a client can only name its own regions and flows;
// the server refuses the rest before the backend hears of it.
func TestClientsAreIsolated(t *testing.T) {
	h := newHarness(t, hostapi.ServerConfig{})
	ctx := context.Background()
	a, b := h.dial(), h.dial()

	ra, err := a.RegisterMemory(ctx, 4096)
	must(t, err)
	must(t, a.CreateFlow(ctx, hostapi.FlowSpec{Flow: 5, Class: hostapi.ClassGradient}))
	rb, err := b.RegisterMemory(ctx, 4096)
	must(t, err)
	must(t, b.CreateFlow(ctx, hostapi.FlowSpec{Flow: 6, Class: hostapi.ClassTensor}))
	callsBefore := h.be.callsOf(b.Info().Client)

	for _, tc := range []struct {
		name string
		err  error
		want *hostapi.Error
	}{
		{"send on a's flow", b.PostSend(ctx, hostapi.SendReq{Flow: 5, Region: rb.ID(), Length: 1}), hostapi.ErrNoSuchFlow},
		{"recv on a's flow", b.PostRecv(ctx, hostapi.RecvReq{Flow: 5, Region: rb.ID(), Length: 1}), hostapi.ErrNoSuchFlow},
		{"send from a's region", b.PostSend(ctx, hostapi.SendReq{Flow: 6, Region: ra.ID(), Length: 1}), hostapi.ErrNoSuchRegion},
		{"recv into a's region", b.PostRecv(ctx, hostapi.RecvReq{Flow: 6, Region: ra.ID(), Length: 1}), hostapi.ErrNoSuchRegion},
		{"deregister a's region", hostapi.DeregisterForTest(b, ra.ID()), hostapi.ErrNoSuchRegion},
		{"destroy a's flow", b.DestroyFlow(ctx, 5), hostapi.ErrNoSuchFlow},
		{"create a's flow id", b.CreateFlow(ctx, hostapi.FlowSpec{Flow: 5, Class: hostapi.ClassOther}), hostapi.ErrFlowExists},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, tc.err, tc.want.Code)
		}
	}
	if got := h.be.callsOf(b.Info().Client); !slices.Equal(got, callsBefore) {
		t.Errorf("refused requests reached the backend: %v", got[len(callsBefore):])
	}

	// a's resources are untouched and still work.
	must(t, a.PostRecv(ctx, hostapi.RecvReq{Flow: 5, Region: ra.ID(), Length: 10, WRID: 1}))
	must(t, a.PostSend(ctx, hostapi.SendReq{Flow: 5, Region: ra.ID(), Offset: 100, Length: 10, WRID: 2}))
	if comp := poll(t, a); comp.WRID != 1 || comp.Status != hostapi.StatusOK {
		t.Errorf("a's receive completed as %+v", comp)
	}
}

// TestLimitsAreEnforced checks each per-client limit, and that a freed
// slot can be used again.
func TestLimitsAreEnforced(t *testing.T) {
	ctx := context.Background()
	t.Run("regions", func(t *testing.T) {
		h := newHarness(t, hostapi.ServerConfig{Limits: hostapi.Limits{MaxRegions: 2}})
		c := h.dial()
		r1, err := c.RegisterMemory(ctx, 4096)
		must(t, err)
		_, err = c.RegisterMemory(ctx, 4096)
		must(t, err)
		if _, err := c.RegisterMemory(ctx, 4096); !errors.Is(err, hostapi.ErrLimitExceeded) {
			t.Fatalf("third region: %v, want limit_exceeded", err)
		}
		must(t, r1.Close())
		if _, err := c.RegisterMemory(ctx, 4096); err != nil {
			t.Errorf("region after freeing one: %v", err)
		}
	})
	t.Run("registered bytes", func(t *testing.T) {
		h := newHarness(t, hostapi.ServerConfig{Limits: hostapi.Limits{MaxRegisteredBytes: 8192}})
		c := h.dial()
		_, err := c.RegisterMemory(ctx, 8000)
		must(t, err)
		if _, err := c.RegisterMemory(ctx, 193); !errors.Is(err, hostapi.ErrLimitExceeded) {
			t.Fatalf("8000+193 bytes: %v, want limit_exceeded", err)
		}
		if _, err := c.RegisterMemory(ctx, 192); err != nil {
			t.Errorf("8000+192 bytes: %v", err)
		}
	})
	t.Run("flows", func(t *testing.T) {
		h := newHarness(t, hostapi.ServerConfig{Limits: hostapi.Limits{MaxFlows: 1}})
		c := h.dial()
		must(t, c.CreateFlow(ctx, hostapi.FlowSpec{Flow: 1, Class: hostapi.ClassOther}))
		if err := c.CreateFlow(ctx, hostapi.FlowSpec{Flow: 2, Class: hostapi.ClassOther}); !errors.Is(err, hostapi.ErrLimitExceeded) {
			t.Fatalf("second flow: %v, want limit_exceeded", err)
		}
		must(t, c.DestroyFlow(ctx, 1))
		must(t, c.CreateFlow(ctx, hostapi.FlowSpec{Flow: 2, Class: hostapi.ClassOther}))
	})
	t.Run("outstanding work requests", func(t *testing.T) {
		h := newHarness(t, hostapi.ServerConfig{Limits: hostapi.Limits{MaxOutstanding: 2}})
		h.be.set(func(b *echoBackend) { b.holdPosts = true })
		c := h.dial()
		r, err := c.RegisterMemory(ctx, 4096)
		must(t, err)
		must(t, c.CreateFlow(ctx, hostapi.FlowSpec{Flow: 1, Class: hostapi.ClassGradient}))
		must(t, c.PostRecv(ctx, hostapi.RecvReq{Flow: 1, Region: r.ID(), Length: 10, WRID: 1}))
		must(t, c.PostRecv(ctx, hostapi.RecvReq{Flow: 1, Region: r.ID(), Length: 10, WRID: 2}))
		if err := c.PostSend(ctx, hostapi.SendReq{Flow: 1, Region: r.ID(), Length: 10, WRID: 3}); !errors.Is(err, hostapi.ErrLimitExceeded) {
			t.Fatalf("third work request: %v, want limit_exceeded", err)
		}
		// Destroying the flow completes both receives with an error, which
		// frees their slots.
		must(t, c.DestroyFlow(ctx, 1))
		for range 2 {
			if comp := poll(t, c); comp.Status != hostapi.StatusError || comp.Err != "flow destroyed" {
				t.Errorf("flushed receive = %+v", comp)
			}
		}
		must(t, c.CreateFlow(ctx, hostapi.FlowSpec{Flow: 2, Class: hostapi.ClassGradient}))
		must(t, c.PostSend(ctx, hostapi.SendReq{Flow: 2, Region: r.ID(), Length: 10, WRID: 4}))
	})
	t.Run("clients", func(t *testing.T) {
		h := newHarness(t, hostapi.ServerConfig{MaxClients: 1})
		h.dial()
		if c, err := hostapi.Dial(h.path); !errors.Is(err, hostapi.ErrLimitExceeded) {
			if c != nil {
				c.Close()
			}
			t.Fatalf("second client: %v, want limit_exceeded", err)
		}
	})
}

// TestDisconnectReleasesEverything: when a client goes away the backend is
// told (ClientGone), its flow ids become free, and the server unmaps its
// regions. The check on the mapping reads /proc/self/maps: the test and
// the server share the process, and the test never maps the memfd itself.
func TestDisconnectReleasesEverything(t *testing.T) {
	h := newHarness(t, hostapi.ServerConfig{})
	r := h.raw()
	id := r.hello()
	name := fmt.Sprintf("hostapi-test-release-%d", os.Getpid())
	region := r.register(2, name, 1<<16)
	if rep := r.call(frame(hostapi.OpCreateFlow, 0, 3, `{"flow":42,"peer":1,"class":"gradient"}`)); rep.errCode() != "" {
		t.Fatalf("create_flow: %s", rep.errCode())
	}
	if !mapped(t, name) {
		t.Fatalf("registered memfd %s is not mapped by the server", name)
	}
	if h.be.region(id, region) == nil {
		t.Fatalf("backend does not hold the region")
	}
	if owner, ok := h.srv.FlowOwner(42); !ok || owner != id {
		t.Fatalf("FlowOwner(42) = %d, %v; want client %d", owner, ok, id)
	}

	released := h.srv.ReleasedForTest(id)
	r.c.Close()
	<-released

	if !h.be.isGone(id) {
		t.Errorf("backend ClientGone not called")
	}
	// The server is the one that knows what the client held, and says so.
	if owned := h.be.ownedAtGone(id); !slices.Equal(owned.Flows, []hostapi.FlowID{42}) || !slices.Equal(owned.Regions, []hostapi.RegionID{region}) {
		t.Errorf("ClientGone listed %+v, want flow 42 and region %d", owned, region)
	}
	if mapped(t, name) {
		t.Errorf("memfd %s still mapped after the client left", name)
	}
	if st := h.srv.Stats(); st != (hostapi.ServerStats{}) {
		t.Errorf("server still holds %+v", st)
	}
	if owner, ok := h.srv.FlowOwner(42); ok {
		t.Errorf("flow 42 still owned by client %d after it left", owner)
	}
	// The flow id is free for another client.
	c := h.dial()
	must(t, c.CreateFlow(context.Background(), hostapi.FlowSpec{Flow: 42, Class: hostapi.ClassGradient}))
}

// TestDeregisterUnmaps: deregistration unmaps the server's mapping once the
// backend has let go.
func TestDeregisterUnmaps(t *testing.T) {
	h := newHarness(t, hostapi.ServerConfig{})
	r := h.raw()
	r.hello()
	name := fmt.Sprintf("hostapi-test-dereg-%d", os.Getpid())
	region := r.register(2, name, 4096)
	if !mapped(t, name) {
		t.Fatalf("memfd not mapped after registration")
	}
	if rep := r.call(frame(hostapi.OpDeregisterMemory, 0, 3, fmt.Sprintf(`{"region":%d}`, region))); rep.errCode() != "" {
		t.Fatalf("deregister: %s", rep.errCode())
	}
	if mapped(t, name) {
		t.Errorf("memfd still mapped after deregistration")
	}
}

// TestStoppedReaderIsDisconnected: Complete never blocks the daemon. A
// client that stops reading fills its queue and is disconnected.
func TestStoppedReaderIsDisconnected(t *testing.T) {
	h := newHarness(t, hostapi.ServerConfig{Limits: hostapi.Limits{CompletionQueue: 4}})
	r := h.raw()
	id := r.hello()
	released := h.srv.ReleasedForTest(id)

	var err error
	for i := 0; i < 1_000_000 && err == nil; i++ {
		err = h.srv.Complete(id, hostapi.Completion{WRID: uint64(i), Kind: hostapi.KindSend, Status: hostapi.StatusOK})
	}
	if !errors.Is(err, hostapi.ErrQueueFull) {
		t.Fatalf("Complete to a client that never reads: %v, want ErrQueueFull", err)
	}
	<-released
	if !h.be.isGone(id) {
		t.Errorf("backend not told the client is gone")
	}
	if err := h.srv.Complete(id, hostapi.Completion{Kind: hostapi.KindSend, Status: hostapi.StatusOK}); !errors.Is(err, hostapi.ErrUnknownClient) {
		t.Errorf("Complete after disconnect: %v, want ErrUnknownClient", err)
	}
}

// TestLongCompletionSpansFrames: a receive may forgive many ranges; its
// completion is longer than one frame and arrives whole.
func TestLongCompletionSpansFrames(t *testing.T) {
	h := newHarness(t, hostapi.ServerConfig{})
	c := h.dial()
	ctx := context.Background()
	const n = 8000 // ~200 KB of JSON: four frames
	var forgive []hostapi.Range
	for i := range uint64(n) {
		forgive = append(forgive, hostapi.Range{Start: 3 * i, End: 3*i + 1})
	}
	h.be.set(func(b *echoBackend) { b.forgive = forgive })
	r, err := c.RegisterMemory(ctx, 2*3*n)
	must(t, err)
	for i := range 3 * n {
		r.Bytes()[i] = 0xFF
	}
	must(t, c.CreateFlow(ctx, hostapi.FlowSpec{Flow: 9, Class: hostapi.ClassGradient}))
	must(t, c.PostRecv(ctx, hostapi.RecvReq{Flow: 9, Region: r.ID(), Offset: 3 * n, Length: 3 * n, WRID: 1}))
	must(t, c.PostSend(ctx, hostapi.SendReq{Flow: 9, Region: r.ID(), Length: 3 * n, WRID: 2}))
	comp := poll(t, c)
	if !slices.Equal(comp.Forgiven, forgive) || comp.ForgivenBytes() != n {
		t.Fatalf("completion lists %d forgiven ranges (%d bytes), want %d", len(comp.Forgiven), comp.ForgivenBytes(), n)
	}
	if comp := poll(t, c); comp.WRID != 2 {
		t.Errorf("next completion %+v, want the send", comp)
	}
	if _, err := c.Status(ctx); err != nil {
		t.Errorf("connection unusable after a multi-frame message: %v", err)
	}
}

// TestConcurrentCalls: one client used from several goroutines at once.
func TestConcurrentCalls(t *testing.T) {
	h := newHarness(t, hostapi.ServerConfig{})
	h.be.set(func(b *echoBackend) { b.sinkSends = true })
	c := h.dial()
	ctx := context.Background()
	r, err := c.RegisterMemory(ctx, 4096)
	must(t, err)
	must(t, c.CreateFlow(ctx, hostapi.FlowSpec{Flow: 1, Class: hostapi.ClassGradient}))

	const workers, each = 8, 50
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			for i := range each {
				if err := c.PostSend(ctx, hostapi.SendReq{Flow: 1, Region: r.ID(), Length: 1, WRID: uint64(w*each + i)}); err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range workers {
		must(t, <-errs)
	}
	seen := map[uint64]bool{}
	for range workers * each {
		seen[poll(t, c).WRID] = true
	}
	if len(seen) != workers*each {
		t.Errorf("%d distinct completions, want %d", len(seen), workers*each)
	}
}
