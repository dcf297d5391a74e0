package integration

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"

	"github.com/forgive-emu/forgive/hostapi"
)

// transfer is one message between two test clients.
type transfer struct {
	src, dst []byte
	recvReg  *hostapi.Region
	send     func() // posts the send
}

// post sets up flow id from host a (client ca) to host b (client cb) and
// posts one message of size bytes of random data; step tags the receive.
func post(t *testing.T, ca, cb *hostapi.Client, a, b uint16, id hostapi.FlowID, class hostapi.Class, size int, step uint64) *transfer {
	t.Helper()
	x := prepare(t, ca, cb, a, b, id, class, size, step)
	x.send()
	return x
}

// unwritten is what a receive region holds at a byte whose source byte is
// b before anything arrives: never b, never zero.
func unwritten(b byte) byte { return ^b | 0x80 }

// untouched says whether nothing was written into x's receive region.
func (x *transfer) untouched() bool {
	for i, b := range x.src {
		if x.dst[i] != unwritten(b) {
			return false
		}
	}
	return true
}

// prepare does everything post does but the send, so that several
// transfers can start together: an incast only congests if its flows
// overlap, which filling their memory one after the other (slow under the
// race detector) would prevent.
func prepare(t *testing.T, ca, cb *hostapi.Client, a, b uint16, id hostapi.FlowID, class hostapi.Class, size int, step uint64) *transfer {
	t.Helper()
	for _, e := range []struct {
		c    *hostapi.Client
		peer uint16
	}{{ca, b}, {cb, a}} {
		if err := guard(func(ctx context.Context) error {
			return e.c.CreateFlow(ctx, hostapi.FlowSpec{Flow: id, Peer: hostapi.HostID(e.peer), Class: class})
		}); err != nil {
			t.Fatal(err)
		}
	}
	var sr, rr *hostapi.Region
	if err := guard(func(ctx context.Context) (err error) { sr, err = ca.RegisterMemory(ctx, size); return err }); err != nil {
		t.Fatal(err)
	}
	if err := guard(func(ctx context.Context) (err error) { rr, err = cb.RegisterMemory(ctx, size); return err }); err != nil {
		t.Fatal(err)
	}
	// The receive region starts with bytes unlike the sender's and never
	// zero, as reused memory does: a forgiven range reads zero only if the
	// NIC zero-filled it, and a byte never written differs from the source.
	src, dst := sr.Bytes(), rr.Bytes()
	fillPair(src, dst, uint64(id))
	if err := guard(func(ctx context.Context) error {
		return cb.PostRecv(ctx, hostapi.RecvReq{Flow: id, Region: rr.ID(), Length: uint64(size), Step: step, WRID: uint64(id)})
	}); err != nil {
		t.Fatal(err)
	}
	x := &transfer{src: src, dst: dst, recvReg: rr}
	x.send = func() {
		if err := guard(func(ctx context.Context) error {
			return ca.PostSend(ctx, hostapi.SendReq{Flow: id, Region: sr.ID(), Length: uint64(size), WRID: uint64(id)})
		}); err != nil {
			t.Fatal(err)
		}
	}
	return x
}

// guard runs one request to a daemon under a hang guard that starts when
// the request does. A context shared by several requests also bounds the
// test's own work between them: prepare's one 30 s context spanned the
// byte-by-byte fill of both regions, 9.5 s for 2 x 32 MiB under -race at
// a load average of 19, and on a busier machine PostRecv, the request
// after the fill, failed on the deadline before it was sent.
func guard(f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), hangGuard)
	defer cancel()
	return f(ctx)
}

// fillPair fills src with random bytes of seed, never zero (forgiven,
// zeroed, bytes stand out), and dst with unwritten(src[i]). It writes a
// word at a time: the race detector checks each access, and a byte at a
// time made the fill of 64 MiB the slowest part of a test under -race.
func fillPair(src, dst []byte, seed uint64) {
	r := rand.New(rand.NewPCG(seed, 1))
	n := len(src) / 8
	if n > 0 && uintptr(unsafe.Pointer(&src[0]))%8 == 0 && uintptr(unsafe.Pointer(&dst[0]))%8 == 0 {
		s := unsafe.Slice((*uint64)(unsafe.Pointer(&src[0])), n)
		d := unsafe.Slice((*uint64)(unsafe.Pointer(&dst[0])), n)
		for i := range s {
			w := r.Uint64() | 0x0101010101010101
			s[i], d[i] = w, ^w|0x8080808080808080 // unwritten, byte by byte
		}
	} else {
		n = 0
	}
	for i := n * 8; i < len(src); i++ {
		src[i] = byte(r.Uint32()) | 1
		dst[i] = unwritten(src[i])
	}
}

