package hostapi_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/hostapi/nicapi"
	"github.com/forgive-emu/forgive/nic"
)

// coreBackend is forgived's backend without its sockets: the host API's
// core (nicapi.Host) over a real nic.Engine, host coreHost, serialised by
// a mutex as the daemon's loop serialises it. A second engine, host
// peerHost, is the other end of every flow; pump carries the packets
// between the two and runs their timers on the real clock, and the test
// drives the peer's side through peerFlow, peerSend and peerDone.
type coreBackend struct {
	srv *hostapi.Server // set once Listen returns

	mu      sync.Mutex
	start   time.Time
	eng     *nic.Engine
	h       *nicapi.Host
	peerEng *nic.Engine
	peer    *nicapi.Host
	buf     []byte
	mems    map[regionKey][]byte     // what RegisterMemory was handed
	calls   map[hostapi.ClientID]int // the calls that reached the backend, by client
	mapped  int                      // RegisterMemory calls: regions the server mapped and handed over
	gone    map[hostapi.ClientID]bool

	peerRegions map[hostapi.FlowID]peerRegion // each peer flow's receive region
	peerRecvLen map[hostapi.FlowID]uint64     // > 0: keep one receive of this length posted
	peerWR      uint64
	peerDone    chan hostapi.Completion // the peer's completions, but reposted receives'

	wake chan struct{}
	stop chan struct{}
	done chan struct{}
}

const (
	coreHost hostapi.HostID = 3
	peerHost hostapi.HostID = 4
)

type regionKey struct {
	c hostapi.ClientID
	r hostapi.RegionID
}

type peerRegion struct {
	id  hostapi.RegionID
	mem []byte
}

// fatal is what the peer's helpers need of a test (or of the example).
type fatal interface {
	Helper()
	Fatal(args ...any)
}

func newCoreBackend(tb testing.TB, limits hostapi.Limits) *coreBackend {
	tb.Helper()
	b, err := startCore(limits)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(b.close)
	return b
}

// startCore starts the core and its pump; close stops the pump.
func startCore(limits hostapi.Limits) (*coreBackend, error) {
	eng, err := nic.New(nic.DefaultConfig(uint16(coreHost), 10e9))
	if err != nil {
		return nil, err
	}
	peerEng, err := nic.New(nic.DefaultConfig(uint16(peerHost), 10e9))
	if err != nil {
		return nil, err
	}
	b := &coreBackend{
		start: time.Now(), eng: eng, peerEng: peerEng, buf: make([]byte, 1<<16),
		mems: map[regionKey][]byte{}, calls: map[hostapi.ClientID]int{}, gone: map[hostapi.ClientID]bool{},
		peerRegions: map[hostapi.FlowID]peerRegion{}, peerRecvLen: map[hostapi.FlowID]uint64{},
		peerDone: make(chan hostapi.Completion, 1024),
		wake:     make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}),
	}
	b.h = nicapi.New(b.eng, limits, func(c hostapi.ClientID, comp hostapi.Completion) { _ = b.srv.Complete(c, comp) })
	b.peer = nicapi.New(b.peerEng, hostapi.Limits{MaxRegions: 1 << 10, MaxOutstanding: 1 << 16}, b.peerCompleted)
	go b.run()
	return b, nil
}

func (b *coreBackend) close() { close(b.stop); <-b.done }

// serve hands the core the server its completions go to.
func (b *coreBackend) serve(srv *hostapi.Server) {
	b.mu.Lock()
	b.srv = srv
	b.mu.Unlock()
}

func (b *coreBackend) now() time.Duration { return time.Since(b.start) }

// locked runs fn on the core with the lock held and wakes the pump.
func (b *coreBackend) locked(fn func(now time.Duration) error) error {
	b.mu.Lock()
	err := fn(b.now())
	b.mu.Unlock()
	select {
	case b.wake <- struct{}{}:
	default:
	}
	return err
}

