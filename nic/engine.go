package nic

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/internal/splitmix"
	"github.com/forgive-emu/forgive/reliability"
	"github.com/forgive-emu/forgive/wire"
)

// RegionID names a registered memory region.
type RegionID uint32

// WorkKind says which work request a completion completes.
type WorkKind uint8

// Work kinds.
const (
	WorkSend WorkKind = iota + 1
	WorkRecv
)

func (k WorkKind) String() string {
	if k == WorkSend {
		return "send"
	}
	return "recv"
}

// Range is a byte range within a posted receive, [Start, End): the
// transport's own type, so the engine hands its ranges up unconverted.
type Range = reliability.ByteRange

// Completion reports a finished work request.
type Completion struct {
	Flow FlowKey
	WR   uint64
	Kind WorkKind
	Len  uint32
	Step budget.StepID // the receive's step tag
	// Forgiven lists the ranges of a receive that were forgiven rather than
	// received; the engine zero-filled them in memory.
	Forgiven []Range
	Err      error // nil on success
}

// Engine is one host's NIC. It is not safe for concurrent use.
type Engine struct {
	// What every packet sent or received reads and updates comes first,
	// in a few adjacent cache lines: copies of the config fields the data
	// path needs (cfg never changes after New), then the state it
	// touches. The config itself and the control path's state follow.
	host      uint16
	ecnOn     bool // cfg.ECN
	noPayload bool // cfg.NoPayload
	wdOn      bool // cfg.watchdog()'s ok, and its limit and recovery (wdDrain: the window less the limit)
	txIndexed bool // more than txScanMax flows: Transmit reads the index (txindex.go)
	overhead  int
	lineRate  float64 // cfg.LineRate, for the pacer's arithmetic
	failAfter time.Duration
	wdLimit   time.Duration
	wdRecover time.Duration
	now       time.Duration
	flows     flowTable
	order     []*flow // round-robin order for transmission
	// orderBuf holds order while a host has few flows (most have one or
	// two), so the scan of every flow reads no line outside the engine.
	orderBuf [4]*flow
	rr       int
	pcg      rand.PCG         // rng's source, inside the engine: every sprayed packet draws from it
	port     congestion.Pacer // the host link
	pausedTo time.Duration    // PFC: data paused until then
	// The PAUSE watchdog: when the current continuous pause began, the
	// bucket's level then (the paused time it still holds), and until when
	// PAUSE frames are ignored after the watchdog fired. The bucket drains
	// wdLimit in every wdDrain of time not paused (Config.WatchdogWindow).
	pauseStart  time.Duration
	wdLevel     time.Duration
	wdDrain     time.Duration
	ignoreUntil time.Duration
	// Paused time of the pauses before the current one, and the longest.
	pausedAcc    time.Duration
	longestPause time.Duration
	ctrl         ctrlQueue
	tm           timers // the flows' cached deadlines (due.go)
	done         []Completion
	stats        Stats

	// The transmit index (txindex.go), kept while txIndexed; txScanMax
	// is the most flows Transmit scans without it (a field: the tests set
	// it).
	txi       txIndex
	txScanMax int

	cfg     Config
	regions map[RegionID]region
	inUse   map[RegionID]int // posted work requests naming each region
	nextRgn RegionID
	lastTag map[FlowKey]uint32 // the tag of each key's latest incarnation here: live, or among the retired
	jobs    *jobBudgets        // each job's ledger and detector (job 0's always)
	rng     *rand.Rand
	tagRNG  *rand.Rand // flow tags: from TagSeed, never from Seed's stream
	spare   []Completion
	// shared is what the engines of a group share (NewGroup); nil for an
	// engine alone.
	shared *shared

	// retired lists the destroyed flows' keys and tags, oldest first from
	// retiredHead, at most MaxFlows of them: lastTag forgets a destroyed
	// key's tag once MaxFlows later flows were destroyed, so a host that
	// makes a flow per message holds no state per flow it ever had.
	retired     []retiredTag
	retiredHead int
	// goneCNPs and goneCuts are the destroyed flows' CNPs received and
	// rate cuts applied, which Signals keeps in its totals.
	goneCNPs, goneCuts uint64
}