// hangGuard bounds a request to a daemon: a guard against a hang, not a
// deadline on the machine's speed. On a loaded machine (both cores busy,
// or the test pinned to one core beside the daemons) a daemon can wait
// tens of seconds for the CPU, and -race slows it further.
const hangGuard = 5 * time.Minute

// await polls one completion from c.
func await(t *testing.T, c *hostapi.Client, wait time.Duration) hostapi.Completion {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	comp, err := c.Poll(ctx)
	if err != nil {
		t.Fatalf("no completion within %v: %v", wait, err)
	}
	return comp
}

// awaitKind polls until a completion of kind k arrives.
func awaitKind(t *testing.T, c *hostapi.Client, k hostapi.Kind, wait time.Duration) hostapi.Completion {
	t.Helper()
	deadline := time.Now().Add(wait)
	for {
		comp := await(t, c, time.Until(deadline))
		if comp.Kind == k {
			return comp
		}
	}
}

// A 64 MiB transfer of non-gradient data through a bottleneck that trims
// and marks arrives byte-exact. Host 3 runs without congestion control and
// shares host 1's port, so the bottleneck both marks and trims.
func TestNonGradientTransferArrivesExact(t *testing.T) {
	s := newStar(t, 3, "200Mbps", map[uint16]hostOpts{3: {cc: "none"}})
	c1, c2, c3 := s.client(1), s.client(2), s.client(3)
	big := post(t, c2, c1, 2, 1, 21, hostapi.ClassTensor, 64<<20, 0)
	noise := post(t, c3, c1, 3, 1, 31, hostapi.ClassOther, 8<<20, 0)
	start := time.Now()

	for range 2 {
		comp := awaitKind(t, c1, hostapi.KindRecv, 2*time.Minute)
		if comp.Status != hostapi.StatusOK || len(comp.Forgiven) != 0 {
			t.Fatalf("receive %+v: want success with nothing forgiven", comp)
		}
	}
	elapsed := time.Since(start)
	if !bytes.Equal(big.dst, big.src) || !bytes.Equal(noise.dst, noise.src) {
		t.Fatal("received bytes differ from the bytes sent")
	}
	t.Logf("72 MiB delivered in %v: goodput %.1f Mb/s", elapsed.Round(time.Millisecond), float64(72<<20)*8/elapsed.Seconds()/1e6)
	trimmed := metric(t, s.swStats, "trimswitch_trimmed_packets_total", `port="h1"`)
	marked := metric(t, s.swStats, "trimswitch_marked_packets_total", `port="h1"`)
	if trimmed == 0 || marked == 0 {
		t.Fatalf("host 1's port trimmed %v and marked %v packets; the 2:1 bottleneck should do both", trimmed, marked)
	}
	t.Logf("64 MiB + 8 MiB through a 200 Mb/s port: %v packets trimmed, %v marked", trimmed, marked)
}

