package workload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"

	"github.com/forgive-emu/forgive/hostapi"
)

// fakeFabric stands in for the daemons and the network: it matches the
// k-th send of a flow direction to the k-th receive posted for it, and
// delivers the matched pairs in a random order across flows, with each
// send's completion a separate, later event. Progress happens inside Poll,
// whoever calls it. It records the rules a workload must keep that a real
// daemon would only show as corrupt data or a hang.
type fakeFabric struct {
	mu     sync.Mutex
	rng    *rand.Rand
	hosts  map[hostapi.HostID]*fakeHost
	queues map[dirKey]*dirQueue
	acks   []fakeAck

	// forgive returns the ranges to forgive of a message of n bytes on a
	// flow of the class (nil: none).
	forgive func(r *rand.Rand, class hostapi.Class, n int) []hostapi.Range
	// forgivePhase, when set, is used instead of forgive, with the phase
	// the receive declared: as a daemon's gather policy decides.
	forgivePhase func(r *rand.Rand, class hostapi.Class, ph hostapi.Phase, n int) []hostapi.Range
	// phases counts the gradient receives posted, by declared phase.
	phases map[hostapi.Phase]int
	// corrupt may change a delivered message without saying so.
	corrupt func(class hostapi.Class, data []byte)
	// hold keeps a send from ever being delivered.
	hold func(flow hostapi.FlowID, from hostapi.HostID, k int) bool
	// acksLast completes sends only when nothing else can happen: no
	// message can be delivered and every host with work posted waits in
	// Poll. This is the widest window for a workload to overwrite a pending
	// send's memory, whatever the goroutines' timing.
	acksLast bool
	// fail completes a send with an error instead of delivering it.
	fail func(flow hostapi.FlowID, from hostapi.HostID, k int) bool

	violations   []string
	leftover     int   // work still posted when its flow was destroyed
	forgivenSent int64 // bytes forgiven on gradient flows
	// moved counts the bytes delivered, by sending and receiving host and
	// class.
	moved map[moveKey]int
}

type moveKey struct {
	from, to hostapi.HostID
	class    hostapi.Class
}

type dirKey struct {
	flow hostapi.FlowID
	from hostapi.HostID
}

type dirQueue struct {
	sends, recvs []fakeWR
	sent         int // sends posted so far, to number them
}

type fakeWR struct {
	host   *fakeHost
	flow   hostapi.FlowID
	region hostapi.RegionID
	off, n int
	wr     uint64
	step   uint64
	phase  hostapi.Phase
	k      int // the send's number on its direction
}

// fakeAck is a delivered send whose completion is still to come; data is
// what the receiver got before forgiveness, which the send's memory must
// still hold at completion.
type fakeAck struct {
	send fakeWR
	data []byte
}

func newFakeFabric(seed uint64, hosts ...hostapi.HostID) *fakeFabric {
	f := &fakeFabric{rng: rand.New(rand.NewPCG(seed, 7)), hosts: map[hostapi.HostID]*fakeHost{}, queues: map[dirKey]*dirQueue{}}
	for _, h := range hosts {
		f.hosts[h] = &fakeHost{fab: f, id: h, regions: map[hostapi.RegionID][]byte{}, inUse: map[hostapi.RegionID]int{},
			flows: map[hostapi.FlowID]fakeFlow{}, steps: map[uint64]string{}, gradRecvs: map[uint64]int{},
			notify: make(chan struct{}, 1)}
	}
	return f
}

// host APIs returns the hosts as host APIs, in the given order.
func (f *fakeFabric) apis(hosts ...hostapi.HostID) []HostAPI {
	out := make([]HostAPI, len(hosts))
	for i, h := range hosts {
		out[i] = f.hosts[h]
	}
	return out
}

func (f *fakeFabric) violate(format string, args ...any) {
	f.violations = append(f.violations, fmt.Sprintf(format, args...))
}

func (f *fakeFabric) queue(k dirKey) *dirQueue {
	q := f.queues[k]
	if q == nil {
		q = &dirQueue{}
		f.queues[k] = q
	}
	return q
}