// run is the pump: the daemon's loop, with the fabric a wire between
// the two engines.
func (b *coreBackend) run() {
	defer close(b.done)
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		b.mu.Lock()
		next, ok := b.pumpLocked()
		b.mu.Unlock()
		wait := time.Hour
		if ok {
			wait = max(next-b.now(), 10*time.Microsecond)
		}
		timer.Reset(wait)
		select {
		case <-b.stop:
			return
		case <-b.wake:
		case <-timer.C:
		}
	}
}

func (b *coreBackend) pumpLocked() (time.Duration, bool) {
	for moved := true; moved; {
		moved = false
		now := b.now()
		for _, e := range []*nic.Engine{b.eng, b.peerEng} {
			e.Advance(now)
		}
		for _, hop := range [][2]*nic.Engine{{b.eng, b.peerEng}, {b.peerEng, b.eng}} {
			for {
				pkt, tos, ok := hop[0].Transmit(now, b.buf)
				if !ok {
					break
				}
				hop[1].Receive(now, pkt, tos)
				moved = true
			}
		}
		b.h.Deliver()
		b.peer.Deliver()
	}
	n1, ok1 := b.eng.NextDeadline()
	n2, ok2 := b.peerEng.NextDeadline()
	switch {
	case ok1 && ok2:
		return min(n1, n2), true
	case ok1:
		return n1, true
	}
	return n2, ok2
}

// peerCompleted is the peer's sink; b.mu is held. A receive on a flow
// with peerRecvLen set is reposted instead of reported.
func (b *coreBackend) peerCompleted(_ hostapi.ClientID, comp hostapi.Completion) {
	b.peer.Written(1, 1)
	if n := b.peerRecvLen[comp.Flow]; n > 0 && comp.Kind == hostapi.KindRecv && comp.Status == hostapi.StatusOK {
		b.peerWR++
		_ = b.peer.PostRecv(1, hostapi.RecvReq{Flow: comp.Flow, Region: b.peerRegions[comp.Flow].id, Length: n, WRID: b.peerWR})
		return
	}
	select {
	case b.peerDone <- comp:
	default:
	}
}

// peerFlow opens flow f's other end on the peer, with a receive region of
// size bytes; keepRecv > 0 keeps one receive of that length posted.
func (b *coreBackend) peerFlow(tb fatal, f hostapi.FlowID, class hostapi.Class, size int, keepRecv uint64) {
	tb.Helper()
	must(tb, b.locked(func(now time.Duration) error {
		mem := make([]byte, size)
		id, err := b.peer.RegisterMemory(1, mem)
		if err != nil {
			return err
		}
		b.peerRegions[f] = peerRegion{id, mem}
		if err := b.peer.CreateFlow(now, 1, hostapi.FlowSpec{Flow: f, Peer: coreHost, Class: class}); err != nil {
			return err
		}
		if keepRecv > 0 {
			b.peerRecvLen[f] = keepRecv
			for range 64 {
				b.peerWR++
				if err := b.peer.PostRecv(1, hostapi.RecvReq{Flow: f, Region: id, Length: keepRecv, WRID: b.peerWR}); err != nil {
					return err
				}
			}
		}
		return nil
	}))
}

// peerRecv posts a receive of length bytes at offset 0 of flow f's region.
func (b *coreBackend) peerRecv(tb fatal, f hostapi.FlowID, length, wr uint64, step uint64) {
	tb.Helper()
	must(tb, b.locked(func(time.Duration) error {
		return b.peer.PostRecv(1, hostapi.RecvReq{Flow: f, Region: b.peerRegions[f].id, Length: length, WRID: wr, Step: step})
	}))
}

// peerSend sends data from the peer on flow f, from a region of its own.
func (b *coreBackend) peerSend(tb fatal, f hostapi.FlowID, data []byte, wr uint64) {
	tb.Helper()
	must(tb, b.locked(func(now time.Duration) error {
		id, err := b.peer.RegisterMemory(1, slices.Clone(data))
		if err != nil {
			return err
		}
		return b.peer.PostSend(now, 1, hostapi.SendReq{Flow: f, Region: id, Length: uint64(len(data)), WRID: wr})
	}))
}