// retiredTag is a destroyed flow's key and tag.
type retiredTag struct {
	key FlowKey
	tag uint32
}

// region is a registered region: its memory, or in payload-free mode
// (RegisterLength) only its size.
type region struct {
	mem  []byte
	size int
}

// Stats are the engine's host-wide counters.
type Stats struct {
	RxPackets, TxPackets uint64
	RxBytes, TxBytes     uint64
	Malformed            uint64 // datagrams that are not valid packets
	Misdelivered         uint64 // packets for another host
	UnknownFlow          uint64 // packets of a flow this host does not have
	Pauses               uint64 // PFC PAUSE frames received
	PausesIgnored        uint64 // PAUSE frames ignored in watchdog recovery
	WatchdogFires        uint64 // pauses the watchdog ended
	// PausedTime is how long data was paused by PFC in all, LongestPause
	// the longest continuous pause: at most WatchdogLimit with the
	// watchdog on.
	PausedTime   time.Duration
	LongestPause time.Duration
	FlowsFailed  uint64 // failed (peer unreachable); destroys are not counted
	// WrongTag counts packets of a known flow whose destination tag is not
	// the flow's own: forged by a sender that does not know the tag, or
	// left over from an earlier incarnation of the flow at this end.
	WrongTag uint64
	// StaleIncarnation counts packets with the flow's own tag but a source
	// tag other than the peer's bound one: the peer recreated its flow.
	StaleIncarnation uint64
	// StaleConnects counts the CONNECTs among them that came from an
	// earlier incarnation of the peer's flow than the bound one (sealed:
	// ordered before the packet that bound the peer; plain: naming a tag
	// the flow was restarted away from): refused, where any other would
	// restart the flow. A relay that holds a CONNECT and delivers it after the
	// peer recreated its flow draws one of these.
	StaleConnects uint64
	// AcceptsLimited counts CONNECTs left without an ACCEPT because the
	// flow answered its burst of them within the rate limit's interval:
	// forged CONNECTs cannot make the host send a packet for each.
	AcceptsLimited uint64
	// UnbudgetedBytes counts the gradient bytes that arrived for a step
	// before BeginStep opened it (budget.Ledger.UnbudgetedBytes).
	UnbudgetedBytes uint64
}

// New returns an engine.
func New(cfg Config) (*Engine, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	e := new(Engine)
	e.pcg.Seed(cfg.Seed, uint64(cfg.Host)<<32|0x466f72) // rand.NewPCG's state
	rng := rand.New(&e.pcg)
	jobs, err := newJobBudgets(cfg, rng)
	if err != nil {
		return nil, err
	}
	seed := tagSeed(cfg)
	wdLimit, wdRecover, wdWindow, wdOn := cfg.watchdog()
	*e = Engine{
		pcg:       e.pcg, // itself: rng reads it where it is
		host:      cfg.Host,
		ecnOn:     cfg.ECN,
		noPayload: cfg.NoPayload,
		wdOn:      wdOn,
		overhead:  cfg.Overhead,
		lineRate:  float64(cfg.LineRate),
		failAfter: cfg.FailAfter,
		wdLimit:   wdLimit,
		wdRecover: wdRecover,
		wdDrain:   wdWindow - wdLimit,
		cfg:       cfg,
		tagRNG:    rand.New(rand.NewChaCha8(seed)),
		regions:   map[RegionID]region{},
		inUse:     map[RegionID]int{},
		lastTag:   map[FlowKey]uint32{},
		jobs:      jobs,
		rng:       rng,
		port:      congestion.NewPacer(congestion.PacerConfig{Burst: cfg.SenderCC.Pacer.Burst}),
		txScanMax: txScanMax,
	}
	e.order = e.orderBuf[:0]
	return e, nil
}

// Config returns the engine's configuration.
func (e *Engine) Config() Config { return e.cfg }