// wake tells every poller that something may be done now.
func (f *fakeFabric) wake() {
	for _, h := range f.hosts {
		select {
		case h.notify <- struct{}{}:
		default:
		}
	}
}

// step does one random thing that is possible: deliver a matched message
// or complete a delivered send. It reports whether it did anything.
func (f *fakeFabric) step(caller *fakeHost) bool {
	var ready []dirKey
	for k, q := range f.queues {
		if len(q.sends) > 0 && len(q.recvs) > 0 && (f.hold == nil || !f.hold(k.flow, k.from, q.sends[0].k)) {
			ready = append(ready, k)
		}
	}
	slices.SortFunc(ready, func(a, b dirKey) int {
		if a.flow != b.flow {
			return int(a.flow) - int(b.flow)
		}
		return int(a.from) - int(b.from)
	})
	// Send completions lag behind deliveries, as when acknowledgements are
	// slow: that is when a workload that reuses a pending send's memory
	// gets caught.
	idle := len(ready) == 0 && (!f.acksLast || f.othersWait(caller))
	late := !f.acksLast && f.rng.IntN(8) == 0
	switch {
	case len(f.acks) > 0 && (idle || late):
		f.complete(f.rng.IntN(len(f.acks)))
	case len(ready) > 0:
		f.deliver(ready[f.rng.IntN(len(ready))])
	default:
		return false
	}
	f.wake()
	return true
}

// othersWait reports whether every host but the caller is idle or blocked
// in Poll with nothing to pick up.
func (f *fakeFabric) othersWait(caller *fakeHost) bool {
	for _, h := range f.hosts {
		if h != caller && h.posted > 0 && (!h.blocked || len(h.comps) > 0) {
			return false
		}
	}
	return true
}

func (f *fakeFabric) deliver(k dirKey) {
	q := f.queues[k]
	s, r := q.sends[0], q.recvs[0]
	q.sends, q.recvs = q.sends[1:], q.recvs[1:]
	r.host.inUse[r.region]--
	if f.fail != nil && f.fail(k.flow, k.from, s.k) {
		s.host.inUse[s.region]--
		s.host.push(hostapi.Completion{WRID: s.wr, Kind: hostapi.KindSend, Flow: s.flow, Status: hostapi.StatusError, Err: "injected failure", Len: uint64(s.n)})
		r.host.push(hostapi.Completion{WRID: r.wr, Kind: hostapi.KindRecv, Flow: r.flow, Status: hostapi.StatusError, Err: "injected failure", Step: r.step})
		return
	}
	if s.n > r.n {
		f.violate("flow %d: message of %d bytes for a receive of %d", k.flow, s.n, r.n)
	}
	data := bytes.Clone(s.host.regions[s.region][s.off : s.off+s.n])
	f.acks = append(f.acks, fakeAck{send: s, data: bytes.Clone(data)})
	class := r.host.flows[r.flow].class
	if f.moved == nil {
		f.moved = map[moveKey]int{}
	}
	f.moved[moveKey{s.host.id, r.host.id, class}] += s.n
	if f.corrupt != nil {
		f.corrupt(class, data)
	}
	var forgiven []hostapi.Range
	switch {
	case f.forgivePhase != nil:
		forgiven = f.forgivePhase(f.rng, class, r.phase, len(data))
	case f.forgive != nil:
		forgiven = f.forgive(f.rng, class, len(data))
	}
	for _, g := range forgiven {
		clear(data[g.Start:g.End])
		if class == hostapi.ClassGradient {
			f.forgivenSent += int64(g.Len())
		}
	}
	copy(r.host.regions[r.region][r.off:], data[:min(len(data), r.n)])
	r.host.push(hostapi.Completion{WRID: r.wr, Kind: hostapi.KindRecv, Flow: r.flow, Status: hostapi.StatusOK,
		Len: uint64(len(data)), Step: r.step, Forgiven: forgiven})
	if class == hostapi.ClassGradient {
		r.host.gradRecvs[r.step]--
	}
}

