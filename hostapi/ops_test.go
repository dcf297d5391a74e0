package hostapi_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/forgive-emu/forgive/hostapi"
)

// TestEveryOpRoundTrips drives one rank through a whole step over the
// real core: every op reaches the engine with the fields the client sent,
// the bytes reach the peer and come back, and every reply carries the
// core's answer.
func TestEveryOpRoundTrips(t *testing.T) {
	h := newHarness(t, hostapi.ServerConfig{HostID: coreHost, HostName: "rank-host-3"})
	c := h.dial()
	ctx := context.Background()

	info := c.Info()
	if info.Version != hostapi.Version || info.HostID != coreHost || info.HostName != "rank-host-3" || info.Client == 0 {
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

	spec := hostapi.FlowSpec{Flow: 11, Peer: peerHost, Class: hostapi.ClassGradient, Entropy: hostapi.EntropySubflows, Subflows: 4}
	must(t, c.CreateFlow(ctx, spec))
	if owner, ok := h.be.flowOwner(11); !ok || owner != info.Client {
		t.Errorf("the core's owner of flow 11: %d, %v; want client %d", owner, ok, info.Client)
	}

	// "Which step is beginning, and what its gradient norms say. How many
	// gradient bytes the step will bring this rank."
	must(t, c.BeginStep(ctx, hostapi.StepReq{Step: 1, Norms: []float64{1.5, 0.25}, LRDecay: true, ExpectedGradientBytes: 5000}))
	must(t, c.BeginStep(ctx, hostapi.StepReq{Step: 2, Critical: new(false), ExpectedGradientBytes: 6000}))

	payload := bytes.Repeat([]byte("gradient"), 500) // 4000 bytes
	copy(src.Bytes()[1000:], payload)
	back := bytes.Repeat([]byte("returned"), 400) // 3200 bytes
	h.be.peerFlow(t, 11, hostapi.ClassGradient, 8192, 0)
	h.be.peerRecv(t, 11, 8192, 70, 1)
	must(t, c.PostRecv(ctx, hostapi.RecvReq{Flow: 11, Region: dst.ID(), Offset: 2000, Length: 4096, Step: 1, WRID: 7}))
	must(t, c.PostSend(ctx, hostapi.SendReq{Flow: 11, Region: src.ID(), Offset: 1000, Length: 4000, WRID: 8}))
	h.be.peerSend(t, 11, back, 71)

	done := []hostapi.Completion{poll(t, c), poll(t, c)}
	slices.SortFunc(done, func(a, b hostapi.Completion) int { return int(a.WRID) - int(b.WRID) })
	wantRecv := hostapi.Completion{WRID: 7, Kind: hostapi.KindRecv, Flow: 11, Status: hostapi.StatusOK, Len: 3200, Step: 1}
	if !reflect.DeepEqual(done[0], wantRecv) {
		t.Errorf("recv completion = %+v, want %+v", done[0], wantRecv)
	}
	if want := (hostapi.Completion{WRID: 8, Kind: hostapi.KindSend, Flow: 11, Status: hostapi.StatusOK, Len: 4000}); !reflect.DeepEqual(done[1], want) {
		t.Errorf("send completion = %+v, want %+v", done[1], want)
	}
	if got := dst.Bytes()[2000:5200]; !bytes.Equal(got, back) {
		t.Errorf("the client's region does not hold the peer's bytes")
	}
	if comp := h.be.peerPoll(t); comp.WRID != 70 || comp.Len != 4000 {
		t.Errorf("peer's receive = %+v, want wr 70 of 4000 bytes", comp)
	}
	if got := h.be.peerBytes(11)[:4000]; !bytes.Equal(got, payload) {
		t.Errorf("the peer did not receive the bytes the client sent")
	}

	must(t, c.EndStep(ctx, 1))
	if err := c.EndStep(ctx, 99); !isCode(err, hostapi.CodeNoSuchStep) || !strings.Contains(err.Error(), "never began") {
		t.Errorf("EndStep(99) = %v, want no_such_step naming a step never begun", err)
	}

	steps, err := c.Steps(ctx, 0)
	must(t, err)
	if len(steps) != 2 || steps[0].Step != 1 || !steps[0].Critical || steps[0].Expected != 5000 || steps[0].Open ||
		steps[1].Step != 2 || steps[1].Critical || steps[1].Expected != 6000 || !steps[1].Open ||
		!steps[0].InvariantHeld || !steps[1].InvariantHeld {
		t.Errorf("steps = %+v, want step 1 critical (lr decay) and ended, step 2 not critical and open, both within their budget", steps)
	}
	for _, s := range steps { // FORGIVE's invariants; InvariantHeld above: no range charged twice
		if s.Forgiven > s.Budget || float64(s.Forgiven)*(1-s.P) > s.P*float64(s.Received) {
			t.Errorf("step %d forgave %d bytes: budget %d, p %v, received %d", s.Step, s.Forgiven, s.Budget, s.P, s.Received)
		}
	}
	if last, err := c.Steps(ctx, 1); err != nil || len(last) != 1 || last[0].Step != 2 {
		t.Errorf("Steps(limit 1) = %+v, %v; want only the latest step", last, err)
	}

	ctr, err := c.Counters(ctx)
	must(t, err)
	if ctr.Host.TxPackets == 0 || ctr.Host.RxPackets == 0 || len(ctr.Flows) != 1 || ctr.Flows[0].Flow != 11 || ctr.Flows[0].Peer != peerHost {
		t.Errorf("core counters = %+v", ctr)
	}
	if cc := ctr.Client; cc.Regions != 2 || cc.RegisteredBytes != 16384 || cc.Flows != 1 || cc.Outstanding != 0 ||
		cc.Completions != 2 || cc.ErrorReplies != 1 || cc.Requests < 9 {
		t.Errorf("client counters = %+v", cc)
	}

	st, err := c.Status(ctx)
	must(t, err)
	if st.HostID != coreHost || st.HostName != "rank-host-3" || st.Protocol != hostapi.Version || st.Clients != 1 ||
		st.Regions != 2 || st.RegisteredBytes != 16384 || st.Flows != 1 || st.Backend["engine"] != "nic" || st.Uptime <= 0 {
		t.Errorf("status = %+v", st)
	}

	must(t, c.DestroyFlow(ctx, 11))
	must(t, src.Close())
	must(t, dst.Close())
	if st := h.srv.Stats(); st.Regions != 0 || st.RegisteredBytes != 0 {
		t.Errorf("server still maps %+v", st)
	}
	if _, ok := h.be.flowOwner(11); ok {
		t.Errorf("the core still holds flow 11")
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
// the core refuses the rest before the engine hears of it.
func TestClientsAreIsolated(t *testing.T) {
	h := newHarness(t, hostapi.ServerConfig{})
	ctx := context.Background()
	a, b := h.dial(), h.dial()

	ra, err := a.RegisterMemory(ctx, 4096)
	must(t, err)
	must(t, a.CreateFlow(ctx, hostapi.FlowSpec{Flow: 5, Peer: peerHost, Class: hostapi.ClassGradient}))
	rb, err := b.RegisterMemory(ctx, 4096)
	must(t, err)
	must(t, b.CreateFlow(ctx, hostapi.FlowSpec{Flow: 6, Peer: peerHost, Class: hostapi.ClassTensor}))
	h.be.peerFlow(t, 5, hostapi.ClassGradient, 4096, 0)
	h.be.peerFlow(t, 6, hostapi.ClassTensor, 4096, 0)
	h.be.bound(t, 5, 6)
	before := h.be.engineState()

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
		{"create a's flow id", b.CreateFlow(ctx, hostapi.FlowSpec{Flow: 5, Peer: peerHost, Class: hostapi.ClassOther}), hostapi.ErrFlowExists},
	} {
		if !errors.Is(tc.err, tc.want) {
			t.Errorf("%s: err = %v, want %v", tc.name, tc.err, tc.want.Code)
		}
	}
	if after := h.be.engineState(); !reflect.DeepEqual(after, before) {
		t.Errorf("refused requests reached the engine:\nbefore %+v\nafter  %+v", before, after)
	}

	// a's resources are untouched and still work.
	h.be.peerRecv(t, 5, 4096, 1, 0)
	must(t, a.PostSend(ctx, hostapi.SendReq{Flow: 5, Region: ra.ID(), Offset: 100, Length: 10, WRID: 2}))
	if comp := poll(t, a); comp.WRID != 2 || comp.Status != hostapi.StatusOK {
		t.Errorf("a's send completed as %+v", comp)
	}
	if comp := h.be.peerPoll(t); comp.WRID != 1 || comp.Len != 10 {
		t.Errorf("the peer's receive of a's send completed as %+v", comp)
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
		// Receives no peer sends to stay outstanding.
		h := newHarness(t, hostapi.ServerConfig{Limits: hostapi.Limits{MaxOutstanding: 2}})
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
			if comp := poll(t, c); comp.Status != hostapi.StatusError || !strings.Contains(comp.Err, "destroyed") {
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
		t.Fatalf("the core does not hold the region")
	}
	if owner, ok := h.be.flowOwner(42); !ok || owner != id {
		t.Fatalf("FlowOwner(42) = %d, %v; want client %d", owner, ok, id)
	}

	released := h.srv.ReleasedForTest(id)
	r.c.Close()
	<-released

	if !h.be.isGone(id) {
		t.Errorf("backend ClientGone not called")
	}
	if h.be.region(id, region) != nil {
		t.Errorf("the core still holds region %d after the client left", region)
	}
	if mapped(t, name) {
		t.Errorf("memfd %s still mapped after the client left", name)
	}
	if st := h.srv.Stats(); st != (hostapi.ServerStats{}) {
		t.Errorf("server still holds %+v", st)
	}
	if owner, ok := h.be.flowOwner(42); ok {
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
// completion is longer than one frame and arrives whole. The driver hands
// it to the server (Complete) as the daemon hands the core's.
func TestLongCompletionSpansFrames(t *testing.T) {
	h := newHarness(t, hostapi.ServerConfig{})
	c := h.dial()
	ctx := context.Background()
	const n = 8000 // ~200 KB of JSON: four frames
	var forgive []hostapi.Range
	for i := range uint64(n) {
		forgive = append(forgive, hostapi.Range{Start: 3 * i, End: 3*i + 1})
	}
	long := hostapi.Completion{WRID: 1, Kind: hostapi.KindRecv, Flow: 9, Status: hostapi.StatusOK, Len: 3 * n, Step: 1, Forgiven: forgive}
	must(t, h.srv.Complete(c.Info().Client, long))
	must(t, h.srv.Complete(c.Info().Client, hostapi.Completion{WRID: 2, Kind: hostapi.KindSend, Flow: 9, Status: hostapi.StatusOK, Len: 3 * n}))
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
	c := h.dial()
	ctx := context.Background()
	r, err := c.RegisterMemory(ctx, 4096)
	must(t, err)
	must(t, c.CreateFlow(ctx, hostapi.FlowSpec{Flow: 1, Peer: peerHost, Class: hostapi.ClassGradient}))
	h.be.peerFlow(t, 1, hostapi.ClassGradient, 4096, 1)

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

// TestRefusedRegistrationIsNotMapped: the core refuses a region past the
// client's limits before the server maps the memfd (Backend.CheckRegister),
// so a refusal costs no mapping; the same region within the limits is
// mapped.
func TestRefusedRegistrationIsNotMapped(t *testing.T) {
	h := newHarness(t, hostapi.ServerConfig{Limits: hostapi.Limits{MaxRegisteredBytes: 8192}})
	r := h.raw()
	r.hello()
	name := fmt.Sprintf("hostapi-test-refused-%d", os.Getpid())
	fd := sealedMemfd(t, name, 3*4096, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	defer unix.Close(fd)
	rep := r.call(frame(hostapi.OpRegisterMemory, 0, 2, fmt.Sprintf(`{"length":%d}`, 3*4096)), fd)
	if rep.errCode() != string(hostapi.CodeLimitExceeded) {
		t.Fatalf("a region past the limit: code %q", rep.errCode())
	}
	if mapped(t, name) || h.be.handed() != 0 {
		t.Errorf("the server mapped a region the core refused (%d handed to the core)", h.be.handed())
	}
	if st := h.srv.Stats(); st.Regions != 0 || st.RegisteredBytes != 0 {
		t.Errorf("server maps %+v after a refusal", st)
	}
	small := fmt.Sprintf("hostapi-test-allowed-%d", os.Getpid())
	r.register(3, small, 8192)
	if !mapped(t, small) || h.be.handed() != 1 {
		t.Errorf("a region within the limit is not mapped (%d handed to the core)", h.be.handed())
	}
}