// RegisterMemory makes mem available to work requests. The engine reads
// sends from it and writes received payload into it until it is
// deregistered.
func (e *Engine) RegisterMemory(mem []byte) (RegionID, error) {
	return e.register(region{mem: mem, size: len(mem)})
}

// RegisterLength registers a region of size bytes that has no memory: a
// payload-free engine's (Config.NoPayload), whose packets carry lengths
// but no payload bytes, so nothing ever reads or writes the region. Work
// requests are checked against its size as against a real region's. An
// engine with payloads refuses it (ErrBadRequest): its data path copies.
func (e *Engine) RegisterLength(size int) (RegionID, error) {
	if !e.noPayload {
		return 0, fmt.Errorf("%w: a region without memory needs a payload-free NIC (NoPayload)", ErrBadRequest)
	}
	if size < 0 {
		return 0, fmt.Errorf("%w: a region of %d bytes", ErrBadRequest, size)
	}
	return e.register(region{size: size})
}

func (e *Engine) register(r region) (RegionID, error) {
	if len(e.regions) >= e.cfg.MaxRegions {
		return 0, fmt.Errorf("%w: %d memory regions", ErrLimit, len(e.regions))
	}
	e.nextRgn++
	e.regions[e.nextRgn] = r
	return e.nextRgn, nil
}

// DeregisterMemory forgets a region. It fails while posted work names it.
func (e *Engine) DeregisterMemory(id RegionID) error {
	if err := e.CheckDeregister(id); err != nil {
		return err
	}
	delete(e.regions, id)
	delete(e.inUse, id)
	return nil
}

// CheckDeregister reports why DeregisterMemory would refuse region id,
// changing nothing: a driver that registers a region with several
// engines checks them all before it deregisters it from any.
func (e *Engine) CheckDeregister(id RegionID) error {
	if _, ok := e.regions[id]; !ok {
		return fmt.Errorf("%w: %d", ErrNoRegion, id)
	}
	if n := e.inUse[id]; n > 0 {
		return fmt.Errorf("%w: region %d has %d posted work requests", ErrRegionInUse, id, n)
	}
	return nil
}