func (f *fakeFabric) complete(i int) {
	a := f.acks[i]
	f.acks = slices.Delete(f.acks, i, i+1)
	s := a.send
	if !bytes.Equal(s.host.regions[s.region][s.off:s.off+s.n], a.data) {
		f.violate("host %d flow %d: send %#x's memory changed before it completed", s.host.id, s.flow, s.wr)
	}
	s.host.inUse[s.region]--
	s.host.push(hostapi.Completion{WRID: s.wr, Kind: hostapi.KindSend, Flow: s.flow, Status: hostapi.StatusOK, Len: uint64(s.n)})
}

// fakeHost is one daemon of the fake fabric.
type fakeHost struct {
	fab        *fakeFabric
	id         hostapi.HostID
	regions    map[hostapi.RegionID][]byte
	inUse      map[hostapi.RegionID]int
	nextRegion hostapi.RegionID
	flows      map[hostapi.FlowID]fakeFlow
	steps      map[uint64]string // "open" or "closed"
	gradRecvs  map[uint64]int    // gradient receives posted and not completed, per step
	begins     []hostapi.StepReq
	created    []hostapi.FlowSpec
	comps      []hostapi.Completion
	posted     int  // work requests posted and not completed
	blocked    bool // waiting in Poll
	notify     chan struct{}
}

type fakeFlow struct {
	peer  hostapi.HostID
	class hostapi.Class
	spec  hostapi.FlowSpec
}

var errFake = errors.New("fake daemon refused")

func (h *fakeHost) push(c hostapi.Completion) {
	h.comps = append(h.comps, c)
	h.posted--
}

func (h *fakeHost) RegisterMemory(_ context.Context, size int) (Memory, error) {
	h.fab.mu.Lock()
	defer h.fab.mu.Unlock()
	h.nextRegion++
	h.regions[h.nextRegion] = make([]byte, size)
	return &fakeRegion{h: h, id: h.nextRegion}, nil
}

func (h *fakeHost) CreateFlow(_ context.Context, spec hostapi.FlowSpec) error {
	h.fab.mu.Lock()
	defer h.fab.mu.Unlock()
	if _, ok := h.flows[spec.Flow]; ok {
		return fmt.Errorf("%w: flow %d exists", errFake, spec.Flow)
	}
	if spec.Peer == h.id || h.fab.hosts[spec.Peer] == nil {
		return fmt.Errorf("%w: flow %d to host %d", errFake, spec.Flow, spec.Peer)
	}
	h.flows[spec.Flow] = fakeFlow{peer: spec.Peer, class: spec.Class, spec: spec}
	h.created = append(h.created, spec)
	return nil
}

// DestroyFlow fails the work still posted on the flow at this host.
func (h *fakeHost) DestroyFlow(_ context.Context, flow hostapi.FlowID) error {
	f := h.fab
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := h.flows[flow]
	if !ok {
		return fmt.Errorf("%w: no flow %d", errFake, flow)
	}
	for _, k := range []dirKey{{flow, h.id}, {flow, fl.peer}} {
		q := f.queue(k)
		keep := func(list []fakeWR, kind hostapi.Kind) []fakeWR {
			return slices.DeleteFunc(list, func(w fakeWR) bool {
				if w.host != h {
					return false
				}
				f.leftover++
				h.inUse[w.region]--
				h.push(hostapi.Completion{WRID: w.wr, Kind: kind, Flow: flow, Status: hostapi.StatusError, Err: "flow destroyed"})
				return true
			})
		}
		q.sends, q.recvs = keep(q.sends, hostapi.KindSend), keep(q.recvs, hostapi.KindRecv)
	}
	delete(h.flows, flow)
	return nil
}

func (h *fakeHost) post(flow hostapi.FlowID, region hostapi.RegionID, off, n uint64) (fakeFlow, error) {
	fl, ok := h.flows[flow]
	if !ok {
		return fl, fmt.Errorf("%w: no flow %d", errFake, flow)
	}
	mem, ok := h.regions[region]
	if !ok || n == 0 || off+n > uint64(len(mem)) {
		return fl, fmt.Errorf("%w: [%d,+%d) outside region %d", errFake, off, n, region)
	}
	h.inUse[region]++
	h.posted++
	return fl, nil
}

