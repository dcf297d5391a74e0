package hostapi

import (
	"encoding/json"
	"fmt"
	"math"
	"time"
)

// Identifiers. HostID and FlowID have the widths of the wire header's host
// and flow fields.
type (
	// HostID names a host (a daemon) on the fabric.
	HostID uint16
	// FlowID names a flow (a connected queue pair). The application picks
	// it and both ends use the same id; it is unique among the flows open
	// on one daemon. 0 is not a flow.
	FlowID uint32
	// RegionID names a registered memory region; the backend assigns it.
	// 0 is not a region.
	RegionID uint64
	// ClientID names one connection to the daemon, for the backend.
	ClientID uint64
)

// Class is a flow's traffic class. Only gradient flows carry the bytes
// FORGIVE may forgive ("neither tensor-parallel nor pipeline-parallel
// traffic is eligible"), so the class answers IsGradientAllReduce(flow).
type Class uint8

// Traffic classes. The zero value is not a class: a flow must say what it
// carries.
const (
	ClassGradient Class = iota + 1 // data-parallel gradient all-reduce
	ClassTensor                    // tensor-parallel activations
	ClassPipeline                  // pipeline-parallel activations
	ClassOther                     // anything else
)

var classNames = []string{"", "gradient", "tensor", "pipeline", "other"}

func (c Class) String() string               { return enumString(classNames, uint8(c), "Class") }
func (c Class) MarshalText() ([]byte, error) { return enumMarshal(classNames, uint8(c), "class") }
func (c *Class) UnmarshalText(b []byte) error {
	return enumUnmarshal(classNames, b, "class", (*uint8)(c))
}

// Entropy is how a flow spreads its packets over the fabric's paths.
type Entropy uint8

// Entropy modes. The zero value is a single path.
const (
	EntropySingle   Entropy = iota // one entropy value: one path
	EntropySpray                   // a fresh entropy value per packet
	EntropySubflows                // FlowSpec.Subflows fixed values, round robin
	EntropyMessage                 // one value per message: a path per message (ECMP per message)
)

var entropyNames = []string{"single", "spray", "subflows", "message"}

func (e Entropy) String() string               { return enumString(entropyNames, uint8(e), "Entropy") }
func (e Entropy) MarshalText() ([]byte, error) { return enumMarshal(entropyNames, uint8(e), "entropy") }
func (e *Entropy) UnmarshalText(b []byte) error {
	return enumUnmarshal(entropyNames, b, "entropy", (*uint8)(e))
}

// Phase is what a received gradient message holds in the all-reduce,
// declared with post_recv: a partial sum being reduced (the ring's
// reduce-scatter) or a finished value being gathered (its all-gather);
// PhaseGatherOwner is a finished value received from its owner, the rank
// that reduced it (the all-gather's first round). The daemon's gather
// policy reads it (docs/hostapi.md, "Gather policies"). The zero value is
// unspecified, which every policy treats as reduce.
type Phase uint8

// Phases.
const (
	PhaseUnspecified Phase = iota
	PhaseReduce
	PhaseGather
	PhaseGatherOwner
)

var phaseNames = []string{"", "reduce", "gather", "gather-owner"}

func (p Phase) String() string               { return enumString(phaseNames, uint8(p), "Phase") }
func (p Phase) MarshalText() ([]byte, error) { return enumMarshal(phaseNames, uint8(p), "phase") }
func (p *Phase) UnmarshalText(b []byte) error {
	return enumUnmarshal(phaseNames, b, "phase", (*uint8)(p))
}

// Kind says which work request a completion finishes.
type Kind uint8

// Completion kinds.
const (
	KindSend Kind = iota + 1
	KindRecv
)

var kindNames = []string{"", "send", "recv"}

func (k Kind) String() string                { return enumString(kindNames, uint8(k), "Kind") }
func (k Kind) MarshalText() ([]byte, error)  { return enumMarshal(kindNames, uint8(k), "kind") }
func (k *Kind) UnmarshalText(b []byte) error { return enumUnmarshal(kindNames, b, "kind", (*uint8)(k)) }