// CreateFlow sets up a flow to a peer. Both ends create it with the same
// spec before data moves.
func (e *Engine) CreateFlow(now time.Duration, spec FlowSpec) error {
	e.observe(now)
	key := FlowKey{spec.Peer, spec.ID}
	switch {
	case e.flows.get(key) != nil:
		return fmt.Errorf("%w: %v", ErrFlowExists, key)
	case e.flows.len() >= e.cfg.MaxFlows:
		return fmt.Errorf("%w: %d flows", ErrLimit, e.flows.len())
	case spec.Peer == e.cfg.Host:
		return fmt.Errorf("%w: flow %v: peer is this host", ErrBadRequest, key)
	case spec.Class >= NumClasses:
		return fmt.Errorf("%w: flow %v: class %d", ErrBadRequest, key, spec.Class)
	case spec.Entropy > EntropyMessage:
		return fmt.Errorf("%w: flow %v: entropy policy %d", ErrBadRequest, key, spec.Entropy)
	}
	if spec.Job != 0 {
		// The job's ledger exists before its first byte arrives, so its
		// early bytes are counted (UnbudgetedBytes) as the default job's are.
		e.lockBudget()
		_, err := e.jobs.get(spec.Job)
		e.unlockBudget()
		if err != nil {
			return err
		}
	}
	tag := e.newTag(key)
	created := false
	defer func() {
		if !created {
			e.retireTag(key, tag) // the tag was drawn: remember it as a destroyed flow's
		}
	}()
	info := reliability.FlowInfo{Flow: spec.ID, Local: e.cfg.Host, Peer: spec.Peer, InitialPSN: wire.InitialPSN(tag)}
	scfg, rcfg := e.cfg.sender(), e.cfg.Receiver
	if w, ok := e.cfg.PeerWindow(spec.Peer); ok {
		scfg.Window = w
	}
	switch spec.Entropy {
	case EntropySubflows:
		if spec.Subflows < 1 {
			spec.Subflows = 1
		}
		scfg.Subflows = spec.Subflows
		scfg.RetxProbe = true
		if scfg.ProbeEvery == 0 {
			scfg.ProbeEvery = 8
		}
	case EntropySpray, EntropyMessage:
		// Spray orders nothing; a path per message orders each message's
		// packets but not the messages of a flow, which share its PSNs:
		// a gap or a tail probe cannot prove a loss, only the RTO finds
		// silent drops (trims are still reported).
		spec.Subflows = 1
		scfg.TailProbe = false
		rcfg.SprayPerPacket = true
	default:
		spec.Subflows = 1
	}
	tx, err := reliability.NewSender(info, scfg)
	if err != nil {
		return fmt.Errorf("%w: flow %v: %w", ErrBadRequest, key, err)
	}
	ctrl, err := e.cfg.controller()
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	cc, err := congestion.NewSender(now, ctrl, e.cfg.SenderCC)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	f := &flow{key: key, spec: spec, info: info, tag: tag, dscp: e.cfg.DSCP[spec.Class], tx: tx, cc: cc,
		np: congestion.NewNotifier(e.cfg.Notifier), entropy: uint16(splitmix.Next(uint64(spec.Peer)<<32 | uint64(spec.ID) ^ uint64(e.cfg.Host)<<48))}
	f.rxDec = decider{f: f, e: e}
	if !e.cfg.Forgive || spec.Class != ClassGradient {
		// decider answers as NoForgiveness for such a flow, whatever the
		// step; the receiver knows NoForgiveness and skips its calls.
		f.rxDec = reliability.NoForgiveness{}
	}
	// The receive side starts where the peer's tag says, once it is
	// known (bind); until then it admits nothing, since every packet is
	// refused at the tag check first.
	f.rcfg, f.scfg = rcfg, scfg
	rx, err := reliability.NewReceiver(info, rcfg, f.rxDec)
	if err != nil {
		return fmt.Errorf("%w: flow %v: %w", ErrBadRequest, key, err)
	}
	f.rx = rx
	f.lastMove = now
	f.txBlocked = true // until something is posted
	e.flows.put(key, f)
	e.order = append(e.order, f)
	e.addFlow(f)
	e.txAdd(f)
	e.connect(now, f)
	created = true
	return nil
}

// newTag draws a flow's tag: random, non-zero, and not the tag of the
// flow this key had before (a recreated flow is a new incarnation).
func (e *Engine) newTag(key FlowKey) uint32 {
	for {
		t := e.tagRNG.Uint32()
		if t != 0 && t != e.lastTag[key] {
			e.lastTag[key] = t
			return t
		}
	}
}

// retireTag records that the flow of key with tag tag is gone. Its tag
// stays in lastTag, so the key's next incarnation draws another, until
// MaxFlows later flows were destroyed: by then no packet of this one is
// in flight (FailAfter bounds an unacknowledged packet's life), and a
// new tag equal to it by chance (1 in 2^32) could only admit packets that
// no longer exist.
func (e *Engine) retireTag(key FlowKey, tag uint32) {
	if e.retiredHead > 0 && e.retiredHead == len(e.retired) {
		e.retired, e.retiredHead = e.retired[:0], 0
	}
	e.retired = append(e.retired, retiredTag{key, tag})
	if len(e.retired)-e.retiredHead <= e.cfg.MaxFlows {
		return
	}
	old := e.retired[e.retiredHead]
	e.retired[e.retiredHead] = retiredTag{}
	e.retiredHead++
	if e.lastTag[old.key] == old.tag && e.flows.get(old.key) == nil {
		delete(e.lastTag, old.key)
	}
	if e.retiredHead >= len(e.retired)/2 {
		// Slide the live part down: the list's storage stays about
		// MaxFlows entries however many flows come and go.
		n := copy(e.retired, e.retired[e.retiredHead:])
		clear(e.retired[n:])
		e.retired, e.retiredHead = e.retired[:n], 0
	}
}