// peerBytes is a copy of flow f's receive region on the peer.
func (b *coreBackend) peerBytes(f hostapi.FlowID) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.peerRegions[f].mem)
}

func (b *coreBackend) peerPoll(tb fatal) hostapi.Completion {
	tb.Helper()
	select {
	case c := <-b.peerDone:
		return c
	case <-time.After(time.Minute):
		tb.Fatal("no completion on the peer within a minute")
		return hostapi.Completion{}
	}
}

// bound waits until the core's flows to the peer have finished their
// handshake, after which an idle engine sends nothing.
func (b *coreBackend) bound(tb fatal, flows ...hostapi.FlowID) {
	tb.Helper()
	for range 60_000 {
		all := true
		b.mu.Lock()
		for _, f := range flows {
			r, ok := b.eng.Flow(nic.FlowKey{Peer: uint16(peerHost), ID: uint32(f)})
			all = all && ok && r.PeerTag != 0
		}
		b.mu.Unlock()
		if all {
			return
		}
		time.Sleep(time.Millisecond)
	}
	tb.Fatal("flows not bound to the peer within a minute")
}

// engineState is what a request that reaches the engine changes: its
// counters and every flow's.
type engineState struct {
	stats nic.Stats
	flows []any
}

func (b *coreBackend) engineState() engineState {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := engineState{stats: b.eng.Stats()}
	for _, k := range b.eng.Flows() {
		r, _ := b.eng.Flow(k)
		st.flows = append(st.flows, k, r.Spec, r.Stats, r.Sender, r.Receiver)
	}
	return st
}

func (b *coreBackend) Hello(c hostapi.ClientID, job hostapi.Job) error {
	return b.locked(func(time.Duration) error { return b.h.Hello(c, job) })
}

func (b *coreBackend) CheckRegister(c hostapi.ClientID, length uint64) error {
	b.called(c)
	return b.locked(func(time.Duration) error { return b.h.CheckRegister(c, length) })
}

func (b *coreBackend) RegisterMemory(c hostapi.ClientID, mem []byte) (id hostapi.RegionID, err error) {
	b.called(c)
	err = b.locked(func(time.Duration) error {
		b.mapped++
		id, err = b.h.RegisterMemory(c, mem)
		if err == nil {
			b.mems[regionKey{c, id}] = mem
		}
		return err
	})
	return id, err
}

func (b *coreBackend) DeregisterMemory(c hostapi.ClientID, r hostapi.RegionID) error {
	b.called(c)
	return b.locked(func(time.Duration) error {
		err := b.h.DeregisterMemory(c, r)
		if err == nil {
			delete(b.mems, regionKey{c, r})
		}
		return err
	})
}

func (b *coreBackend) CreateFlow(c hostapi.ClientID, spec hostapi.FlowSpec) error {
	b.called(c)
	return b.locked(func(now time.Duration) error { return b.h.CreateFlow(now, c, spec) })
}

func (b *coreBackend) DestroyFlow(c hostapi.ClientID, f hostapi.FlowID) error {
	b.called(c)
	return b.locked(func(time.Duration) error { return b.h.DestroyFlow(c, f) })
}

func (b *coreBackend) PostSend(c hostapi.ClientID, req hostapi.SendReq) error {
	b.called(c)
	return b.locked(func(now time.Duration) error { return b.h.PostSend(now, c, req) })
}

func (b *coreBackend) PostRecv(c hostapi.ClientID, req hostapi.RecvReq) error {
	b.called(c)
	return b.locked(func(time.Duration) error { return b.h.PostRecv(c, req) })
}

func (b *coreBackend) Written(c hostapi.ClientID, n int) {
	_ = b.locked(func(time.Duration) error { b.h.Written(c, n); return nil })
}

func (b *coreBackend) BeginStep(c hostapi.ClientID, req hostapi.StepReq) error {
	return b.locked(func(now time.Duration) error { return b.h.BeginStep(now, c, req) })
}

func (b *coreBackend) EndStep(c hostapi.ClientID, step uint64) error {
	return b.locked(func(now time.Duration) error { return b.h.EndStep(now, c, step) })
}