// CompletionStatus says whether a work request succeeded.
type CompletionStatus uint8

// Completion statuses.
const (
	StatusOK CompletionStatus = iota + 1
	StatusError
)

var statusNames = []string{"", "ok", "error"}

func (s CompletionStatus) String() string {
	return enumString(statusNames, uint8(s), "CompletionStatus")
}
func (s CompletionStatus) MarshalText() ([]byte, error) {
	return enumMarshal(statusNames, uint8(s), "status")
}
func (s *CompletionStatus) UnmarshalText(b []byte) error {
	return enumUnmarshal(statusNames, b, "status", (*uint8)(s))
}

// Limits are the per-client limits a daemon enforces, reported by hello.
type Limits struct {
	MaxRegions         int    `json:"max_regions"`          // registered regions
	MaxRegisteredBytes uint64 `json:"max_registered_bytes"` // sum of region lengths
	MaxFlows           int    `json:"max_flows"`            // open flows
	MaxOutstanding     int    `json:"max_outstanding"`      // posted work requests not yet completed
	// CompletionQueue bounds the completions buffered for a client before
	// it is disconnected. A completion counts as outstanding until it is
	// written, so with CompletionQueue >= MaxOutstanding only a backend
	// that completes more than was posted can overflow it.
	CompletionQueue int `json:"completion_queue"`
}

// --- requests -------------------------------------------------------------

// HelloReq opens a session: the versions the client speaks, a name for
// the daemon's logs, and the job the client belongs to (docs/hostapi.md,
// "Ownership"): the clients of one uid that declare the same job share
// its steps, and the flow ids the daemon reserves for it; empty is the
// uid's default job.
type HelloReq struct {
	Versions []int  `json:"versions"`
	Name     string `json:"name,omitempty"`
	Job      string `json:"job,omitempty"`
}

// Job is a job as the daemon knows it: the name a client declared in its
// hello and the uid the kernel reported for its connection. Two uids
// never share a job, whatever names they declare.
type Job struct {
	UID  uint32
	Name string
}

func (j Job) String() string {
	if j.Name == "" {
		return fmt.Sprintf("uid %d's default job", j.UID)
	}
	return fmt.Sprintf("job %q of uid %d", j.Name, j.UID)
}

// MaxJobName bounds a job's name.
const MaxJobName = 64

// JobEnv names the environment variable Dial reads the client's job from
// when the caller names none (DialJob): a Kubernetes pod sets it from the
// downward API, a launcher for each of its jobs.
const JobEnv = "FORGIVE_JOB"

// RegisterReq registers the memfd passed with it (SCM_RIGHTS) as a region
// of Length bytes starting at file offset 0.
type RegisterReq struct {
	Length uint64 `json:"length"`
}

// DeregisterReq releases a region.
type DeregisterReq struct {
	Region RegionID `json:"region"`
}

// FlowSpec creates a flow to a peer host.
type FlowSpec struct {
	Flow     FlowID  `json:"flow"`
	Peer     HostID  `json:"peer"`
	Class    Class   `json:"class"`
	Entropy  Entropy `json:"entropy"`
	Subflows uint8   `json:"subflows,omitempty"` // with EntropySubflows only: 2..255
}

// DestroyFlowReq destroys a flow. Work requests still outstanding on it
// complete with StatusError.
type DestroyFlowReq struct {
	Flow FlowID `json:"flow"`
}

// SendReq posts a send of Length bytes at Offset in Region on Flow.
type SendReq struct {
	Flow   FlowID   `json:"flow"`
	Region RegionID `json:"region"`
	Offset uint64   `json:"offset"`
	Length uint64   `json:"length"`
	WRID   uint64   `json:"wr_id"`
}