// DestroyFlow removes a flow; its outstanding work completes with an error.
func (e *Engine) DestroyFlow(key FlowKey) error {
	f := e.flows.get(key)
	if f == nil {
		return fmt.Errorf("%w: %v", ErrNoFlow, key)
	}
	e.fail(f, ErrFlowDestroy)
	e.removeFlow(f)
	e.goneCNPs += f.stats.CNPsRecv
	e.goneCuts += f.cc.Controller().Stats().Cuts
	e.flows.remove(key)
	e.retireTag(key, f.tag)
	for i, g := range e.order {
		if g == f {
			e.order = append(e.order[:i], e.order[i+1:]...)
			e.txRemove(i)
			// Keep the round-robin cursor on the flow it pointed at.
			if e.rr > i {
				e.rr--
			}
			if e.rr >= len(e.order) {
				e.rr = 0
			}
			break
		}
	}
	return nil
}

// SendReq is a send for PostSend: a message of Length bytes read from
// Region at Off, sent on the flow Key; WR names it in its completion.
type SendReq struct {
	Key         FlowKey
	WR          uint64
	Region      RegionID
	Off, Length int
}

// RecvReq is a receive for PostRecv: the flow Key's next incoming message,
// placed in Region at Off, at most Length bytes; WR names it in its
// completion. Step tags it as part of that step's gradient all-reduce (0:
// none). Phase declares the message's phase in the all-reduce, a partial
// sum being reduced or a finished value being gathered, which the gather
// policy (budget.Config.Gather) reads; it is only meaningful for a step's
// message on a gradient flow, and given for any other it is
// ErrBadRequest (zero: budget.PhaseUnspecified).
type RecvReq struct {
	Key         FlowKey
	WR          uint64
	Region      RegionID
	Off, Length int
	Step        budget.StepID
	Phase       budget.Phase
}

// StepReq is a step for BeginStep: its id, its classification when the
// application gives one (Critical), else the detector's input (Norms, and
// LRDecay when the learning rate just decayed), and the gradient bytes
// the step is expected to bring this rank (Expected).
type StepReq struct {
	Step     budget.StepID
	Critical *bool
	Norms    []float64
	LRDecay  bool
	Expected int64
	Job      JobID // whose step: 0, the default job, unless the host runs several
}

