package nicapi

import (
	"cmp"
	"fmt"
	"maps"
	"math"
	"slices"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/nic"
)

// Sink receives the completions Host routes, each with the client that
// owns its flow: the driver hands it to the client (and counts it lost if
// it cannot), and calls Written once the client has it.
type Sink func(c hostapi.ClientID, comp hostapi.Completion)

// Host is the host API's semantics over one nic.Engine, for any number of
// clients: the per-client checks (regions and flows owned, buffer bounds,
// the limits), the map from the API's flow ids to the engine's keys, the
// step checks, and the conversions both ways. A driver supplies the
// clock (every method that needs time takes now), the memory, and the
// client's transport (the Sink). Host is not safe for concurrent use: the
// daemon calls it from its event loop, the simulator from its event.
//
// Every refusal is an *hostapi.Error with the code a client sees;
// the engine's own refusals are CodeBackend with the engine's text.
type Host struct {
	eng     Engine
	nic     *nic.Engine // eng, when New was given one engine
	limits  hostapi.Limits
	sink    Sink
	flows   map[hostapi.FlowID]flow
	clients map[hostapi.ClientID]*client
	jobs    map[hostapi.Job]*job
	nextJob nic.JobID
	hellos  uint64
	// reserved are the flow ids reserved for jobs (Reserve).
	reserved []Reservation

	unrouted uint64
}

// job is a job the host knows: the engine's id of its loss budget, how
// many of its clients are connected, and when one last said hello. A job
// whose clients are gone is kept, with its step records (forgivectl steps
// reads them after a run), until MaxJobs others need the room.
type job struct {
	key     hostapi.Job
	id      nic.JobID
	clients int
	seen    uint64 // the hello count at its last hello
}

// MaxJobs bounds the jobs a host keeps: one fewer than the engine's, whose
// job 0 is the default of clients that never say hello.
const MaxJobs = nic.MaxJobs - 1

// Reservation reserves the flow ids First to Last for the job Job of the
// uids UIDs: no other client may create a flow with one of them, and the
// job's clients create flows only in its reservations. Flow ids are
// host-wide on the wire (a peer names a flow by its id), so whoever holds
// an id receives what the peer sends on it: reserving is how a host keeps
// one job's ids from another's clients, first come or not.
type Reservation struct {
	Job         string
	UIDs        []uint32
	First, Last hostapi.FlowID
}

func (r Reservation) holds(f hostapi.FlowID) bool { return f >= r.First && f <= r.Last }

func (r Reservation) of(j *job) bool {
	return j != nil && j.key.Name == r.Job && slices.Contains(r.UIDs, j.key.UID)
}

// flow is an open flow: the engine's key and the client that opened it.
type flow struct {
	key   nic.FlowKey
	owner hostapi.ClientID
	class hostapi.Class
}

// client is what one client holds. Regions are kept by length, so a
// region's bookkeeping does not depend on its bytes.
type client struct {
	job         *job // nil until Hello: the default job (a simulated host's clients)
	regions     map[hostapi.RegionID]uint64
	registered  uint64
	flows       map[hostapi.FlowID]struct{}
	retired     hostapi.FlowSums // the flows it destroyed, summed
	outstanding int              // work requests accepted whose completion the client does not have yet (Written)
}

// Engine is what Host asks of the NIC: a *nic.Engine, or a driver's
// front for several (forgived's engines: each call goes to the engine
// that holds the flow, registrations to all of them, the steps to the
// ledger they share).
type Engine interface {
	RegisterMemory(mem []byte) (nic.RegionID, error)
	RegisterLength(size int) (nic.RegionID, error)
	DeregisterMemory(id nic.RegionID) error
	CreateFlow(now time.Duration, spec nic.FlowSpec) error
	DestroyFlow(key nic.FlowKey) error
	PostSend(now time.Duration, req nic.SendReq) error
	PostRecv(req nic.RecvReq) error
	BeginStep(now time.Duration, req nic.StepReq) (bool, error)
	EndJobStep(now time.Duration, job nic.JobID, step budget.StepID)
	JobStepRecord(job nic.JobID, step budget.StepID) (budget.StepRecord, bool)
	JobSteps(job nic.JobID) []budget.StepRecord
	ForgetJob(job nic.JobID)
	Stats() nic.Stats
	Flow(key nic.FlowKey) (nic.FlowReport, bool)
	Completions() []nic.Completion
}

