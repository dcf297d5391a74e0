package hostapi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/forgive-emu/forgive/hostapi"
)

// malformed is one kind of bad request. build returns the frame, the
// descriptors to pass with it (the test closes its copies) and the error
// code the server must answer with, or "close" for a framing error, which
// must close only that connection.
type malformed struct {
	name  string
	build func(e *floodEnv, rng *rand.Rand, id uint64) (frame []byte, fds []int, want string)
}

// floodEnv holds what the bad requests refer to: a raw client with a
// region and a flow, and another client's region and flow.
type floodEnv struct {
	tb          testing.TB
	region      hostapi.RegionID // 4096 bytes, owned by the raw client
	flow        hostapi.FlowID
	otherRegion hostapi.RegionID
	otherFlow   hostapi.FlowID
}

const regionSize = 4096

var malformedCases = []malformed{
	{"random bytes", func(e *floodEnv, rng *rand.Rand, id uint64) ([]byte, []int, string) {
		b := make([]byte, 1+rng.IntN(300))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		b[0] = 'f' // never the magic
		return b, nil, "close"
	}},
	{"short frame", func(e *floodEnv, rng *rand.Rand, id uint64) ([]byte, []int, string) {
		return frame(hostapi.OpStatus, 0, id, "")[:3+rng.IntN(hostapi.HeaderLen-3)], nil, "close"
	}},
	{"oversized frame", func(e *floodEnv, rng *rand.Rand, id uint64) ([]byte, []int, string) {
		body := make([]byte, hostapi.MaxBody+1+rng.IntN(1000))
		return frame(hostapi.OpStatus, 0, id, string(body)), nil, "close"
	}},
	{"random body", func(e *floodEnv, rng *rand.Rand, id uint64) ([]byte, []int, string) {
		b := make([]byte, 8+rng.IntN(200))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		b[0] = 0x01 // not whitespace, not JSON
		ops := []hostapi.Op{hostapi.OpCreateFlow, hostapi.OpPostSend, hostapi.OpPostRecv, hostapi.OpBeginStep, hostapi.OpCounters, hostapi.OpStatus}
		return frame(ops[rng.IntN(len(ops))], 0, id, string(b)), nil, "bad_request"
	}},
	{"bad json", func(e *floodEnv, rng *rand.Rand, id uint64) ([]byte, []int, string) {
		bodies := []struct {
			op   hostapi.Op
			body string
		}{
			{hostapi.OpPostSend, `{"flow":`},
			{hostapi.OpPostSend, `[]`},
			{hostapi.OpPostSend, fmt.Sprintf(`{"flow":%d,"region":%d,"length":1,"bogus":2}`, e.flow, e.region)},
			{hostapi.OpPostRecv, `{"flow":1,"region":1,"length":-1}`},
			{hostapi.OpEndStep, `{"step":1} {"step":2}`},
			{hostapi.OpDestroyFlow, `{"flow":"x"}`},
			{hostapi.OpCreateFlow, `{"flow":9,"class":"quantum"}`},
			{hostapi.OpCreateFlow, `{"flow":9,"class":"gradient","entropy":"zigzag"}`},
			{hostapi.OpBeginStep, `{"step":18446744073709551616,"critical":true}`},
			{hostapi.OpStatus, `{"verbose":true}`},
		}
		b := bodies[rng.IntN(len(bodies))]
		return frame(b.op, 0, id, b.body), nil, "bad_request"
	}},
	{"unknown op", func(e *floodEnv, rng *rand.Rand, id uint64) ([]byte, []int, string) {
		op := hostapi.Op(0x0D + rng.IntN(0x100-0x0D)) // includes completion, which is not a request
		if rng.IntN(8) == 0 {
			op = 0
		}
		return frame(op, 0, id, "{}"), nil, "unknown_op"
	}},
	{"bad header", func(e *floodEnv, rng *rand.Rand, id uint64) ([]byte, []int, string) {
		f := frame(hostapi.OpStatus, 0, id, "")
		switch rng.IntN(4) {
		case 0:
			f[3] = byte(2 + rng.IntN(254))
			return f, nil, "unsupported_version"
		case 1:
			f[5] = byte(1 + rng.IntN(255))
		case 2:
			f[6] = byte(1 + rng.IntN(255))
		default:
			f = frame(hostapi.OpStatus, 0, 0, "")
		}
		return f, nil, "bad_request"
	}},
	{"out of bounds", func(e *floodEnv, rng *rand.Rand, id uint64) ([]byte, []int, string) {
		off := rng.Uint64N(regionSize + 1)
		length := regionSize - off + 1 + rng.Uint64N(1<<20)
		if rng.IntN(4) == 0 {
			off, length = ^uint64(0)-rng.Uint64N(100), 2+rng.Uint64N(1000) // wraps around 2^64
		}
		op := []hostapi.Op{hostapi.OpPostSend, hostapi.OpPostRecv}[rng.IntN(2)]
		return frame(op, 0, id, fmt.Sprintf(`{"flow":%d,"region":%d,"offset":%d,"length":%d,"wr_id":1}`, e.flow, e.region, off, length)), nil, "out_of_bounds"
	}},
	{"huge length", func(e *floodEnv, rng *rand.Rand, id uint64) ([]byte, []int, string) {
		if rng.IntN(2) == 0 {
			return frame(hostapi.OpPostSend, 0, id, fmt.Sprintf(`{"flow":%d,"region":%d,"length":%d}`, e.flow, e.region, uint64(1)<<(32+rng.IntN(32)))), nil, "out_of_bounds"
		}
		fd := sealedMemfd(e.tb, "hostapi-test-huge", regionSize, unix.F_SEAL_SHRINK)
		return frame(hostapi.OpRegisterMemory, 0, id, fmt.Sprintf(`{"length":%d}`, uint64(1)<<(40+rng.IntN(24)))), []int{fd}, "limit_exceeded"
	}},
	{"wrong fd", func(e *floodEnv, rng *rand.Rand, id uint64) ([]byte, []int, string) {
		fd, want := wrongFD(e.tb, rng.IntN(8))
		return frame(hostapi.OpRegisterMemory, 0, id, fmt.Sprintf(`{"length":%d}`, regionSize)), []int{fd}, want
	}},
	{"missing fd", func(e *floodEnv, rng *rand.Rand, id uint64) ([]byte, []int, string) {
		return frame(hostapi.OpRegisterMemory, 0, id, `{"length":4096}`), nil, "bad_fd"
	}},
	{"extra fds", func(e *floodEnv, rng *rand.Rand, id uint64) ([]byte, []int, string) {
		f := frame(hostapi.OpRegisterMemory, 0, id, `{"length":4096}`)
		n := 2 + rng.IntN(6) // more than 4 also truncates the control message
		if rng.IntN(2) == 0 {
			f, n = frame(hostapi.OpStatus, 0, id, ""), 1+rng.IntN(7)
		}
		fds := make([]int, n)
		for i := range fds {
			fds[i] = sealedMemfd(e.tb, "hostapi-test-extra", regionSize, unix.F_SEAL_SHRINK)
		}
		return f, fds, "bad_fd"
	}},
	{"someone else's resources", func(e *floodEnv, rng *rand.Rand, id uint64) ([]byte, []int, string) {
		switch rng.IntN(5) {
		case 0:
			return frame(hostapi.OpPostSend, 0, id, fmt.Sprintf(`{"flow":%d,"region":%d,"length":1}`, e.flow, e.otherRegion)), nil, "no_such_region"
		case 1:
			return frame(hostapi.OpPostRecv, 0, id, fmt.Sprintf(`{"flow":%d,"region":%d,"length":1}`, e.otherFlow, e.region)), nil, "no_such_flow"
		case 2:
			return frame(hostapi.OpDeregisterMemory, 0, id, fmt.Sprintf(`{"region":%d}`, e.otherRegion)), nil, "no_such_region"
		case 3:
			return frame(hostapi.OpDestroyFlow, 0, id, fmt.Sprintf(`{"flow":%d}`, e.otherFlow)), nil, "no_such_flow"
		}
		return frame(hostapi.OpCreateFlow, 0, id, fmt.Sprintf(`{"flow":%d,"class":"other"}`, e.otherFlow)), nil, "flow_exists"
	}},
	{"nonexistent ids", func(e *floodEnv, rng *rand.Rand, id uint64) ([]byte, []int, string) {
		if rng.IntN(2) == 0 {
			return frame(hostapi.OpDeregisterMemory, 0, id, fmt.Sprintf(`{"region":%d}`, 1000+rng.Uint64N(1<<40))), nil, "no_such_region"
		}
		return frame(hostapi.OpDestroyFlow, 0, id, fmt.Sprintf(`{"flow":%d}`, 1000+rng.Uint32N(1<<30))), nil, "no_such_flow"
	}},
	{"invalid fields", func(e *floodEnv, rng *rand.Rand, id uint64) ([]byte, []int, string) {
		bodies := []struct {
			op   hostapi.Op
			body string
		}{
			{hostapi.OpCreateFlow, `{"flow":0,"class":"gradient"}`},
			{hostapi.OpCreateFlow, `{"flow":9}`},
			{hostapi.OpCreateFlow, `{"flow":9,"class":"gradient","entropy":"subflows","subflows":1}`},
			{hostapi.OpCreateFlow, `{"flow":9,"class":"gradient","entropy":"spray","subflows":4}`},
			{hostapi.OpBeginStep, `{"step":3,"critical":true,"norms":[1.0]}`},
			{hostapi.OpBeginStep, `{"step":3,"lr_decay":true,"expected_gradient_bytes":100}`},
			{hostapi.OpPostRecv, fmt.Sprintf(`{"flow":%d,"region":%d,"length":1,"phase":"reduce"}`, e.flow, e.region)},
			{hostapi.OpBeginStep, `{"step":3,"critical":false,"lr_decay":true}`},
			{hostapi.OpBeginStep, `{"step":3,"norms":[1.0,-0.5]}`},
			{hostapi.OpSteps, `{"limit":-1}`},
			{hostapi.OpSteps, `{"limit":100000}`},
			{hostapi.OpRegisterMemory, `{"length":0}`},
			{hostapi.OpPostSend, fmt.Sprintf(`{"flow":%d,"region":%d,"length":0}`, e.flow, e.region)},
			{hostapi.OpPostRecv, fmt.Sprintf(`{"flow":%d,"region":0,"length":1}`, e.flow)},
			{hostapi.OpHello, `{"versions":[1]}`}, // hello twice
		}
		b := bodies[rng.IntN(len(bodies))]
		return frame(b.op, 0, id, b.body), nil, "bad_request"
	}},
}