func (b *coreBackend) Counters(c hostapi.ClientID) (out hostapi.Counters, err error) {
	b.called(c)
	err = b.locked(func(time.Duration) error { out = b.h.Counters(c); return nil })
	return out, err
}

func (b *coreBackend) Steps(c hostapi.ClientID) (out []hostapi.StepRecord, err error) {
	err = b.locked(func(time.Duration) error {
		out, err = b.h.Steps(c, hostapi.MaxStepRecords)
		return err
	})
	return out, err
}

func (b *coreBackend) Status() (st hostapi.Status, err error) {
	err = b.locked(func(time.Duration) error {
		st = hostapi.Status{Flows: b.h.Flows(), Backend: map[string]string{"engine": "nic", "host": fmt.Sprint(b.eng.Config().Host)}}
		return nil
	})
	return st, err
}

func (b *coreBackend) ClientGone(c hostapi.ClientID) {
	_ = b.locked(func(time.Duration) error {
		b.h.ClientGone(c)
		b.gone[c] = true
		for k := range b.mems {
			if k.c == c {
				delete(b.mems, k)
			}
		}
		return nil
	})
}

func (b *coreBackend) called(c hostapi.ClientID) {
	b.mu.Lock()
	b.calls[c]++
	b.mu.Unlock()
}

// handed counts the regions the server mapped and handed to the core.
func (b *coreBackend) handed() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mapped
}

// callsOf counts client c's calls that reached the backend.
func (b *coreBackend) callsOf(c hostapi.ClientID) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.calls[c]
}

// region returns the memory the server handed the core for a client's
// region, while the core holds it.
func (b *coreBackend) region(c hostapi.ClientID, r hostapi.RegionID) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.mems[regionKey{c, r}]
}

func (b *coreBackend) isGone(c hostapi.ClientID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gone[c]
}

func (b *coreBackend) flowOwner(f hostapi.FlowID) (hostapi.ClientID, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.h.FlowOwner(f)
}

// --- harness --------------------------------------------------------------

// harness runs a server on a fresh socket over the real core.
type harness struct {
	tb   testing.TB
	path string
	srv  *hostapi.Server
	be   *coreBackend
}

// socketPath returns a short socket path (sun_path holds 108 bytes, and
// test temp dirs can be long).
func socketPath(tb testing.TB) string {
	dir, err := os.MkdirTemp("", "hapi")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "d.sock")
}

func newHarness(tb testing.TB, cfg hostapi.ServerConfig) *harness {
	tb.Helper()
	path := socketPath(tb)
	be := newCoreBackend(tb, cfg.Limits)
	srv, err := hostapi.Listen(path, cfg, be, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatalf("Listen: %v", err)
	}
	be.serve(srv)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	tb.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			tb.Errorf("Serve: %v", err)
		}
	})
	return &harness{tb: tb, path: path, srv: srv, be: be}
}

func (h *harness) dial() *hostapi.Client {
	h.tb.Helper()
	c, err := hostapi.Dial(h.path)
	if err != nil {
		h.tb.Fatalf("Dial: %v", err)
	}
	h.tb.Cleanup(func() { c.Close() })
	return c
}

func must(tb fatal, err error) {
	tb.Helper()
	if err != nil {
		tb.Fatal(err)
	}
}

// --- raw connections --------------------------------------------------------

// rawConn speaks the protocol by hand, from the byte layout in
// docs/hostapi.md, independently of the package's own encoder.
type rawConn struct {
	tb testing.TB
	c  *net.UnixConn
}

func (h *harness) raw() *rawConn {
	h.tb.Helper()
	c, err := net.DialUnix("unixpacket", nil, &net.UnixAddr{Name: h.path, Net: "unixpacket"})
	if err != nil {
		h.tb.Fatalf("dial raw: %v", err)
	}
	r := &rawConn{tb: h.tb, c: c}
	h.tb.Cleanup(func() { c.Close() })
	return r
}