var _ Engine = (*nic.Engine)(nil)

// New returns the host API over eng. Zero fields of limits take
// hostapi.DefaultLimits, as a daemon's server does; sink receives every
// completion of a client's flow.
func New(eng *nic.Engine, limits hostapi.Limits, sink Sink) *Host {
	h := NewOver(eng, limits, sink)
	h.nic = eng
	return h
}

// NewOver is New over any Engine: the same semantics, whatever runs the
// flows behind it.
func NewOver(eng Engine, limits hostapi.Limits, sink Sink) *Host {
	d := hostapi.DefaultLimits
	limits.MaxRegions = cmpOr(limits.MaxRegions, d.MaxRegions)
	limits.MaxRegisteredBytes = cmpOr(limits.MaxRegisteredBytes, d.MaxRegisteredBytes)
	limits.MaxFlows = cmpOr(limits.MaxFlows, d.MaxFlows)
	limits.MaxOutstanding = cmpOr(limits.MaxOutstanding, d.MaxOutstanding)
	limits.CompletionQueue = cmpOr(limits.CompletionQueue, d.CompletionQueue)
	return &Host{eng: eng, limits: limits, sink: sink,
		flows: map[hostapi.FlowID]flow{}, clients: map[hostapi.ClientID]*client{}, jobs: map[hostapi.Job]*job{}}
}

// Reserve sets the flow ids reserved for jobs (Reservation); the
// reservations must not overlap (the daemon's configuration checks).
func (h *Host) Reserve(rs []Reservation) { h.reserved = slices.Clone(rs) }

// Hello records the job client c declared. The clients of one job share
// its steps (each job has a ledger of its own in the engine); a client
// that never says hello is in the default job, 0, as a simulated host's
// are.
func (h *Host) Hello(c hostapi.ClientID, key hostapi.Job) error {
	cl := h.client(c)
	if cl.job != nil {
		return apiErr(hostapi.CodeBadRequest, "hello already completed")
	}
	j := h.jobs[key]
	if j == nil {
		if len(h.jobs) >= MaxJobs && !h.evictIdleJob() {
			return apiErr(hostapi.CodeLimitExceeded, "%d jobs have clients on this host, the most it keeps", len(h.jobs))
		}
		h.nextJob++
		if h.nextJob == 0 {
			h.nextJob = 1 // 0 is the default job's
		}
		j = &job{key: key, id: h.nextJob}
		h.jobs[key] = j
	}
	h.hellos++
	j.clients++
	j.seen = h.hellos
	cl.job = j
	return nil
}

// JobSteps are one job's recent step records.
type JobSteps struct {
	Job   hostapi.Job // the default job (a client without hello): the zero Job
	Steps []budget.StepRecord
}

// AllSteps are the recent step records of every job the host keeps, the
// default job first when it has any, then in the order the jobs first
// said hello: what the daemon's metrics export.
func (h *Host) AllSteps() []JobSteps {
	var out []JobSteps
	if s := h.eng.JobSteps(0); len(s) > 0 {
		out = append(out, JobSteps{Steps: s})
	}
	jobs := slices.SortedFunc(maps.Values(h.jobs), func(a, b *job) int { return cmp.Compare(a.id, b.id) })
	for _, j := range jobs {
		if s := h.eng.JobSteps(j.id); len(s) > 0 {
			out = append(out, JobSteps{Job: j.key, Steps: s})
		}
	}
	return out
}

