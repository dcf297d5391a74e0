package simhost

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/hostd"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/workload"
)

// Clock is what a Port needs of the simulator: the virtual time, and a
// way to say that the host's NIC was changed outside an event.
type Clock interface {
	Now() time.Duration
	Wake(host int)
}

// Port is one simulated host's host API, for one client.
type Port struct {
	eng    *nic.Engine
	id     hostapi.HostID
	clock  Clock
	host   int // the simulator's index of the host
	limits hostapi.Limits

	regions    map[hostapi.RegionID]*Region
	registered uint64
	flows      map[hostapi.FlowID]nic.FlowKey
	// outstanding counts work requests posted and not completed, per
	// flow's key, for the limit and for completions of work this port
	// never posted.
	outstanding int
	handler     func(hostapi.Completion)
	queue       []hostapi.Completion
	completions uint64
}

var _ workload.EventPort = (*Port)(nil)

// New returns the host API of eng, host index host on clock. Limits are
// hostapi.DefaultLimits, as a daemon's server has them.
func New(eng *nic.Engine, host int, clock Clock) *Port {
	return &Port{eng: eng, id: hostapi.HostID(eng.Config().Host), clock: clock, host: host,
		limits: hostapi.DefaultLimits, regions: map[hostapi.RegionID]*Region{},
		flows: map[hostapi.FlowID]nic.FlowKey{}}
}

// Host is the host's id on the fabric.
func (p *Port) Host() hostapi.HostID { return p.id }

// Engine is the NIC the port drives.
func (p *Port) Engine() *nic.Engine { return p.eng }