// wrongFD returns a descriptor register_memory must refuse, and the code.
func wrongFD(tb testing.TB, kind int) (int, string) {
	tb.Helper()
	switch kind {
	case 0: // a pipe
		var p [2]int
		must(tb, unix.Pipe2(p[:], unix.O_CLOEXEC))
		unix.Close(p[1])
		return p[0], "bad_fd"
	case 1: // a character device
		fd, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
		must(tb, err)
		return fd, "bad_fd"
	case 2: // a memfd that can still shrink
		return sealedMemfd(tb, "hostapi-test-unsealed", regionSize, 0), "bad_fd"
	case 3: // a memfd sealed against writes
		return sealedMemfd(tb, "hostapi-test-ro", regionSize, unix.F_SEAL_SHRINK|unix.F_SEAL_WRITE), "bad_fd"
	case 4: // a sealed memfd shorter than the region
		return sealedMemfd(tb, "hostapi-test-short", regionSize/2, unix.F_SEAL_SHRINK), "out_of_bounds"
	case 5: // a sealed memfd opened read-only: mmap refuses a writable mapping
		mfd := sealedMemfd(tb, "hostapi-test-rdonly", regionSize, unix.F_SEAL_SHRINK)
		defer unix.Close(mfd)
		fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", mfd), unix.O_RDONLY|unix.O_CLOEXEC, 0)
		must(tb, err)
		return fd, "bad_fd"
	case 6: // a directory
		fd, err := unix.Open(os.TempDir(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		must(tb, err)
		return fd, "bad_fd"
	default: // a socket
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
		must(tb, err)
		return fd, "bad_fd"
	}
}

// TestMalformedRequestsLeaveServerServing sends 10,000 bad requests. Each
// well-framed one gets an error reply naming the problem, with its request
// id, and the connection keeps serving; each framing error closes only its
// own connection. Afterwards a well-behaved client still works, no
// descriptor passed with a bad request is leaked, and nothing stays mapped.
func TestMalformedRequestsLeaveServerServing(t *testing.T) {
	const iterations = 10_000
	warmUpPoller(t)
	fdsBefore := openFDs(t)

	h := newHarness(t, hostapi.ServerConfig{Limits: hostapi.Limits{MaxRegisteredBytes: 1 << 30}})
	ctx := context.Background()
	good, other := h.dial(), h.dial()
	otherRegion, err := other.RegisterMemory(ctx, regionSize)
	must(t, err)
	must(t, other.CreateFlow(ctx, hostapi.FlowSpec{Flow: 2, Class: hostapi.ClassGradient}))

	r := h.raw()
	r.hello()
	env := &floodEnv{tb: t, region: r.register(2, "hostapi-test-flood", regionSize), flow: 1, otherRegion: otherRegion.ID(), otherFlow: 2}
	if rep := r.call(frame(hostapi.OpCreateFlow, 0, 3, `{"flow":1,"class":"gradient"}`)); rep.errCode() != "" {
		t.Fatalf("create_flow: %s", rep.errCode())
	}

	rng := rand.New(rand.NewPCG(1, 2))
	errorReplies, closes := 0, 0
	for i := range iterations {
		c := malformedCases[i%len(malformedCases)]
		id := uint64(1000 + i)
		f, fds, want := c.build(env, rng, id)
		if want == "close" {
			expectClosed(t, h, c.name, f)
			closes++
			continue
		}
		err := r.send(f, fds...)
		closeFDs(fds)
		if err != nil {
			t.Fatalf("%s: send: %v", c.name, err)
		}
		rep, err := r.recv()
		if err != nil {
			t.Fatalf("%s (iteration %d): server closed a connection that sent a well-framed request: %v", c.name, i, err)
		}
		wantID := id
		if f[8]|f[9]|f[10]|f[11]|f[12]|f[13]|f[14]|f[15] == 0 {
			wantID = 0
		}
		if rep.id != wantID || rep.flags != hostapi.FlagReply|hostapi.FlagError || rep.op != hostapi.Op(f[4]) || rep.errCode() != want {
			t.Fatalf("%s (iteration %d): reply op %v flags %#x id %d code %q (%s); want op %v id %d code %q",
				c.name, i, rep.op, rep.flags, rep.id, rep.errCode(), rep.body, hostapi.Op(f[4]), wantID, want)
		}
		errorReplies++
	}
	t.Logf("%d error replies, %d connections closed for framing errors", errorReplies, closes)

	// The raw connection survived every error and counted them.
	rep := r.call(frame(hostapi.OpCounters, 0, 4, ""))
	var ctr hostapi.Counters
	if rep.errCode() != "" || json.Unmarshal(rep.body, &ctr) != nil {
		t.Fatalf("counters after the flood: %s %s", rep.errCode(), rep.body)
	}
	if ctr.Client.ErrorReplies != uint64(errorReplies) || ctr.Client.Regions != 1 || ctr.Client.Flows != 1 {
		t.Errorf("raw client counters %+v, want %d error replies, 1 region, 1 flow", ctr.Client, errorReplies)
	}

	// A well-behaved client is served as if nothing happened.
	roundTrip(t, h, good)

	// Shut everything down: every descriptor the test opened or passed is
	// closed again, and no bad memfd stayed mapped.
	r.c.Close()
	good.Close()
	other.Close()
	must(t, h.srv.Close())
	for _, name := range []string{"hostapi-test-flood", "hostapi-test-huge", "hostapi-test-extra", "hostapi-test-ro", "hostapi-test-short", "hostapi-test-rdonly", "hostapi-test-unsealed"} {
		if mapped(t, name) {
			t.Errorf("memfd %s still mapped", name)
		}
	}
	if fdsAfter := openFDs(t); fdsAfter != fdsBefore {
		t.Errorf("%d descriptors open after the flood, %d before", fdsAfter, fdsBefore)
	}
}

// expectClosed sends a framing error on a fresh connection and checks the
// server closes it without a reply.
func expectClosed(t *testing.T, h *harness, name string, f []byte) {
	t.Helper()
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: h.path, Net: "unixpacket"})
	must(t, err)
	defer c.Close()
	if _, err := c.Write(f); err != nil {
		t.Fatalf("%s: write: %v", name, err)
	}
	buf := make([]byte, hostapi.MaxFrame)
	if n, err := c.Read(buf); !errors.Is(err, io.EOF) {
		t.Fatalf("%s: after a framing error read %d bytes, err %v; want the connection closed", name, n, err)
	}
}