// PostSend queues a send.
func (e *Engine) PostSend(now time.Duration, req SendReq) error {
	e.observe(now)
	f, err := e.usable(req.Key)
	if err != nil {
		return err
	}
	if err := e.checkRange(req.Region, req.Off, req.Length); err != nil {
		return err
	}
	e.touch(f)
	msg := f.nextMsg
	if f.peerTag == 0 && len(f.sends) == 0 {
		f.lastMove = now // the wait for the handshake starts with the first send
	}
	if err := f.tx.Post(msg, uint32(req.Length)); err != nil {
		return fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	f.nextMsg++
	f.sends = append(f.sends, sendWR{wr: req.WR, msg: msg, region: req.Region, off: req.Off, len: uint32(req.Length)})
	e.inUse[req.Region]++
	e.unblock(f)
	return nil
}

// PostRecv posts a receive.
func (e *Engine) PostRecv(req RecvReq) error {
	f, err := e.usable(req.Key)
	if err != nil {
		return err
	}
	switch {
	case req.Phase >= budget.NumPhases:
		return fmt.Errorf("%w: flow %v: %v", ErrBadRequest, req.Key, req.Phase)
	case req.Phase != budget.PhaseUnspecified && f.spec.Class != ClassGradient:
		return fmt.Errorf("%w: flow %v: phase %v on a %v flow: only gradient messages have a phase", ErrBadRequest, req.Key, req.Phase, f.spec.Class)
	case req.Phase != budget.PhaseUnspecified && req.Step == 0:
		return fmt.Errorf("%w: flow %v: phase %v without a step: only a step's gradient messages have a phase", ErrBadRequest, req.Key, req.Phase)
	}
	if err := e.checkRange(req.Region, req.Off, req.Length); err != nil {
		return err
	}
	f.recvs = append(f.recvs, recvWR{wr: req.WR, region: req.Region, off: req.Off, len: uint32(req.Length), step: req.Step, phase: req.Phase})
	if req.Step != 0 {
		f.lastStep = req.Step
	}
	e.inUse[req.Region]++
	return nil
}

// BeginStep opens a training step's loss budget at this receiving rank.
// The classification is critical when given, else the detector's verdict
// over the gradient norms ("A detector classifies each step, and it must
// run before the step's gradient traffic starts").
//
// With neither Critical nor Norms the step is opened unclassified
// (budget.Ledger.OnStepOpenAt): its early bytes are budgeted as a
// critical step's, and a second BeginStep with the classification
// classifies it; Expected is then 0 or the open's. The result is the
// classification, true (critical) for an open.
//
// now starts the step's span for the trim-level accounting
// (budget.StepRecord.Span).
func (e *Engine) BeginStep(now time.Duration, req StepReq) (bool, error) {
	now = e.observe(now)
	e.lockBudget()
	defer e.unlockBudget()
	jb, err := e.jobs.get(req.Job)
	if err != nil {
		return false, err
	}
	if req.Critical == nil && len(req.Norms) == 0 {
		if req.LRDecay {
			return false, fmt.Errorf("%w: step %d: lr_decay goes with norms", ErrBadRequest, req.Step)
		}
		if err := jb.ledger.OnStepOpenAt(now, req.Step, req.Expected); err != nil {
			return false, fmt.Errorf("%w: %w", ErrBadRequest, err)
		}
		jb.rememberStep(req.Step)
		return true, nil
	}
	if r, ok := jb.ledger.Record(req.Step); ok && r.Open && !r.Classified {
		// Classify before the detector's state moves on, so that a
		// refused classification changes nothing.
		if req.Expected != 0 && req.Expected != r.Expected {
			return false, fmt.Errorf("%w: step %d was opened expecting %d gradient bytes, not %d", ErrBadRequest, req.Step, r.Expected, req.Expected)
		}
	}
	c := false
	if req.Critical != nil {
		c = *req.Critical
	} else {
		var err error
		if c, err = jb.detector.Classify(req.Norms, req.LRDecay); err != nil {
			return false, fmt.Errorf("%w: %w", ErrStepClassify, err)
		}
	}
	r, wasOpen := jb.ledger.Record(req.Step)
	if err := jb.ledger.OnStepBeginAt(now, req.Step, c, req.Expected); err != nil {
		return false, fmt.Errorf("%w: %w", ErrBadRequest, err)
	}
	if !wasOpen || !r.Open {
		jb.rememberStep(req.Step)
	}
	return c, nil
}

// rememberStep keeps the step among the records Steps returns.
func (jb *jobBudget) rememberStep(step budget.StepID) {
	if len(jb.steps) == budget.HistorySteps {
		jb.steps = append(jb.steps[:0], jb.steps[1:]...)
	}
	jb.steps = append(jb.steps, step)
}

// Steps returns the records of the default job's most recent steps,
// oldest first (JobSteps for another job's).
func (e *Engine) Steps() []budget.StepRecord { return e.JobSteps(0) }

// EndStep closes a step of the default job at now, the end of its span:
// "Any range trimmed later is requested for retransmission."
func (e *Engine) EndStep(now time.Duration, step budget.StepID) { e.EndJobStep(now, 0, step) }

// StepRecord returns the default job's ledger's record of a step.
func (e *Engine) StepRecord(step budget.StepID) (budget.StepRecord, bool) {
	return e.JobStepRecord(0, step)
}

// CheckStep verifies the FORGIVE invariants of a step of the default job.
func (e *Engine) CheckStep(step budget.StepID) error {
	e.lockBudget()
	defer e.unlockBudget()
	return e.jobs.byJob[0].ledger.CheckInvariants(step)
}

func (e *Engine) usable(key FlowKey) (*flow, error) {
	f := e.flows.get(key)
	if f == nil {
		return nil, fmt.Errorf("%w: %v", ErrNoFlow, key)
	}
	if f.failed != nil {
		return nil, fmt.Errorf("%w: %v: %w", ErrFlowFailed, key, f.failed)
	}
	return f, nil
}

func (e *Engine) checkRange(region RegionID, off, length int) error {
	r, ok := e.regions[region]
	if !ok {
		return fmt.Errorf("%w: %d", ErrNoRegion, region)
	}
	if off < 0 || length < 0 || length > 1<<31 || off > r.size-length {
		return fmt.Errorf("%w: [%d,+%d) of region %d (%d bytes)", ErrBounds, off, length, region, r.size)
	}
	return nil
}

// Completions returns the completions since the last call and forgets
// them. The slice is reused by the engine after the next call.
func (e *Engine) Completions() []Completion {
	d := e.done
	clear(e.spare) // drop references to the forgiven lists of two calls ago
	e.done, e.spare = e.spare[:0], d
	return d
}

// observe keeps now monotonic: a driver may hand in an older time.
func (e *Engine) observe(now time.Duration) time.Duration {
	if now > e.now {
		e.now = now
	}
	return e.now
}

// Stats returns the host-wide counters.
func (e *Engine) Stats() Stats {
	s := e.stats
	s.PausedTime, s.LongestPause = e.pausedTime()
	e.lockBudget()
	for _, jb := range e.jobs.byJob {
		s.UnbudgetedBytes += uint64(jb.ledger.UnbudgetedBytes())
	}
	e.unlockBudget()
	return s
}

// Flows returns the keys of every flow.
func (e *Engine) Flows() []FlowKey {
	keys := make([]FlowKey, 0, len(e.order))
	for _, f := range e.order {
		keys = append(keys, f.key)
	}
	return keys
}

// Signals sums, over the flows that exist now and those destroyed, the
// CNPs received and the rate cuts applied: what Flow reports as
// Stats.CNPsRecv and Ctrl.Cuts, without a snapshot per flow, for a
// sampler that reads them often. The totals never fall, however flows
// come and go (a flow per message).
func (e *Engine) Signals() (cnps, cuts uint64) {
	cnps, cuts = e.goneCNPs, e.goneCuts
	for _, f := range e.order {
		cnps += f.stats.CNPsRecv
		cuts += f.cc.Controller().Stats().Cuts
	}
	return cnps, cuts
}

// FlowReport is a snapshot of one flow.
type FlowReport struct {
	Key      FlowKey
	Spec     FlowSpec
	Stats    FlowStats
	Sender   reliability.SenderStats
	Receiver reliability.ReceiverStats
	CC       congestion.SenderStats
	Ctrl     congestion.Stats // the rate controller's own counters: real cuts
	Rate     float64          // current sending rate, bits/s
	// Window is the congestion window in bytes of a window controller
	// (NSCC), 0 for a rate controller; Unacked is the payload bytes sent
	// and not acknowledged, which the window bounds for new data.
	Window, Unacked int
	Mode            congestion.Mode
	Failed          string
	// LocalTag is this end's tag, PeerTag the peer's once the handshake
	// bound it (0 before): diagnostics, and what an on-path observer sees.
	LocalTag, PeerTag uint32
}

// Flow returns a snapshot of one flow.
func (e *Engine) Flow(key FlowKey) (FlowReport, bool) {
	f := e.flows.get(key)
	if f == nil {
		return FlowReport{}, false
	}
	r := FlowReport{Key: key, Spec: f.spec, Stats: f.stats, Sender: f.tx.Stats(), Receiver: f.rx.Stats(),
		CC: f.cc.Stats(e.now), Ctrl: f.cc.Controller().Stats(), Rate: f.cc.Rate(), Mode: f.cc.Mode(),
		LocalTag: f.tag, PeerTag: f.peerTag}
	r.Window, _ = f.cc.Window()
	r.Unacked = f.tx.UnackedBytes()
	if f.failed != nil {
		r.Failed = f.failed.Error()
	}
	return r, true
}

var _ reliability.Decider = decider{}
