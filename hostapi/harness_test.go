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

	"golang.org/x/sys/unix"

	"github.com/forgive-emu/forgive/hostapi"
)

// echoBackend is the in-test NIC: a send on a flow is delivered to the
// receive posted on the same flow by copying between registered regions.
// It records every call so tests can check what reached the backend.
type echoBackend struct {
	srv *hostapi.Server // set once Listen returns

	mu         sync.Mutex
	nextRegion hostapi.RegionID
	regions    map[hostapi.ClientID]map[hostapi.RegionID][]byte
	flows      map[hostapi.FlowID]*echoFlow
	steps      map[hostapi.ClientID][]hostapi.StepRecord
	calls      []string // "op client", in order
	gone       map[hostapi.ClientID]bool
	owned      map[hostapi.ClientID]hostapi.Owned // what ClientGone listed
	sends      uint64

	forgive    []hostapi.Range // zero-filled and reported on every delivery
	sinkSends  bool            // complete sends at once, deliver nothing
	holdPosts  bool            // never complete anything until flush
	failCreate error           // CreateFlow returns it
}

type echoFlow struct {
	owner hostapi.ClientID
	spec  hostapi.FlowSpec
	recvs []hostapi.RecvReq
	sends []hostapi.SendReq
}

type pendingCompletion struct {
	c    hostapi.ClientID
	comp hostapi.Completion
}

func newEchoBackend() *echoBackend {
	return &echoBackend{
		regions: map[hostapi.ClientID]map[hostapi.RegionID][]byte{},
		flows:   map[hostapi.FlowID]*echoFlow{},
		steps:   map[hostapi.ClientID][]hostapi.StepRecord{},
		gone:    map[hostapi.ClientID]bool{},
		owned:   map[hostapi.ClientID]hostapi.Owned{},
	}
}

func (b *echoBackend) record(op string, c hostapi.ClientID) {
	b.calls = append(b.calls, fmt.Sprintf("%s %d", op, c))
}

func (b *echoBackend) RegisterMemory(c hostapi.ClientID, mem []byte) (hostapi.RegionID, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("register_memory", c)
	b.nextRegion++
	if b.regions[c] == nil {
		b.regions[c] = map[hostapi.RegionID][]byte{}
	}
	b.regions[c][b.nextRegion] = mem
	return b.nextRegion, nil
}

func (b *echoBackend) DeregisterMemory(c hostapi.ClientID, r hostapi.RegionID) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("deregister_memory", c)
	delete(b.regions[c], r)
	return nil
}

func (b *echoBackend) CreateFlow(c hostapi.ClientID, spec hostapi.FlowSpec) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("create_flow", c)
	if b.failCreate != nil {
		return b.failCreate
	}
	b.flows[spec.Flow] = &echoFlow{owner: c, spec: spec}
	return nil
}

func (b *echoBackend) DestroyFlow(c hostapi.ClientID, f hostapi.FlowID) error {
	b.mu.Lock()
	fl := b.flows[f]
	delete(b.flows, f)
	b.record("destroy_flow", c)
	b.mu.Unlock()
	b.flushFlow(fl, "flow destroyed")
	return nil
}

func (b *echoBackend) PostSend(c hostapi.ClientID, req hostapi.SendReq) error {
	b.mu.Lock()
	b.record("post_send", c)
	b.sends++
	var out []pendingCompletion
	switch fl := b.flows[req.Flow]; {
	case b.sinkSends:
		out = append(out, pendingCompletion{c, sendDone(req)})
	default:
		fl.sends = append(fl.sends, req)
		if !b.holdPosts {
			out = b.match(fl)
		}
	}
	b.mu.Unlock()
	b.complete(out)
	return nil
}

func (b *echoBackend) PostRecv(c hostapi.ClientID, req hostapi.RecvReq) error {
	b.mu.Lock()
	b.record("post_recv", c)
	fl := b.flows[req.Flow]
	fl.recvs = append(fl.recvs, req)
	var out []pendingCompletion
	if !b.holdPosts {
		out = b.match(fl)
	}
	b.mu.Unlock()
	b.complete(out)
	return nil
}

// match delivers queued sends into queued receives, in order; b.mu held.
func (b *echoBackend) match(fl *echoFlow) []pendingCompletion {
	var out []pendingCompletion
	for len(fl.sends) > 0 && len(fl.recvs) > 0 {
		s, r := fl.sends[0], fl.recvs[0]
		fl.sends, fl.recvs = fl.sends[1:], fl.recvs[1:]
		regions := b.regions[fl.owner]
		src := regions[s.Region][s.Offset : s.Offset+s.Length]
		dst := regions[r.Region][r.Offset : r.Offset+r.Length]
		n := copy(dst, src)
		recv := hostapi.Completion{WRID: r.WRID, Kind: hostapi.KindRecv, Flow: r.Flow, Status: hostapi.StatusOK, Len: uint64(n), Step: r.Step}
		for _, fr := range b.forgive {
			if fr.End <= uint64(n) {
				clear(dst[fr.Start:fr.End])
				recv.Forgiven = append(recv.Forgiven, fr)
			}
		}
		out = append(out, pendingCompletion{fl.owner, recv}, pendingCompletion{fl.owner, sendDone(s)})
	}
	return out
}