// evictIdleJob forgets the job without clients that said hello longest
// ago, and its steps; false when every job has clients.
func (h *Host) evictIdleJob() bool {
	var old *job
	for _, j := range h.jobs {
		if j.clients == 0 && (old == nil || j.seen < old.seen) {
			old = j
		}
	}
	if old == nil {
		return false
	}
	delete(h.jobs, old.key)
	h.eng.ForgetJob(old.id)
	return true
}

// jobOf is the engine's id of client cl's job.
func jobOf(cl *client) nic.JobID {
	if cl.job == nil {
		return 0
	}
	return cl.job.id
}

// checkReserved refuses a flow id reserved for another job than cl's,
// or, when cl's job has reservations, one outside them.
func (h *Host) checkReserved(cl *client, f hostapi.FlowID) error {
	mine, inMine := false, false
	for _, r := range h.reserved {
		if r.of(cl.job) {
			mine = true
			inMine = inMine || r.holds(f)
			continue
		}
		if r.holds(f) {
			return apiErr(hostapi.CodeFlowReserved, "flow id %d is reserved for another job (ids %d to %d)", f, r.First, r.Last)
		}
	}
	if mine && !inMine {
		return apiErr(hostapi.CodeFlowReserved, "flow id %d is outside the ids reserved for %v", f, cl.job.key)
	}
	return nil
}

func cmpOr[T int | uint64](v, def T) T {
	if v > 0 {
		return v
	}
	return def
}

// Engine is the NIC the host drives; nil for a Host made by NewOver.
func (h *Host) Engine() *nic.Engine { return h.nic }

// Limits are the per-client limits in force.
func (h *Host) Limits() hostapi.Limits { return h.limits }

func (h *Host) client(c hostapi.ClientID) *client {
	cl := h.clients[c]
	if cl == nil {
		cl = &client{regions: map[hostapi.RegionID]uint64{}, flows: map[hostapi.FlowID]struct{}{}}
		h.clients[c] = cl
	}
	return cl
}