// RecvReq posts a receive buffer for the next message on Flow. Step tags
// the message with its training step (StepOf(flow) in the FORGIVE spec);
// Phase, optional and only with a step on a gradient flow, says whether it
// is a partial sum or a finished value.
type RecvReq struct {
	Flow   FlowID   `json:"flow"`
	Region RegionID `json:"region"`
	Offset uint64   `json:"offset"`
	Length uint64   `json:"length"`
	Step   uint64   `json:"step"`
	Phase  Phase    `json:"phase,omitempty"`
	WRID   uint64   `json:"wr_id"`
}

// StepReq begins a training step: the host facts FORGIVE needs before the
// step's gradient traffic starts. Give either Critical (the application
// classified the step) or Norms (per-layer gradient norms for the daemon's
// critical-regime detector, with LRDecay when the learning rate just
// decayed), never both. Given neither, it opens the step unclassified: the
// step counts as critical until a second StepReq for it classifies it,
// with ExpectedGradientBytes 0 (the open's) or the open's.
type StepReq struct {
	Step                  uint64    `json:"step"`
	Critical              *bool     `json:"critical,omitempty"`
	Norms                 []float64 `json:"norms,omitempty"`
	LRDecay               bool      `json:"lr_decay,omitempty"`
	ExpectedGradientBytes uint64    `json:"expected_gradient_bytes"`
}

// EndStepReq ends a step: this rank's all-reduce for it completed.
type EndStepReq struct {
	Step uint64 `json:"step"`
}

// StepsReq asks for the most recent step records; Limit 0 means
// DefaultStepRecords.
type StepsReq struct {
	Limit int `json:"limit,omitempty"`
}

// Step-record limits for StepsReq.
const (
	DefaultStepRecords = 64
	MaxStepRecords     = 1024
)

// emptyReq is the body of counters and status, which take no parameters.
type emptyReq struct{}

// --- replies and pushes ---------------------------------------------------

// HelloReply is the daemon's answer to hello.
type HelloReply struct {
	Version  int      `json:"version"`
	HostID   HostID   `json:"host_id"`
	HostName string   `json:"host_name"`
	Client   ClientID `json:"client"`
	Limits   Limits   `json:"limits"`
	Job      string   `json:"job,omitempty"` // the job the client declared
}

// RegisterReply names the new region.
type RegisterReply struct {
	Region RegionID `json:"region"`
	Length uint64   `json:"length"`
}

// Range is a half-open byte range [Start, End), the convention of every
// byte range from package reliability up (reliability.ByteRange, nic.Range).
// On the wire it is written {"off":Start,"len":End-Start} (MarshalJSON);
// that is the only place it is converted.
type Range struct{ Start, End uint64 }

// Len returns the number of bytes in r (0 when r is empty or inverted).
func (r Range) Len() uint64 {
	if r.End <= r.Start {
		return 0
	}
	return r.End - r.Start
}

// wireRange is a Range as the protocol writes it.
type wireRange struct {
	Off uint64 `json:"off"`
	Len uint64 `json:"len"`
}

// MarshalJSON writes {"off":...,"len":...}.
func (r Range) MarshalJSON() ([]byte, error) {
	return json.Marshal(wireRange{Off: r.Start, Len: r.Len()})
}

// UnmarshalJSON reads {"off":...,"len":...}; a range that ends beyond
// 2^64 is an error.
func (r *Range) UnmarshalJSON(b []byte) error {
	var w wireRange
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	if w.Off+w.Len < w.Off {
		return fmt.Errorf("range off %d len %d: ends beyond 2^64", w.Off, w.Len)
	}
	*r = Range{Start: w.Off, End: w.Off + w.Len}
	return nil
}