func apiErr(code hostapi.ErrorCode, format string, args ...any) error {
	return &hostapi.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// backendErr is how a daemon reports an engine's refusal: CodeBackend
// with the engine's text.
func backendErr(err error) error {
	if err == nil {
		return nil
	}
	var e *hostapi.Error
	if errors.As(err, &e) {
		return err
	}
	return &hostapi.Error{Code: hostapi.CodeBackend, Message: err.Error()}
}

// RegisterMemory registers a region of size bytes.
func (p *Port) RegisterMemory(_ context.Context, size int) (workload.Memory, error) {
	if size <= 0 {
		return nil, apiErr(hostapi.CodeBadRequest, "register_memory: length must be > 0")
	}
	if len(p.regions) >= p.limits.MaxRegions {
		return nil, apiErr(hostapi.CodeLimitExceeded, "%d regions registered, limit %d", len(p.regions), p.limits.MaxRegions)
	}
	if uint64(size) > p.limits.MaxRegisteredBytes-p.registered {
		return nil, apiErr(hostapi.CodeLimitExceeded, "%d bytes registered, %d more exceed the limit of %d",
			p.registered, size, p.limits.MaxRegisteredBytes)
	}
	// A payload-free NIC's regions are lengths without memory: at the
	// seed's rate the job registers 60 GB.
	var mem []byte
	var id nic.RegionID
	var err error
	if p.eng.Config().NoPayload {
		id, err = p.eng.RegisterLength(size)
	} else {
		mem = make([]byte, size)
		id, err = p.eng.RegisterMemory(mem)
	}
	if err != nil {
		return nil, backendErr(err)
	}
	r := &Region{p: p, id: hostapi.RegionID(id), nid: id, mem: mem, size: size}
	p.regions[r.id] = r
	p.registered += uint64(size)
	return r, nil
}

// CreateFlow creates a flow to a peer.
func (p *Port) CreateFlow(_ context.Context, spec hostapi.FlowSpec) error {
	if err := hostapi.Validate(&spec); err != nil {
		return err
	}
	if len(p.flows) >= p.limits.MaxFlows {
		return apiErr(hostapi.CodeLimitExceeded, "%d flows open, limit %d", len(p.flows), p.limits.MaxFlows)
	}
	if _, ok := p.flows[spec.Flow]; ok {
		return apiErr(hostapi.CodeFlowExists, "flow %d is already open on this host", spec.Flow)
	}
	ns, err := hostd.FlowSpecToNIC(spec)
	if err != nil {
		return backendErr(err)
	}
	if err := p.eng.CreateFlow(p.clock.Now(), ns); err != nil {
		return backendErr(err)
	}
	p.flows[spec.Flow] = nic.FlowKey{Peer: ns.Peer, ID: ns.ID}
	p.clock.Wake(p.host)
	return nil
}

// DestroyFlow destroys a flow; its outstanding work completes with an
// error, delivered before DestroyFlow returns.
func (p *Port) DestroyFlow(_ context.Context, flow hostapi.FlowID) error {
	if err := hostapi.Validate(&hostapi.DestroyFlowReq{Flow: flow}); err != nil {
		return err
	}
	key, ok := p.flows[flow]
	if !ok {
		return apiErr(hostapi.CodeNoSuchFlow, "flow %d is not open by this client", flow)
	}
	err := p.eng.DestroyFlow(key)
	// The failed work goes to the client before the flow is forgotten,
	// as the daemon does it.
	for _, c := range p.eng.Completions() {
		p.Complete(c)
	}
	delete(p.flows, flow)
	p.clock.Wake(p.host)
	return backendErr(err)
}

// check is the server's check of a work request's flow, region and
// bounds, then the daemon's.
func (p *Port) check(flow hostapi.FlowID, region hostapi.RegionID, off, length uint64) (nic.FlowKey, nic.RegionID, error) {
	key, ok := p.flows[flow]
	if !ok {
		return key, 0, apiErr(hostapi.CodeNoSuchFlow, "flow %d is not open by this client", flow)
	}
	r, ok := p.regions[region]
	if !ok {
		return key, 0, apiErr(hostapi.CodeNoSuchRegion, "region %d is not registered by this client", region)
	}
	if size := uint64(r.size); off > size || length > size-off {
		return key, 0, apiErr(hostapi.CodeOutOfBounds, "offset %d + length %d exceeds region %d of %d bytes", off, length, region, size)
	}
	if p.outstanding >= p.limits.MaxOutstanding {
		return key, 0, apiErr(hostapi.CodeLimitExceeded, "%d work requests outstanding, limit %d", p.outstanding, p.limits.MaxOutstanding)
	}
	if err := hostd.CheckWorkBounds(off, length); err != nil {
		return key, 0, backendErr(err)
	}
	return key, r.nid, nil
}

// PostSend posts a send.
func (p *Port) PostSend(_ context.Context, req hostapi.SendReq) error {
	if err := hostapi.Validate(&req); err != nil {
		return err
	}
	key, r, err := p.check(req.Flow, req.Region, req.Offset, req.Length)
	if err != nil {
		return err
	}
	if err := p.eng.PostSend(p.clock.Now(), key, req.WRID, r, int(req.Offset), int(req.Length)); err != nil {
		return backendErr(err)
	}
	p.outstanding++
	p.clock.Wake(p.host)
	return nil
}

// PostRecv posts a receive.
func (p *Port) PostRecv(_ context.Context, req hostapi.RecvReq) error {
	if err := hostapi.Validate(&req); err != nil {
		return err
	}
	key, r, err := p.check(req.Flow, req.Region, req.Offset, req.Length)
	if err != nil {
		return err
	}
	if err := p.eng.PostRecv(key, req.WRID, r, int(req.Offset), int(req.Length), budget.StepID(req.Step)); err != nil {
		return backendErr(err)
	}
	p.outstanding++
	p.clock.Wake(p.host)
	return nil
}

// BeginStep opens a step's loss budget.
func (p *Port) BeginStep(_ context.Context, req hostapi.StepReq) error {
	if err := hostapi.Validate(&req); err != nil {
		return err
	}
	if err := hostd.CheckStepRequest(req); err != nil {
		return backendErr(err)
	}
	_, err := p.eng.BeginStep(p.clock.Now(), budget.StepID(req.Step), req.Critical, req.Norms, req.LRDecay, int64(req.ExpectedGradientBytes))
	p.clock.Wake(p.host)
	return backendErr(err)
}

// EndStep closes a step.
func (p *Port) EndStep(_ context.Context, step uint64) error {
	p.eng.EndStep(p.clock.Now(), budget.StepID(step))
	p.clock.Wake(p.host)
	return nil
}

// Counters are the daemon's counters op: the host's, and this client's
// flows'.
func (p *Port) Counters(context.Context) (hostapi.Counters, error) {
	out := hostapi.Counters{Host: hostd.HostCounters(p.eng.Stats(), hostd.LoopStats{Completions: p.completions})}
	for _, key := range p.eng.Flows() {
		r, ok := p.eng.Flow(key)
		if !ok {
			continue
		}
		out.Flows = append(out.Flows, hostapi.FlowCounters{Flow: hostapi.FlowID(key.ID), Peer: hostapi.HostID(key.Peer), Values: hostd.FlowCounters(r)})
	}
	out.Client = hostapi.ClientCounters{Completions: p.completions, Regions: len(p.regions),
		RegisteredBytes: p.registered, Flows: len(p.flows), Outstanding: p.outstanding}
	return out, nil
}

// Steps are the daemon's steps op: the most recent ledger records, oldest
// first (limit 0: hostapi.DefaultStepRecords).
func (p *Port) Steps(_ context.Context, limit int) ([]hostapi.StepRecord, error) {
	if err := hostapi.Validate(&hostapi.StepsReq{Limit: limit}); err != nil {
		return nil, err
	}
	if limit == 0 {
		limit = hostapi.DefaultStepRecords
	}
	var out []hostapi.StepRecord
	for _, r := range p.eng.Steps() {
		out = append(out, hostd.StepRecordToAPI(r))
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}

// OnCompletion sets where completions go as they happen; nil queues them
// for TryPoll.
func (p *Port) OnCompletion(fn func(hostapi.Completion)) { p.handler = fn }

// TryPoll returns a queued completion.
func (p *Port) TryPoll() (hostapi.Completion, bool) {
	if len(p.queue) == 0 {
		return hostapi.Completion{}, false
	}
	c := p.queue[0]
	p.queue = p.queue[1:]
	return c, true
}

// Complete takes one of the engine's completions (the simulator's
// OnCompletion routes each host's here) and hands it to the client.
func (p *Port) Complete(c nic.Completion) {
	if _, ok := p.flows[hostapi.FlowID(c.Flow.ID)]; !ok {
		return // not this client's: a daemon drops it too (lost_completions)
	}
	p.outstanding = max(p.outstanding-1, 0)
	p.completions++
	comp := hostd.CompletionToAPI(c)
	if p.handler != nil {
		p.handler(comp)
		return
	}
	p.queue = append(p.queue, comp)
}

// Region is a registered region.
type Region struct {
	p    *Port
	id   hostapi.RegionID
	nid  nic.RegionID
	mem  []byte // nil on a payload-free NIC
	size int
}

// ID names the region in work requests.
func (r *Region) ID() hostapi.RegionID { return r.id }

// Bytes is the region's memory, which the NIC reads and writes; nil on a
// payload-free NIC.
func (r *Region) Bytes() []byte { return r.mem }

// Close deregisters the region; it fails while posted work names it.
func (r *Region) Close() error {
	p := r.p
	if _, ok := p.regions[r.id]; !ok {
		return apiErr(hostapi.CodeNoSuchRegion, "region %d is not registered by this client", r.id)
	}
	if err := p.eng.DeregisterMemory(r.nid); err != nil {
		return backendErr(err)
	}
	delete(p.regions, r.id)
	p.registered -= uint64(r.size)
	return nil
}