func apiErr(code hostapi.ErrorCode, format string, args ...any) *hostapi.Error {
	return &hostapi.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// backendErr is how an engine's refusal reaches a client: CodeBackend
// with the engine's text.
func backendErr(err error) error {
	if err == nil {
		return nil
	}
	return &hostapi.Error{Code: hostapi.CodeBackend, Message: err.Error()}
}

// CheckRegister refuses a region of length bytes that client c may not
// register: past its region count or its registered bytes. A driver that
// must prepare the memory first (the daemon maps the client's memfd)
// calls it before, so that a refusal costs nothing.
func (h *Host) CheckRegister(c hostapi.ClientID, length uint64) error {
	if length == 0 {
		return apiErr(hostapi.CodeBadRequest, "register_memory: length must be > 0")
	}
	cl := h.client(c)
	if len(cl.regions) >= h.limits.MaxRegions {
		return apiErr(hostapi.CodeLimitExceeded, "%d regions registered, limit %d", len(cl.regions), h.limits.MaxRegions)
	}
	if length > h.limits.MaxRegisteredBytes-cl.registered {
		return apiErr(hostapi.CodeLimitExceeded, "%d bytes registered, %d more exceed the limit of %d",
			cl.registered, length, h.limits.MaxRegisteredBytes)
	}
	return nil
}

// RegisterMemory registers mem for client c, after CheckRegister.
func (h *Host) RegisterMemory(c hostapi.ClientID, mem []byte) (hostapi.RegionID, error) {
	return h.register(c, uint64(len(mem)), func() (nic.RegionID, error) { return h.eng.RegisterMemory(mem) })
}

// RegisterLength registers for client c a region of length bytes with no
// memory, on a payload-free engine (nic.Engine.RegisterLength): the same
// checks and limits as RegisterMemory, against the length.
func (h *Host) RegisterLength(c hostapi.ClientID, length uint64) (hostapi.RegionID, error) {
	if length > math.MaxInt {
		return 0, apiErr(hostapi.CodeBadRequest, "register_memory: length %d is too large", length)
	}
	return h.register(c, length, func() (nic.RegionID, error) { return h.eng.RegisterLength(int(length)) })
}

func (h *Host) register(c hostapi.ClientID, length uint64, engine func() (nic.RegionID, error)) (hostapi.RegionID, error) {
	if err := h.CheckRegister(c, length); err != nil {
		return 0, err
	}
	id, err := engine()
	if err != nil {
		return 0, backendErr(err)
	}
	cl := h.client(c)
	cl.regions[hostapi.RegionID(id)] = length
	cl.registered += length
	return hostapi.RegionID(id), nil
}

// DeregisterMemory releases client c's region r; the engine refuses while
// posted work names it.
func (h *Host) DeregisterMemory(c hostapi.ClientID, r hostapi.RegionID) error {
	cl := h.client(c)
	length, ok := cl.regions[r]
	if !ok {
		return apiErr(hostapi.CodeNoSuchRegion, "region %d is not registered by this client", r)
	}
	if err := h.eng.DeregisterMemory(nic.RegionID(r)); err != nil {
		return backendErr(err)
	}
	delete(cl.regions, r)
	cl.registered -= length
	return nil
}

// CreateFlow opens a flow for client c. Flow ids are unique on the host.
func (h *Host) CreateFlow(now time.Duration, c hostapi.ClientID, spec hostapi.FlowSpec) error {
	cl := h.client(c)
	if len(cl.flows) >= h.limits.MaxFlows {
		return apiErr(hostapi.CodeLimitExceeded, "%d flows open, limit %d", len(cl.flows), h.limits.MaxFlows)
	}
	if err := h.checkReserved(cl, spec.Flow); err != nil {
		return err
	}
	if _, taken := h.flows[spec.Flow]; taken {
		// The same reply whoever holds the id: it names no other client
		// and nothing of its flows but what this request already said.
		return apiErr(hostapi.CodeFlowExists, "flow id %d is in use", spec.Flow)
	}
	ns, err := FlowSpecToNIC(spec)
	if err != nil {
		return backendErr(err)
	}
	ns.Job = jobOf(cl)
	if err := h.eng.CreateFlow(now, ns); err != nil {
		return backendErr(err)
	}
	h.flows[spec.Flow] = flow{key: nic.FlowKey{Peer: ns.Peer, ID: ns.ID}, owner: c, class: spec.Class}
	cl.flows[spec.Flow] = struct{}{}
	return nil
}

// DestroyFlow closes client c's flow f. Its outstanding work completes
// with an error, handed to the sink before DestroyFlow returns.
func (h *Host) DestroyFlow(c hostapi.ClientID, f hostapi.FlowID) error {
	cl := h.client(c)
	if _, ok := cl.flows[f]; !ok {
		return apiErr(hostapi.CodeNoSuchFlow, "flow %d is not open by this client", f)
	}
	key := h.flows[f].key
	if r, ok := h.eng.Flow(key); ok {
		cl.retired.AddFlow(FlowCounters(r))
	}
	err := h.eng.DestroyFlow(key)
	h.Deliver() // the failed work goes to its owner before the flow is forgotten
	delete(h.flows, f)
	delete(cl.flows, f)
	return backendErr(err)
}

// checkWork checks that client c owns flow f and region r, that
// [off, off+length) lies inside the region without overflowing, and that
// the client may have one more work request outstanding.
func (h *Host) checkWork(cl *client, f hostapi.FlowID, r hostapi.RegionID, off, length uint64) (nic.FlowKey, error) {
	if _, ok := cl.flows[f]; !ok {
		return nic.FlowKey{}, apiErr(hostapi.CodeNoSuchFlow, "flow %d is not open by this client", f)
	}
	size, ok := cl.regions[r]
	if !ok {
		return nic.FlowKey{}, apiErr(hostapi.CodeNoSuchRegion, "region %d is not registered by this client", r)
	}
	if off > size || length > size-off {
		return nic.FlowKey{}, apiErr(hostapi.CodeOutOfBounds, "offset %d + length %d exceeds region %d of %d bytes", off, length, r, size)
	}
	if cl.outstanding >= h.limits.MaxOutstanding {
		return nic.FlowKey{}, apiErr(hostapi.CodeLimitExceeded, "%d work requests outstanding, limit %d", cl.outstanding, h.limits.MaxOutstanding)
	}
	if err := CheckWorkBounds(off, length); err != nil {
		return nic.FlowKey{}, backendErr(err)
	}
	return h.flows[f].key, nil
}

// PostSend posts a send of client c.
func (h *Host) PostSend(now time.Duration, c hostapi.ClientID, req hostapi.SendReq) error {
	cl := h.client(c)
	key, err := h.checkWork(cl, req.Flow, req.Region, req.Offset, req.Length)
	if err != nil {
		return err
	}
	if err := h.eng.PostSend(now, nic.SendReq{Key: key, WR: req.WRID, Region: nic.RegionID(req.Region), Off: int(req.Offset), Length: int(req.Length)}); err != nil {
		return backendErr(err)
	}
	cl.outstanding++
	return nil
}

// PostRecv posts a receive of client c.
func (h *Host) PostRecv(c hostapi.ClientID, req hostapi.RecvReq) error {
	cl := h.client(c)
	key, err := h.checkWork(cl, req.Flow, req.Region, req.Offset, req.Length)
	if err != nil {
		return err
	}
	if req.Phase != hostapi.PhaseUnspecified && h.flows[req.Flow].class != hostapi.ClassGradient {
		return apiErr(hostapi.CodeBadRequest, "post_recv: phase %v on %v flow %d: only a step's gradient messages have a phase",
			req.Phase, h.flows[req.Flow].class, req.Flow)
	}
	phase, err := PhaseToBudget(req.Phase)
	if err != nil {
		return backendErr(err)
	}
	if err := h.eng.PostRecv(nic.RecvReq{Key: key, WR: req.WRID, Region: nic.RegionID(req.Region), Off: int(req.Offset), Length: int(req.Length), Step: budget.StepID(req.Step), Phase: phase}); err != nil {
		return backendErr(err)
	}
	cl.outstanding++
	return nil
}

// BeginStep opens a step's loss budget in client c's job: the steps of
// one job are its own, another job's step of the same number is another
// step.
func (h *Host) BeginStep(now time.Duration, c hostapi.ClientID, req hostapi.StepReq) error {
	if err := CheckStepRequest(req); err != nil {
		return backendErr(err)
	}
	_, err := h.eng.BeginStep(now, nic.StepReq{Step: budget.StepID(req.Step), Critical: req.Critical, Norms: req.Norms, LRDecay: req.LRDecay,
		Expected: int64(req.ExpectedGradientBytes), Job: jobOf(h.client(c))})
	return backendErr(err)
}

// EndStep closes a step of client c's job; a step the job never began (or
// older than the ledger's records) is refused: no_such_step.
func (h *Host) EndStep(now time.Duration, c hostapi.ClientID, step uint64) error {
	j := jobOf(h.client(c))
	if _, ok := h.eng.JobStepRecord(j, budget.StepID(step)); !ok {
		return apiErr(hostapi.CodeNoSuchStep, "end_step %d: this client's job never began the step (or it is older than the ledger's %d steps)",
			step, budget.HistorySteps)
	}
	h.eng.EndJobStep(now, j, budget.StepID(step))
	return nil
}

// Steps are the most recent ledger records of client c's job, oldest
// first, at most limit of them (0: hostapi.DefaultStepRecords).
func (h *Host) Steps(c hostapi.ClientID, limit int) ([]hostapi.StepRecord, error) {
	if err := hostapi.Validate(&hostapi.StepsReq{Limit: limit}); err != nil {
		return nil, err
	}
	if limit == 0 {
		limit = hostapi.DefaultStepRecords
	}
	var out []hostapi.StepRecord
	for _, r := range h.eng.JobSteps(jobOf(h.client(c))) {
		out = append(out, StepRecordToAPI(r))
	}
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, nil
}

// Counters are the host's engine counters, client c's flows' (in flow id
// order) and what client c holds. The driver adds its loop's counters to
// Host and the completions it delivered.
func (h *Host) Counters(c hostapi.ClientID) hostapi.Counters {
	out := hostapi.Counters{Host: HostCounters(h.eng.Stats())}
	cl := h.client(c)
	for _, id := range slices.Sorted(maps.Keys(cl.flows)) {
		key := h.flows[id].key
		r, ok := h.eng.Flow(key)
		if !ok {
			continue
		}
		out.Flows = append(out.Flows, hostapi.FlowCounters{Flow: id, Peer: hostapi.HostID(key.Peer), Values: FlowCounters(r),
			LocalTag: r.LocalTag, PeerTag: r.PeerTag})
	}
	out.Retired = cl.retired
	out.Client = hostapi.ClientCounters{Regions: len(cl.regions), RegisteredBytes: cl.registered,
		Flows: len(cl.flows), Outstanding: cl.outstanding}
	return out
}

// Route hands one of the engine's completions to the sink with the client
// that owns its flow. One of a flow no client holds is dropped and
// counted (Unrouted).
func (h *Host) Route(nc nic.Completion) {
	f, ok := h.flows[hostapi.FlowID(nc.Flow.ID)]
	if !ok || f.key != nc.Flow {
		h.unrouted++
		return
	}
	if h.sink != nil {
		h.sink(f.owner, CompletionToAPI(nc))
	}
}

// Written says that client c now has n more of its completions: a work
// request stays outstanding, against the client's MaxOutstanding, until
// its completion reaches the client, so a client that stops reading runs
// into that limit before the driver's queue of its completions can fill.
// The daemon calls it as each completion is written to the socket, the
// simulator as it hands one to the workload. A client that is gone, or a
// count past the work outstanding (a completion the driver made without a
// work request), changes nothing.
func (h *Host) Written(c hostapi.ClientID, n int) {
	if cl := h.clients[c]; cl != nil && n > 0 {
		cl.outstanding = max(cl.outstanding-n, 0)
	}
}

// Deliver routes every completion the engine has made since the last call.
func (h *Host) Deliver() {
	for _, nc := range h.eng.Completions() {
		h.Route(nc)
	}
}

// Unrouted counts the completions of flows no client holds, which Route
// dropped.
func (h *Host) Unrouted() uint64 { return h.unrouted }

// FlowOwner returns the client that opened flow f.
func (h *Host) FlowOwner(f hostapi.FlowID) (hostapi.ClientID, bool) {
	fl, ok := h.flows[f]
	return fl.owner, ok
}

// Flows is the number of flows open on the host, all clients together.
func (h *Host) Flows() int { return len(h.flows) }

// ClientGone releases everything client c held: its flows (their work
// fails, handed to the sink first) and then its regions. The driver may
// free the memory once it returns.
func (h *Host) ClientGone(c hostapi.ClientID) {
	cl := h.clients[c]
	if cl == nil {
		return
	}
	ids := slices.Sorted(maps.Keys(cl.flows))
	for _, id := range ids {
		_ = h.eng.DestroyFlow(h.flows[id].key)
	}
	h.Deliver()
	for _, id := range ids {
		delete(h.flows, id)
	}
	for _, r := range slices.Sorted(maps.Keys(cl.regions)) {
		_ = h.eng.DeregisterMemory(nic.RegionID(r))
	}
	if j := cl.job; j != nil {
		j.clients-- // kept with its steps until the room is needed (evictIdleJob)
	}
	delete(h.clients, c)
}