// Completion finishes one posted work request. It is pushed to the client
// (op completion, request id 0) in the order the backend completes.
type Completion struct {
	WRID   uint64           `json:"wr_id"`
	Kind   Kind             `json:"kind"`
	Flow   FlowID           `json:"flow"`
	Status CompletionStatus `json:"status"`
	Err    string           `json:"err,omitempty"` // why, when Status is StatusError
	// Len is the message length: bytes placed (receive) or sent (send).
	Len uint64 `json:"len"`
	// Step is the receive's step tag (receives only).
	Step uint64 `json:"step,omitempty"`
	// Forgiven lists the byte ranges of a receive that were forgiven rather
	// than received, relative to the receive's Offset. They were
	// zero-filled in the region, so nothing is silently lost.
	Forgiven []Range `json:"forgiven,omitempty"`
}

// check reports a completion the client could not decode.
func (c Completion) check() error {
	if c.Kind != KindSend && c.Kind != KindRecv {
		return fmt.Errorf("%w: wr %d: kind %d", ErrBadCompletion, c.WRID, c.Kind)
	}
	if c.Status != StatusOK && c.Status != StatusError {
		return fmt.Errorf("%w: wr %d: status %d", ErrBadCompletion, c.WRID, c.Status)
	}
	return nil
}

// ForgivenBytes sums the lengths of the forgiven ranges.
func (c Completion) ForgivenBytes() uint64 {
	var n uint64
	for _, r := range c.Forgiven {
		n += r.Len()
	}
	return n
}

// Counters are what the counters op returns. The backend fills Host and
// Flows (only the caller's flows) and what the client holds; the server
// adds its counts of the client's requests and completions to Client.
type Counters struct {
	Host  HostStats      `json:"host"`
	Flows []FlowCounters `json:"flows,omitempty"`
	// Retired are the flows this client destroyed, their counters summed
	// as each was destroyed; Flows holds only those still open.
	Retired FlowSums       `json:"retired"`
	Client  ClientCounters `json:"client"`
}

// FlowCounters are one flow's counters.
type FlowCounters struct {
	Flow   FlowID    `json:"flow"`
	Peer   HostID    `json:"peer"`
	Values FlowStats `json:"values"`
	// LocalTag is this end's flow tag, PeerTag the peer's once the
	// handshake bound it (0 before): the flow's identity on the wire
	// (docs/wire.md), for diagnostics.
	LocalTag uint32 `json:"local_tag,omitempty"`
	PeerTag  uint32 `json:"peer_tag,omitempty"`
}

// ClientCounters are one client's: what it holds (the backend's record)
// and its requests, error replies and completions (the server's).
type ClientCounters struct {
	Requests        uint64 `json:"requests"`         // requests answered
	ErrorReplies    uint64 `json:"error_replies"`    // of which errors
	Completions     uint64 `json:"completions"`      // completions written
	Regions         int    `json:"regions"`          // registered now
	RegisteredBytes uint64 `json:"registered_bytes"` // registered now
	Flows           int    `json:"flows"`            // open now
	Outstanding     int    `json:"outstanding"`      // work requests posted, not completed
}

