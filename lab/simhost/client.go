package simhost

import (
	"context"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/hostapi/nicapi"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/workload"
)

// Clock is what a Client needs of the simulator: the virtual time, and a
// way to say that the host's NIC was changed outside an event.
type Clock interface {
	Now() time.Duration
	Wake(host int)
}

// Client is one simulated host's host API, for one client: an adapter of
// nicapi.Host, the semantics forgived serves, to the simulator's clock.
type Client struct {
	h     *nicapi.Host
	id    hostapi.HostID
	clock Clock
	host  int // the simulator's index of the host

	handler     func(hostapi.Completion)
	queue       []hostapi.Completion
	completions uint64
}

// client is the one client of a host API.
const client hostapi.ClientID = 1

var _ workload.EventHostAPI = (*Client)(nil)

// New returns the host API of eng, host index host on clock. Limits are
// hostapi.DefaultLimits, as a daemon's server has them.
func New(eng *nic.Engine, host int, clock Clock) *Client {
	return NewWithLimits(eng, host, clock, hostapi.Limits{})
}

// NewWithLimits is New with per-client limits; zero fields take
// hostapi.DefaultLimits.
func NewWithLimits(eng *nic.Engine, host int, clock Clock, limits hostapi.Limits) *Client {
	p := &Client{id: hostapi.HostID(eng.Config().Host), clock: clock, host: host}
	p.h = nicapi.New(eng, limits, func(_ hostapi.ClientID, c hostapi.Completion) { p.deliver(c) })
	return p
}

// Host is the host's id on the fabric.
func (p *Client) Host() hostapi.HostID { return p.id }

// Engine is the NIC the host API drives.
func (p *Client) Engine() *nic.Engine { return p.h.Engine() }

// RegisterMemory registers a region of size bytes.
func (p *Client) RegisterMemory(_ context.Context, size int) (workload.Memory, error) {
	if size <= 0 {
		return nil, &hostapi.Error{Code: hostapi.CodeBadRequest, Message: "register_memory: length must be > 0"}
	}
	if err := p.h.CheckRegister(client, uint64(size)); err != nil {
		return nil, err
	}
	// A payload-free NIC's regions are lengths without memory: at the
	// seed's rate the job registers 60 GB.
	var mem []byte
	var id hostapi.RegionID
	var err error
	if p.h.Engine().Config().NoPayload {
		id, err = p.h.RegisterLength(client, uint64(size))
	} else {
		mem = make([]byte, size)
		id, err = p.h.RegisterMemory(client, mem)
	}
	if err != nil {
		return nil, err
	}
	return &Region{p: p, id: id, mem: mem}, nil
}

// CreateFlow creates a flow to a peer.
func (p *Client) CreateFlow(_ context.Context, spec hostapi.FlowSpec) error {
	if err := hostapi.Validate(&spec); err != nil {
		return err
	}
	if err := p.h.CreateFlow(p.clock.Now(), client, spec); err != nil {
		return err
	}
	p.clock.Wake(p.host)
	return nil
}

// DestroyFlow destroys a flow; its outstanding work completes with an
// error, delivered before DestroyFlow returns.
func (p *Client) DestroyFlow(_ context.Context, flow hostapi.FlowID) error {
	if err := hostapi.Validate(&hostapi.DestroyFlowReq{Flow: flow}); err != nil {
		return err
	}
	err := p.h.DestroyFlow(client, flow)
	p.clock.Wake(p.host)
	return err
}

// PostSend posts a send.
func (p *Client) PostSend(_ context.Context, req hostapi.SendReq) error {
	if err := hostapi.Validate(&req); err != nil {
		return err
	}
	if err := p.h.PostSend(p.clock.Now(), client, req); err != nil {
		return err
	}
	p.clock.Wake(p.host)
	return nil
}

// PostRecv posts a receive.
func (p *Client) PostRecv(_ context.Context, req hostapi.RecvReq) error {
	if err := hostapi.Validate(&req); err != nil {
		return err
	}
	if err := p.h.PostRecv(client, req); err != nil {
		return err
	}
	p.clock.Wake(p.host)
	return nil
}

// BeginStep opens a step's loss budget.
func (p *Client) BeginStep(_ context.Context, req hostapi.StepReq) error {
	if err := hostapi.Validate(&req); err != nil {
		return err
	}
	err := p.h.BeginStep(p.clock.Now(), client, req)
	p.clock.Wake(p.host)
	return err
}

// EndStep closes a step; a step never begun is refused, as by the daemon.
func (p *Client) EndStep(_ context.Context, step uint64) error {
	err := p.h.EndStep(p.clock.Now(), client, step)
	p.clock.Wake(p.host)
	return err
}

// Counters are the daemon's counters op: the host's, and this client's
// flows'.
func (p *Client) Counters(context.Context) (hostapi.Counters, error) {
	out := p.h.Counters(client)
	out.Host.Completions = p.completions
	out.Host.LostCompletions = p.h.Unrouted()
	out.Client.Completions = p.completions
	return out, nil
}

// Steps are the daemon's steps op: the most recent ledger records, oldest
// first (limit 0: hostapi.DefaultStepRecords).
func (p *Client) Steps(_ context.Context, limit int) ([]hostapi.StepRecord, error) {
	return p.h.Steps(client, limit)
}

// OnCompletion sets where completions go as they happen; nil queues them
// for TryPoll.
func (p *Client) OnCompletion(fn func(hostapi.Completion)) { p.handler = fn }

// TryPoll returns a queued completion.
func (p *Client) TryPoll() (hostapi.Completion, bool) {
	if len(p.queue) == 0 {
		return hostapi.Completion{}, false
	}
	c := p.queue[0]
	p.queue = p.queue[1:]
	return c, true
}

// Complete takes one of the engine's completions (the simulator's
// OnCompletion routes each host's here) and hands it to the client; one
// of a flow the client does not hold is dropped, as a daemon drops it
// (lost_completions).
func (p *Client) Complete(c nic.Completion) { p.h.Route(c) }

// deliver hands a completion to the workload, which has it from here:
// its work request stops being outstanding before the handler runs, so
// the handler may post again.
func (p *Client) deliver(comp hostapi.Completion) {
	p.completions++
	p.h.Written(client, 1)
	if p.handler != nil {
		p.handler(comp)
		return
	}
	p.queue = append(p.queue, comp)
}

// Region is a registered region.
type Region struct {
	p   *Client
	id  hostapi.RegionID
	mem []byte // nil on a payload-free NIC
}

// ID names the region in work requests.
func (r *Region) ID() hostapi.RegionID { return r.id }

// Bytes is the region's memory, which the NIC reads and writes; nil on a
// payload-free NIC.
func (r *Region) Bytes() []byte { return r.mem }

// Close deregisters the region; it fails while posted work names it.
func (r *Region) Close() error { return r.p.h.DeregisterMemory(client, r.id) }

// Signals sums the host's flows' CNPs received and rate cuts applied
// (nic.Engine.Signals): the lab's sampler reads it every sample.
func (p *Client) Signals() (cnps, cuts uint64) { return p.h.Engine().Signals() }