func frame(op hostapi.Op, flags byte, id uint64, body string) []byte {
	b := []byte{'F', 'G', 'V', 1, byte(op), flags, 0, 0}
	b = binary.BigEndian.AppendUint64(b, id)
	return append(b, body...)
}

func (r *rawConn) send(f []byte, fds ...int) error {
	var oob []byte
	if len(fds) > 0 {
		oob = unix.UnixRights(fds...)
	}
	_, _, err := r.c.WriteMsgUnix(f, oob, nil)
	return err
}

// rawReply is one daemon frame, decoded by hand.
type rawReply struct {
	op    hostapi.Op
	flags byte
	id    uint64
	body  []byte
}

func (r *rawConn) recv() (rawReply, error) {
	buf := make([]byte, hostapi.MaxFrame)
	n, err := r.c.Read(buf)
	if err != nil {
		return rawReply{}, err
	}
	if n < hostapi.HeaderLen || string(buf[:3]) != "FGV" || buf[3] != 1 {
		return rawReply{}, fmt.Errorf("bad daemon frame % x", buf[:min(n, 16)])
	}
	return rawReply{op: hostapi.Op(buf[4]), flags: buf[5], id: binary.BigEndian.Uint64(buf[8:16]), body: buf[16:n]}, nil
}

// call sends a request and returns its reply, skipping pushed completions.
func (r *rawConn) call(f []byte, fds ...int) rawReply {
	r.tb.Helper()
	if err := r.send(f, fds...); err != nil {
		r.tb.Fatalf("send: %v", err)
	}
	for {
		rep, err := r.recv()
		if err != nil {
			r.tb.Fatalf("recv: %v", err)
		}
		if rep.id != 0 || rep.op != hostapi.OpCompletion {
			return rep
		}
	}
}

// errCode returns the error code of a reply, or "" for a success.
func (rep rawReply) errCode() string {
	if rep.flags&hostapi.FlagError == 0 {
		return ""
	}
	var e hostapi.Error
	if err := json.Unmarshal(rep.body, &e); err != nil {
		return "undecodable: " + err.Error()
	}
	return string(e.Code)
}

// hello opens the session and returns the client id.
func (r *rawConn) hello() hostapi.ClientID {
	r.tb.Helper()
	rep := r.call(frame(hostapi.OpHello, 0, 1, `{"versions":[1],"name":"raw"}`))
	var hr hostapi.HelloReply
	if rep.errCode() != "" || json.Unmarshal(rep.body, &hr) != nil {
		r.tb.Fatalf("hello: %s %s", rep.errCode(), rep.body)
	}
	return hr.Client
}

// sealedMemfd returns a memfd of size bytes sealed as the server requires.
func sealedMemfd(tb testing.TB, name string, size int, seals int) int {
	tb.Helper()
	fd, err := unix.MemfdCreate(name, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	must(tb, err)
	must(tb, unix.Ftruncate(fd, int64(size)))
	if seals != 0 {
		_, err = unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, seals)
		must(tb, err)
	}
	return fd
}

// register registers a fresh sealed memfd over a raw connection.
func (r *rawConn) register(id uint64, name string, size int) hostapi.RegionID {
	r.tb.Helper()
	fd := sealedMemfd(r.tb, name, size, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW)
	defer unix.Close(fd)
	rep := r.call(frame(hostapi.OpRegisterMemory, 0, id, fmt.Sprintf(`{"length":%d}`, size)), fd)
	var rr hostapi.RegisterReply
	if rep.errCode() != "" || json.Unmarshal(rep.body, &rr) != nil {
		r.tb.Fatalf("register: %s %s", rep.errCode(), rep.body)
	}
	return rr.Region
}

// mapped reports whether this process maps a memfd with the given name.
func mapped(tb testing.TB, name string) bool {
	tb.Helper()
	maps, err := os.ReadFile("/proc/self/maps")
	must(tb, err)
	return strings.Contains(string(maps), "/memfd:"+name+" ")
}

func isCode(err error, code hostapi.ErrorCode) bool {
	var e *hostapi.Error
	return errors.As(err, &e) && e.Code == code
}