// StepRecord is one training step as the receiving rank's loss-budget
// ledger saw it (FORGIVE's "State per training step").
type StepRecord struct {
	Step     uint64  `json:"step"`
	Critical bool    `json:"critical"`
	P        float64 `json:"p"`        // P_low or P_high, by the classification
	Expected int64   `json:"expected"` // gradient bytes the step brings this rank
	Budget   int64   `json:"budget"`   // floor(p × expected)
	// Classified is false while a step opened without its classification
	// waits for it (it counts as critical until then).
	Classified bool `json:"classified"`

	Received    int64 `json:"received"`
	Forgiven    int64 `json:"forgiven"`
	Outstanding int64 `json:"outstanding"`
	Open        bool  `json:"open"`

	TrimmedBytes    int64 `json:"trimmed_bytes"`
	Trims           int64 `json:"trims"`
	Forgives        int64 `json:"forgives"`
	VestingRefusals int64 `json:"vesting_refusals"`
	BudgetRefusals  int64 `json:"budget_refusals"`
	DrawRefusals    int64 `json:"draw_refusals"`
	LateTrims       int64 `json:"late_trims"`
	InvariantHeld   bool  `json:"invariant_held"`

	// UnbudgetedBytes are the step's bytes that reached this rank before
	// the step was opened (0 when every begin_step came in time).
	UnbudgetedBytes int64 `json:"unbudgeted_bytes"`
	// GatheredForgiven is the part of forgiven that was finished values
	// (receives declared gather or gather-owner); GatherRepairs and
	// GatherRepairBytes count the trimmed headers of finished values the
	// gather policy repaired, and their missing bytes.
	GatheredForgiven  int64 `json:"gathered_forgiven"`
	GatherRepairs     int64 `json:"gather_repairs"`
	GatherRepairBytes int64 `json:"gather_repair_bytes"`

	// The trim-level accounting, filled when the step closes: the step's
	// span at this rank (begin_step to end_step, nanoseconds of the
	// daemon's clock), and the missing bytes of the gradient trims decided
	// while it was open that reached this rank in the first and in the
	// last fifth of that span, with the part of each forgiven.
	SpanNS             int64 `json:"span_ns"`
	FirstFifthTrimmed  int64 `json:"first_fifth_trimmed"`
	FirstFifthForgiven int64 `json:"first_fifth_forgiven"`
	LastFifthTrimmed   int64 `json:"last_fifth_trimmed"`
	LastFifthForgiven  int64 `json:"last_fifth_forgiven"`
	// The same over the step's gradient traffic, from the first gradient
	// byte or trim that reached this rank to end_step.
	TrafficSpanNS             int64 `json:"traffic_span_ns"`
	TrafficFirstFifthTrimmed  int64 `json:"traffic_first_fifth_trimmed"`
	TrafficFirstFifthForgiven int64 `json:"traffic_first_fifth_forgiven"`
	TrafficLastFifthTrimmed   int64 `json:"traffic_last_fifth_trimmed"`
	TrafficLastFifthForgiven  int64 `json:"traffic_last_fifth_forgiven"`
}

// StepsReply carries step records, oldest first.
type StepsReply struct {
	Steps []StepRecord `json:"steps"`
}

// Status describes the daemon. The backend fills Backend (and may leave
// the rest zero); the server fills the other fields.
type Status struct {
	HostID          HostID            `json:"host_id"`
	HostName        string            `json:"host_name"`
	Protocol        int               `json:"protocol"`
	Uptime          time.Duration     `json:"uptime_ns"`
	Clients         int               `json:"clients"`
	Regions         int               `json:"regions"`
	RegisteredBytes uint64            `json:"registered_bytes"`
	Flows           int               `json:"flows"`
	Backend         map[string]string `json:"backend,omitempty"`
}

// --- validation -----------------------------------------------------------

// validator is implemented by every request body: the checks that need no
// daemon state. The backend checks ownership, bounds and limits after.
type validator interface{ validate() error }

func (r *HelloReq) validate() error {
	if len(r.Versions) == 0 || len(r.Versions) > 16 {
		return errorf(CodeBadRequest, "hello lists %d versions, want 1 to 16", len(r.Versions))
	}
	if len(r.Name) > 64 {
		return errorf(CodeBadRequest, "client name of %d bytes exceeds 64", len(r.Name))
	}
	return checkJobName(r.Job)
}

// checkJobName refuses a job name longer than MaxJobName or with other
// characters than letters, digits, '.', '_', '-' and '/'.
func checkJobName(name string) error {
	if len(name) > MaxJobName {
		return errorf(CodeBadRequest, "job name of %d bytes exceeds %d", len(name), MaxJobName)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-' || r == '/') {
			return errorf(CodeBadRequest, "job name %q: only letters, digits, '.', '_', '-' and '/'", name)
		}
	}
	return nil
}

func (r *RegisterReq) validate() error {
	if r.Length == 0 {
		return errorf(CodeBadRequest, "register_memory: length must be > 0")
	}
	return nil
}