func sendDone(s hostapi.SendReq) hostapi.Completion {
	return hostapi.Completion{WRID: s.WRID, Kind: hostapi.KindSend, Flow: s.Flow, Status: hostapi.StatusOK, Len: s.Length}
}

// flushFlow completes every queued work request of fl with an error.
func (b *echoBackend) flushFlow(fl *echoFlow, why string) {
	if fl == nil {
		return
	}
	b.mu.Lock()
	var out []pendingCompletion
	for _, r := range fl.recvs {
		out = append(out, pendingCompletion{fl.owner, hostapi.Completion{WRID: r.WRID, Kind: hostapi.KindRecv, Flow: r.Flow, Status: hostapi.StatusError, Err: why}})
	}
	for _, s := range fl.sends {
		out = append(out, pendingCompletion{fl.owner, hostapi.Completion{WRID: s.WRID, Kind: hostapi.KindSend, Flow: s.Flow, Status: hostapi.StatusError, Err: why}})
	}
	fl.recvs, fl.sends = nil, nil
	b.mu.Unlock()
	b.complete(out)
}

func (b *echoBackend) complete(out []pendingCompletion) {
	for _, p := range out {
		_ = b.srv.Complete(p.c, p.comp)
	}
}

func (b *echoBackend) BeginStep(c hostapi.ClientID, req hostapi.StepReq) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("begin_step", c)
	critical := req.LRDecay
	if req.Critical != nil {
		critical = *req.Critical
	}
	b.steps[c] = append(b.steps[c], hostapi.StepRecord{Step: req.Step, Critical: critical, Expected: int64(req.ExpectedGradientBytes), Open: true, InvariantHeld: true})
	return nil
}

func (b *echoBackend) EndStep(c hostapi.ClientID, step uint64) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("end_step", c)
	for i := range b.steps[c] {
		if b.steps[c][i].Step == step {
			b.steps[c][i].Open = false
			return nil
		}
	}
	return &hostapi.Error{Code: "no_such_step", Message: fmt.Sprintf("step %d never began", step)}
}

func (b *echoBackend) Counters(c hostapi.ClientID) (hostapi.Counters, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("counters", c)
	out := hostapi.Counters{Host: hostapi.HostStats{TxPackets: b.sends}} // the fake sends a message as one packet
	for id, fl := range b.flows {
		if fl.owner == c {
			out.Flows = append(out.Flows, hostapi.FlowCounters{Flow: id, Peer: fl.spec.Peer, Values: hostapi.FlowStats{RecvsDone: uint64(len(fl.recvs))}})
		}
	}
	return out, nil
}

func (b *echoBackend) Steps(c hostapi.ClientID) ([]hostapi.StepRecord, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("steps", c)
	return slices.Clone(b.steps[c]), nil
}

func (b *echoBackend) Status() (hostapi.Status, error) {
	return hostapi.Status{Backend: map[string]string{"kind": "echo"}}, nil
}

func (b *echoBackend) ClientGone(c hostapi.ClientID, owned hostapi.Owned) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.record("client_gone", c)
	b.gone[c] = true
	b.owned[c] = owned
	delete(b.regions, c)
	delete(b.steps, c)
	for id, fl := range b.flows {
		if fl.owner == c {
			delete(b.flows, id)
		}
	}
}

// region returns the backend's view of a client's region.
func (b *echoBackend) region(c hostapi.ClientID, r hostapi.RegionID) []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.regions[c][r]
}

func (b *echoBackend) flowSpec(f hostapi.FlowID) hostapi.FlowSpec {
	b.mu.Lock()
	defer b.mu.Unlock()
	if fl := b.flows[f]; fl != nil {
		return fl.spec
	}
	return hostapi.FlowSpec{}
}

func (b *echoBackend) callsOf(c hostapi.ClientID) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	suffix := fmt.Sprintf(" %d", c)
	for _, call := range b.calls {
		if op, ok := cutSuffix(call, suffix); ok {
			out = append(out, op)
		}
	}
	return out
}

func cutSuffix(s, suffix string) (string, bool) {
	if len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix {
		return s[:len(s)-len(suffix)], true
	}
	return "", false
}

func (b *echoBackend) isGone(c hostapi.ClientID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.gone[c]
}

func (b *echoBackend) ownedAtGone(c hostapi.ClientID) hostapi.Owned {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.owned[c]
}

func (b *echoBackend) set(f func(b *echoBackend)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(b)
}

// --- harness --------------------------------------------------------------

// harness runs a server on a fresh socket with an echo backend.
type harness struct {
	tb   testing.TB
	path string
	srv  *hostapi.Server
	be   *echoBackend
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
	be := newEchoBackend()
	srv, err := hostapi.Listen(path, cfg, be, slog.New(slog.DiscardHandler))
	if err != nil {
		tb.Fatalf("Listen: %v", err)
	}
	be.srv = srv
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

func must(tb testing.TB, err error) {
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