// A gradient transfer inside an open step with P_high = 0.1 completes with
// forgiven bytes within the budget; the completion lists the forgiven
// ranges, and those ranges are zero in the receiver's memory.
func TestGradientTransferForgivesWithinBudget(t *testing.T) {
	opts := map[uint16]hostOpts{1: {forgive: true}, 2: {forgive: true, cc: "none"}, 3: {forgive: true, cc: "none"}}
	s := newStar(t, 3, "200Mbps", opts)
	c1, c2, c3 := s.client(1), s.client(2), s.client(3)
	const size = 8 << 20
	nonCritical := false
	ctx := context.Background()
	if err := c1.BeginStep(ctx, hostapi.StepReq{Step: 5, Critical: &nonCritical, ExpectedGradientBytes: 2 * size}); err != nil {
		t.Fatal(err)
	}
	xs := map[uint64]*transfer{
		22: prepare(t, c2, c1, 2, 1, 22, hostapi.ClassGradient, size, 5),
		32: prepare(t, c3, c1, 3, 1, 32, hostapi.ClassGradient, size, 5),
	}
	xs[22].send()
	xs[32].send()
	var forgiven uint64
	for range 2 {
		comp := awaitKind(t, c1, hostapi.KindRecv, 2*time.Minute)
		x := xs[comp.WRID]
		if x == nil {
			t.Fatalf("a receive completion for work never posted: %+v", comp)
		}
		forgiven += checkReceived(t, comp, x)
	}
	if err := c1.EndStep(ctx, 5); err != nil {
		t.Fatal(err)
	}
	recs, err := c1.Steps(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 {
		t.Fatalf("%d step records, want 1", len(recs))
	}
	r := recs[0]
	if !r.InvariantHeld || r.Forgiven > r.Budget || uint64(r.Forgiven) != forgiven || r.Received+r.Forgiven != r.Expected {
		t.Fatalf("step record %+v breaks the invariants (completions listed %d forgiven bytes)", r, forgiven)
	}
	if r.Forgiven == 0 {
		t.Fatalf("nothing forgiven in a 2:1 incast without congestion control: %+v", r)
	}
	t.Logf("step 5: budget %d, forgiven %d, received %d of %d", r.Budget, r.Forgiven, r.Received, r.Expected)
}

// CNPs cut a non-exempt sender's rate, and an exempt sender ignores them
// and stays at line rate while its budget lasts.
func TestCNPsCutObeyingSendersOnly(t *testing.T) {
	opts := map[uint16]hostOpts{1: {forgive: true, pHigh: 0.5}, 2: {forgive: true}, 3: {forgive: true}}
	s := newStar(t, 3, "200Mbps", opts)
	c1, c2, c3 := s.client(1), s.client(2), s.client(3)
	const size = 8 << 20
	nc := false
	ctx := context.Background()
	if err := c1.BeginStep(ctx, hostapi.StepReq{Step: 1, Critical: &nc, ExpectedGradientBytes: size}); err != nil {
		t.Fatal(err)
	}
	ex := prepare(t, c2, c1, 2, 1, 23, hostapi.ClassGradient, size, 1) // gradient of an open step
	ob := prepare(t, c3, c1, 3, 1, 33, hostapi.ClassTensor, size, 0)   // tensor-parallel
	ex.send()
	ob.send()
	for range 2 {
		if comp := awaitKind(t, c1, hostapi.KindRecv, 2*time.Minute); comp.Status != hostapi.StatusOK {
			t.Fatal(comp.Err)
		}
	}
	flow := func(c *hostapi.Client, id hostapi.FlowID) map[string]uint64 {
		ct, err := c.Counters(ctx)
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
	obeying, exempt := flow(c3, 33), flow(c2, 23)
	if obeying["cnps_recv"] == 0 || obeying["rate_cuts"] == 0 || obeying["cnps_ignored"] != 0 {
		t.Fatalf("obeying sender: %d CNPs, %d rate cuts, %d ignored; want CNPs that cut its rate",
			obeying["cnps_recv"], obeying["rate_cuts"], obeying["cnps_ignored"])
	}
	if exempt["cnps_ignored"] == 0 || exempt["ever_exempt"] != 1 {
		t.Fatalf("exempt sender: %d CNPs ignored, ever exempt %d; want it to ignore CNPs", exempt["cnps_ignored"], exempt["ever_exempt"])
	}
	if exempt["rate_cuts"] != 0 || exempt["rate_bps"] != 200e6 {
		t.Fatalf("exempt sender cut its rate %d times and ends at %d b/s; want no cuts and line rate while its budget lasts",
			exempt["rate_cuts"], exempt["rate_bps"])
	}
	t.Logf("obeying: %d CNPs, %d cuts, rate %d b/s; exempt: %d CNPs ignored, rate %d b/s",
		obeying["cnps_recv"], obeying["rate_cuts"], obeying["rate_bps"], exempt["cnps_ignored"], exempt["rate_bps"])
}

// A killed peer daemon makes transfers fail with a clear error, not hang;
// once it restarts, a new flow works.
func TestKilledPeerFailsTransfer(t *testing.T) {
	s := newStar(t, 2, "200Mbps", map[uint16]hostOpts{2: {failAfter: "500ms"}})
	c1, c2 := s.client(1), s.client(2)
	post(t, c2, c1, 2, 1, 24, hostapi.ClassOther, 32<<20, 0)
	time.Sleep(50 * time.Millisecond)
	s.kill("host1")
	comp := awaitKind(t, c2, hostapi.KindSend, 30*time.Second)
	if comp.Status != hostapi.StatusError || comp.Err == "" {
		t.Fatalf("send to a dead peer completed with %+v, want a clear error", comp)
	}
	t.Logf("send to the killed peer failed: %s", comp.Err)

	// The restarted daemon knows nothing of the old flow; a new one works.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := s.group.Add(ctx, s.hostSpec(1), 20*time.Second); err != nil {
		t.Fatal(err)
	}
	c1 = s.client(1)
	x := post(t, c2, c1, 2, 1, 25, hostapi.ClassOther, 1<<20, 0)
	if comp := awaitKind(t, c1, hostapi.KindRecv, time.Minute); comp.Status != hostapi.StatusOK || !bytes.Equal(x.dst, x.src) {
		t.Fatalf("transfer after the restart: %+v", comp)
	}
}