func (r *DeregisterReq) validate() error { return checkRegion(r.Region) }

func (r *FlowSpec) validate() error {
	if err := checkFlow(r.Flow); err != nil {
		return err
	}
	if r.Class < ClassGradient || r.Class > ClassOther {
		return errorf(CodeBadRequest, "create_flow: class %d is not gradient, tensor, pipeline or other", r.Class)
	}
	switch r.Entropy {
	case EntropySingle, EntropySpray, EntropyMessage:
		if r.Subflows != 0 {
			return errorf(CodeBadRequest, "create_flow: subflows %d given with entropy %v", r.Subflows, r.Entropy)
		}
	case EntropySubflows:
		if r.Subflows < 2 {
			return errorf(CodeBadRequest, "create_flow: entropy subflows needs 2 to 255 subflows, got %d", r.Subflows)
		}
	default:
		return errorf(CodeBadRequest, "create_flow: unknown entropy %d", r.Entropy)
	}
	return nil
}

func (r *DestroyFlowReq) validate() error { return checkFlow(r.Flow) }

func (r *SendReq) validate() error {
	return checkBuffer("post_send", r.Flow, r.Region, r.Length)
}

func (r *RecvReq) validate() error {
	if r.Phase != PhaseUnspecified && r.Step == 0 {
		return errorf(CodeBadRequest, "post_recv: phase %v without a step: only a step's gradient messages have a phase", r.Phase)
	}
	return checkBuffer("post_recv", r.Flow, r.Region, r.Length)
}

func (r *StepReq) validate() error {
	hasNorms := len(r.Norms) > 0
	switch {
	case r.Critical != nil && hasNorms:
		return errorf(CodeBadRequest, "begin_step %d: give critical or norms, not both", r.Step)
	case r.LRDecay && !hasNorms:
		return errorf(CodeBadRequest, "begin_step %d: lr_decay goes with norms", r.Step)
	}
	for i, n := range r.Norms {
		if !(n >= 0) || math.IsInf(n, 1) {
			return errorf(CodeBadRequest, "begin_step %d: norm %d is %v, want finite and >= 0", r.Step, i, n)
		}
	}
	return nil
}

func (r *EndStepReq) validate() error { return nil }

func (r *StepsReq) validate() error {
	if r.Limit < 0 || r.Limit > MaxStepRecords {
		return errorf(CodeBadRequest, "steps: limit %d outside 0..%d", r.Limit, MaxStepRecords)
	}
	return nil
}

func (r *emptyReq) validate() error { return nil }

func checkFlow(f FlowID) error {
	if f == 0 {
		return errorf(CodeBadRequest, "flow 0 is not a flow")
	}
	return nil
}

func checkRegion(r RegionID) error {
	if r == 0 {
		return errorf(CodeBadRequest, "region 0 is not a region")
	}
	return nil
}

func checkBuffer(op string, f FlowID, r RegionID, length uint64) error {
	if err := checkFlow(f); err != nil {
		return err
	}
	if err := checkRegion(r); err != nil {
		return err
	}
	if length == 0 {
		return errorf(CodeBadRequest, "%s: length must be > 0", op)
	}
	return nil
}

// --- enum text helpers ----------------------------------------------------

func enumString(names []string, v uint8, typ string) string {
	if int(v) < len(names) && names[v] != "" {
		return names[v]
	}
	return fmt.Sprintf("%s(%d)", typ, v)
}

func enumMarshal(names []string, v uint8, what string) ([]byte, error) {
	if int(v) < len(names) && names[v] != "" {
		return []byte(names[v]), nil
	}
	return nil, fmt.Errorf("hostapi: %s %d has no name", what, v)
}

func enumUnmarshal(names []string, b []byte, what string, dst *uint8) error {
	for i, name := range names {
		if name != "" && string(b) == name {
			*dst = uint8(i)
			return nil
		}
	}
	return fmt.Errorf("unknown %s %q", what, b)
}