func (h *fakeHost) PostSend(_ context.Context, req hostapi.SendReq) error {
	f := h.fab
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, err := h.post(req.Flow, req.Region, req.Offset, req.Length); err != nil {
		return err
	}
	q := f.queue(dirKey{req.Flow, h.id})
	q.sends = append(q.sends, fakeWR{host: h, flow: req.Flow, region: req.Region, off: int(req.Offset), n: int(req.Length), wr: req.WRID, k: q.sent})
	q.sent++
	f.wake()
	return nil
}

func (h *fakeHost) PostRecv(_ context.Context, req hostapi.RecvReq) error {
	f := h.fab
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, err := h.post(req.Flow, req.Region, req.Offset, req.Length)
	if err != nil {
		return err
	}
	if fl.class == hostapi.ClassGradient {
		if h.steps[req.Step] != "open" {
			f.violate("host %d: gradient receive for step %d, which is %q", h.id, req.Step, h.steps[req.Step])
		}
		h.gradRecvs[req.Step]++
		if f.phases == nil {
			f.phases = map[hostapi.Phase]int{}
		}
		f.phases[req.Phase]++
	} else if req.Phase != hostapi.PhaseUnspecified {
		f.violate("host %d: phase %v on a %v flow", h.id, req.Phase, fl.class)
	}
	q := f.queue(dirKey{req.Flow, fl.peer})
	q.recvs = append(q.recvs, fakeWR{host: h, flow: req.Flow, region: req.Region, off: int(req.Offset), n: int(req.Length), wr: req.WRID, step: req.Step, phase: req.Phase})
	f.wake()
	return nil
}

func (h *fakeHost) BeginStep(_ context.Context, req hostapi.StepReq) error {
	h.fab.mu.Lock()
	defer h.fab.mu.Unlock()
	if h.steps[req.Step] != "" {
		return fmt.Errorf("%w: step %d cannot begin again", errFake, req.Step)
	}
	if (req.Critical == nil) == (req.Norms == nil) {
		h.fab.violate("host %d: step %d: give critical or norms", h.id, req.Step)
	}
	h.steps[req.Step] = "open"
	h.begins = append(h.begins, req)
	return nil
}

func (h *fakeHost) EndStep(_ context.Context, step uint64) error {
	h.fab.mu.Lock()
	defer h.fab.mu.Unlock()
	if n := h.gradRecvs[step]; n != 0 {
		h.fab.violate("host %d: step %d ended with %d gradient receives outstanding", h.id, step, n)
	}
	h.steps[step] = "closed"
	return nil
}

func (h *fakeHost) TryPoll() (hostapi.Completion, bool) {
	h.fab.mu.Lock()
	defer h.fab.mu.Unlock()
	return h.pop()
}

func (h *fakeHost) pop() (hostapi.Completion, bool) {
	if len(h.comps) == 0 {
		return hostapi.Completion{}, false
	}
	c := h.comps[0]
	h.comps = h.comps[1:]
	return c, true
}

func (h *fakeHost) Poll(ctx context.Context) (hostapi.Completion, error) {
	for {
		h.fab.mu.Lock()
		c, ok := h.pop()
		for !ok && h.fab.step(h) {
			c, ok = h.pop()
		}
		h.blocked = !ok
		h.fab.mu.Unlock()
		if ok {
			return c, nil
		}
		select {
		case <-h.notify:
		case <-ctx.Done():
		}
		h.fab.mu.Lock()
		h.blocked = false
		h.fab.mu.Unlock()
		if err := ctx.Err(); err != nil {
			return hostapi.Completion{}, err
		}
	}
}

type fakeRegion struct {
	h  *fakeHost
	id hostapi.RegionID
}

func (r *fakeRegion) ID() hostapi.RegionID { return r.id }

func (r *fakeRegion) Bytes() []byte {
	r.h.fab.mu.Lock()
	defer r.h.fab.mu.Unlock()
	return r.h.regions[r.id]
}

func (r *fakeRegion) Close() error {
	r.h.fab.mu.Lock()
	defer r.h.fab.mu.Unlock()
	if n := r.h.inUse[r.id]; n != 0 {
		return fmt.Errorf("%w: region %d has %d posted work requests", errFake, r.id, n)
	}
	delete(r.h.regions, r.id)
	return nil
}