// roundTrip is what a well-behaved rank does in a step: its bytes reach
// the peer, and the peer's reach it.
func roundTrip(t *testing.T, h *harness, c *hostapi.Client) {
	t.Helper()
	ctx := context.Background()
	r, err := c.RegisterMemory(ctx, 2*regionSize)
	must(t, err)
	defer r.Close()
	copy(r.Bytes(), "still serving")
	must(t, c.CreateFlow(ctx, hostapi.FlowSpec{Flow: 77, Peer: peerHost, Class: hostapi.ClassGradient}))
	h.be.peerFlow(t, 77, hostapi.ClassGradient, 64, 0)
	h.be.peerRecv(t, 77, 64, 1, 0)
	must(t, c.BeginStep(ctx, hostapi.StepReq{Step: 1, Critical: new(true), ExpectedGradientBytes: 13}))
	must(t, c.PostRecv(ctx, hostapi.RecvReq{Flow: 77, Region: r.ID(), Offset: regionSize, Length: 13, Step: 1, WRID: 1}))
	must(t, c.PostSend(ctx, hostapi.SendReq{Flow: 77, Region: r.ID(), Length: 13, WRID: 2}))
	h.be.peerSend(t, 77, []byte("still serving"), 2)
	for range 2 {
		if comp := poll(t, c); comp.Status != hostapi.StatusOK || comp.Len != 13 {
			t.Errorf("work request completed as %+v", comp)
		}
	}
	if got := string(r.Bytes()[regionSize : regionSize+13]); got != "still serving" {
		t.Errorf("received %q", got)
	}
	if got := string(h.be.peerBytes(77)[:13]); got != "still serving" {
		t.Errorf("the peer received %q", got)
	}
	must(t, c.EndStep(ctx, 1))
	must(t, c.DestroyFlow(ctx, 77))
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}

func openFDs(tb testing.TB) int {
	tb.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	must(tb, err)
	return len(entries)
}

// warmUpPoller makes the runtime open its network poller descriptors
// before a test counts descriptors.
func warmUpPoller(tb testing.TB) {
	l, err := net.ListenUnix("unixpacket", &net.UnixAddr{Name: socketPath(tb), Net: "unixpacket"})
	must(tb, err)
	l.Close()
}

// TestRequestBeforeHello: every op but hello needs a session.
func TestRequestBeforeHello(t *testing.T) {
	h := newHarness(t, hostapi.ServerConfig{})
	r := h.raw()
	rep := r.call(frame(hostapi.OpPostSend, 0, 5, `{"flow":1,"region":1,"length":1}`))
	if rep.id != 5 || rep.errCode() != "hello_required" {
		t.Errorf("post_send before hello: id %d code %q", rep.id, rep.errCode())
	}
	rep = r.call(frame(hostapi.OpHello, 0, 6, `{"versions":[2,3]}`))
	if rep.errCode() != "unsupported_version" {
		t.Errorf("hello with versions [2,3]: code %q", rep.errCode())
	}
	r.hello() // still possible after a failed hello
}
