// Package results is the lab's output format: what one run of a policy
// with one seed measured, the summary of a policy across seeds, and the
// time series behind the plots. docs/results.md documents every field.
// It holds data only, so the runner, the report writers and external tools
// share one definition, and the one function of it, SweepID: a sweep's id
// from its options, which the runner, the workers and the merge derive
// alike.
package results

import (
	"slices"
	"time"
)

// File is the whole of results.json.
//
// Two fields depend on the machine and the moment, never on the run's
// inputs: Created and Wall. Everything else is a function of the inputs;
// with the sim placement it is the same, byte for byte, on every run with
// the same inputs.
type File struct {
	Version int       `json:"version"` // 1
	Created time.Time `json:"created"` // wall clock
	// Sweep names the sweep the file holds, or the shard of it, with the
	// options that define it.
	Sweep Sweep `json:"sweep"`
	// Placement is what ran the fabric: loopback or netns (real processes
	// and packets, real time), or sim (the same engines in one process, on
	// a virtual clock).
	Placement string `json:"placement"`
	// Seal is the real placements' security sublayer: "on" (every packet
	// sealed, a fresh key per run) or "off"; empty for sim, which has no
	// sockets.
	Seal string `json:"seal,omitempty"`
	// Scale multiplies the workload's bytes per step and its compute
	// phase (1: as derived).
	Scale float64 `json:"scale"`
	// ModelParallel is when the workload's tensor- and pipeline-parallel
	// exchanges ran: after-compute (beside the all-reduce) or
	// with-compute (during the compute phase, the all-reduce after).
	ModelParallel string `json:"model_parallel"`
	// TensorParallel is where the tensor-parallel exchanges ran: "local"
	// off the fabric (--tensor-parallel local), absent on it.
	TensorParallel string `json:"tensor_parallel,omitempty"`
	// Entropy is every flow's path policy (single, spray, subflows or message),
	// with the subflow count under subflows.
	Entropy  string `json:"entropy"`
	Subflows uint8  `json:"subflows,omitempty"`
	// Collective is the gradient all-reduce's schedule and its shape;
	// absent for the flat ring over every rank, the lab's first
	// schedule, so that results from before it read as they did.
	Collective *CollectiveShape `json:"collective,omitempty"`
	Wall       Wall             `json:"wall"` // wall clock
	Profile    Profile          `json:"profile"`
	Topology   string           `json:"topology"`
	Ranks      int              `json:"ranks"`
	Steps      int              `json:"steps"`
	Seeds      []uint64         `json:"seeds"`
	Policies   []string         `json:"policies"` // in the order given; the first is the baseline
	Runs       []Run            `json:"runs"`
	Summary    []Summary        `json:"summary"`
}

// Sweep is the ordered list of runs a lab's options define: for each
// seed 1..Seeds, each policy in order. A shard of it holds the runs k
// (0-based, in that order) with k mod Count == Index-1.
type Sweep struct {
	// ID is a hash of Options: two files of one sweep share it, two
	// sweeps with other options do not.
	ID string `json:"id"`
	// Shard is the slice of the sweep the file holds; absent: all of it.
	Shard *Shard `json:"shard,omitempty"`
	// Options are every input that shapes the runs' results, with the
	// defaults filled in and the workload's sizes as the runs used them.
	Options SweepOptions `json:"options"`
}

// Shard is shard Index of Count, 1-based.
type Shard struct {
	Index int `json:"index"`
	Count int `json:"count"`
}

// SweepOptions are the inputs of a sweep: the lab's options that shape
// its results, without those that only say where and how fast it ran
// (output directory, jobs, shard, binaries, networks, progress). A
// topology, profile or norms trace is named as given and identified by
// the SHA-256 of its contents, so a file edited between two shards makes
// them two sweeps.
type SweepOptions struct {
	Topology       string   `json:"topology"`
	TopologySHA256 string   `json:"topology_sha256"`
	Profile        string   `json:"profile"`
	ProfileSHA256  string   `json:"profile_sha256"`
	Ranks          int      `json:"ranks"`
	Steps          int      `json:"steps"`
	Policies       []string `json:"policies"`
	Seeds          int      `json:"seeds"`
	Placement      string   `json:"placement"`
	Scale          float64  `json:"scale"`
	Capture        bool     `json:"capture"`
	// The workload, its sizes and compute phase scaled as the runs used
	// them.
	GradientBytes int    `json:"gradient_bytes"`
	ComputeNS     int64  `json:"compute_ns"`
	TPBytes       int    `json:"tp_bytes"`
	PPBytes       int    `json:"pp_bytes"`
	BurstBytes    int    `json:"burst_bytes"`
	BurstSteps    []int  `json:"burst_steps"`
	Critical      []int  `json:"critical"`
	Norms         string `json:"norms,omitempty"`
	NormsSHA256   string `json:"norms_sha256,omitempty"`
	Entropy       string `json:"entropy"`
	Subflows      uint8  `json:"subflows,omitempty"`
	ModelParallel string `json:"model_parallel"`
	// TensorParallel is "local" when the tensor-parallel exchanges ran
	// off the fabric (--tensor-parallel local); absent when they ran on
	// it, the default, so that sweeps from before the option keep their
	// ids.
	TensorParallel string `json:"tensor_parallel,omitempty"`
	// The gradient all-reduce's schedule (docs/lab.md, "Collectives"),
	// each absent when unset (the flat ring over every rank), so that
	// sweeps from before the options keep their ids.
	Collective     string `json:"collective,omitempty"`
	Dims           []int  `json:"dims,omitempty"`
	TP             int    `json:"tp,omitempty"`
	TPCollective   string `json:"tp_collective,omitempty"`
	Splits         int    `json:"splits,omitempty"`
	Window         int    `json:"window,omitempty"`
	FlowPerMessage bool   `json:"flow_per_message,omitempty"`
	// SeedSizes is how a seed profile's sizes were derived: "ring" for
	// the flat ring's sizes under another collective; empty under the
	// run's own reading (the default).
	SeedSizes     string `json:"seed_sizes,omitempty"`
	RankPlacement string `json:"rank_placement,omitempty"`
}

// Profile is the emulation profile a run used, with its derived values.
type Profile struct {
	Name    string            `json:"name"`
	Derived map[string]string `json:"derived"` // every derived parameter, printed as used
}

// Wall is how long the lab took on the machine that ran it: the only
// part of the results besides Created that depends on that machine.
type Wall struct {
	Seconds float64   `json:"seconds"`
	Runs    []WallRun `json:"runs"`
}

// WallRun is one run's wall time; with the sim placement also the
// simulator's events per wall second.
type WallRun struct {
	Policy        string  `json:"policy"`
	Seed          uint64  `json:"seed"`
	Seconds       float64 `json:"seconds"`
	EventsPerS    float64 `json:"events_per_s,omitempty"`
	PacketHopsPer float64 `json:"packet_hops_per_s,omitempty"`
}

// Run is one policy with one seed.
type Run struct {
	Policy   string `json:"policy"`
	Seed     uint64 `json:"seed"`
	Profile  string `json:"profile"`
	Topology string `json:"topology"`

	TrainingTimeS               float64 `json:"training_time_s"`
	AllReduceMedianCriticalS    float64 `json:"allreduce_median_critical_s"`
	AllReduceMedianNonCriticalS float64 `json:"allreduce_median_noncritical_s"`
	GradientBytesGivenUpFrac    float64 `json:"gradient_bytes_given_up_frac"`
	RetransmittedBytesFrac      float64 `json:"retransmitted_bytes_frac"`
	TrimmedBytesFrac            float64 `json:"trimmed_bytes_frac"`
	CNPs                        uint64  `json:"cnps"`
	RateCuts                    uint64  `json:"rate_cuts"`
	RTOs                        uint64  `json:"rtos"`
	// SocketDrops counts the datagrams the kernel dropped at the fabric's
	// sockets (every switch port and host, /proc/net/udp's drops) because
	// a daemon did not read them in time: losses outside the emulated
	// fabric, which the transport sees as congestion losses and RTOs.
	// Absent where the lab cannot read them (the netns placement) and in
	// the simulator, which has no sockets.
	SocketDrops *int64 `json:"socket_drops,omitempty"`
	// SealedPackets and SealRefusals are what the hosts sealed, and the
	// sealed packets they refused (every refused_* counter), over the run;
	// zero with the sublayer off.
	SealedPackets            uint64  `json:"sealed_packets,omitempty"`
	SealRefusals             uint64  `json:"seal_refusals,omitempty"`
	FlagChangesPerExemptFlow float64 `json:"flag_changes_per_exempt_flow"`
	ExemptFlows              int     `json:"exempt_flows"`
	ReObeyedFrac             float64 `json:"reobeyed_frac"` // exempt flows that obeyed again
	ReObeyMeanS              float64 `json:"reobey_mean_s"` // mean length of those periods
	TPCompletionMedianS      float64 `json:"tp_completion_median_s"`
	BudgetInvariantHeld      bool    `json:"budget_invariant_held"`   // every step, every rank
	NonGradientBytesExact    bool    `json:"nongradient_bytes_exact"` // tensor, pipeline, burst
	GradientSumsExact        bool    `json:"gradient_sums_exact"`     // every element no loss touched
	// ReplicasIdentical: every rank ended every step with the same
	// gradient, bit for bit (a payload run of a policy that promises it;
	// Checks names replicas_identical then). ReplicaMismatches counts the
	// elements, over the steps, the ranks did not all hold alike, in any
	// payload run.
	ReplicasIdentical bool  `json:"replicas_identical"`
	ReplicaMismatches int64 `json:"replica_mismatches"`
	// UnbudgetedBytes are the gradient bytes that reached a rank before
	// it opened their step, over every rank (the daemons' counter
	// unbudgeted_bytes); the check budget_opened_in_time wants 0.
	UnbudgetedBytes int64 `json:"unbudgeted_bytes"`
	// GatheredForgivenBytes is the part of ForgivenBytes that was finished
	// values (all-gather receives); GatherRepairs and GatherRepairBytes
	// count the trimmed headers of finished values the gather policy
	// repaired, and their missing bytes.
	GatheredForgivenBytes int64  `json:"gathered_forgiven_bytes"`
	GatherRepairs         int64  `json:"gather_repairs"`
	GatherRepairBytes     int64  `json:"gather_repair_bytes"`
	Gather                string `json:"gather,omitempty"` // the daemons' gather policy, when not forgive
	// MessageAccountingHeld: every message completed with its length,
	// received or forgiven, and nothing was forgiven outside gradients.
	MessageAccountingHeld bool `json:"message_accounting_held"`
	// PayloadFree: the run carried no payload bytes (the simulator's
	// payload-free mode), so the two byte checks above did not run and
	// read false; Checks names every check that ran.
	PayloadFree bool     `json:"payload_free"`
	Checks      []string `json:"checks"`

	GradientBytes int64 `json:"gradient_bytes"` // expected over all ranks and steps
	ForgivenBytes int64 `json:"forgiven_bytes"` // by receivers
	ShedBytes     int64 `json:"shed_bytes"`     // by senders (shedding baselines)
	DataBytes     int64 `json:"data_bytes"`     // payload bytes put on the wire, retransmissions included
	RetxBytes     int64 `json:"retx_bytes"`     // of which retransmissions
	TrimmedBytes  int64 `json:"trimmed_bytes"`  // payload bytes switches trimmed
	// TrimmedBytesByRole splits TrimmedBytes by the role of the egress
	// port that trimmed (host: a leaf's port to its host; uplink: a
	// leaf's port to a spine; downlink: a spine's port to a leaf).
	TrimmedBytesByRole map[string]int64 `json:"trimmed_bytes_by_role,omitempty"`
	// Decisions counts the receivers' FORGIVE decisions on trimmed
	// gradient headers over every rank and step (zero for policies that
	// do not forgive).
	Decisions      Decisions `json:"decisions"`
	ElementsTested int64     `json:"elements_tested"` // gradient elements whose sum was checked

	// The seed's trim-level accounting, over every rank and step: the
	// missing bytes of eligible gradient trims that reached a receiver in
	// the first and in the last fifth of the step's span at that rank,
	// and the bytes of each forgiven, with the forgiven share (0 when
	// nothing was trimmed). Only FORGIVE's policies ask the ledger, so
	// the others report zero.
	FirstFifthTrimmedBytes  int64   `json:"first_fifth_trimmed_bytes"`
	FirstFifthForgivenBytes int64   `json:"first_fifth_forgiven_bytes"`
	FirstFifthForgivenFrac  float64 `json:"first_fifth_forgiven_frac"`
	LastFifthTrimmedBytes   int64   `json:"last_fifth_trimmed_bytes"`
	LastFifthForgivenBytes  int64   `json:"last_fifth_forgiven_bytes"`
	LastFifthForgivenFrac   float64 `json:"last_fifth_forgiven_frac"`
	// The same over each step's gradient traffic at each rank (from its
	// first gradient byte or trim to the all-reduce's completion), which
	// leaves the compute phase out of the first fifth.
	TrafficFirstFifthTrimmedBytes  int64   `json:"traffic_first_fifth_trimmed_bytes"`
	TrafficFirstFifthForgivenBytes int64   `json:"traffic_first_fifth_forgiven_bytes"`
	TrafficFirstFifthForgivenFrac  float64 `json:"traffic_first_fifth_forgiven_frac"`
	TrafficLastFifthTrimmedBytes   int64   `json:"traffic_last_fifth_trimmed_bytes"`
	TrafficLastFifthForgivenBytes  int64   `json:"traffic_last_fifth_forgiven_bytes"`
	TrafficLastFifthForgivenFrac   float64 `json:"traffic_last_fifth_forgiven_frac"`

	// Placement and Scale are the file's, repeated so a run read on its
	// own says what produced it.
	Placement string  `json:"placement"`
	Scale     float64 `json:"scale"`
	// SimEvents and SimPacketHops count the simulator's work (sim
	// placement only): events run, and packets moved over a link.
	SimEvents     uint64 `json:"sim_events,omitempty"`
	SimPacketHops uint64 `json:"sim_packet_hops,omitempty"`

	Steps []Step `json:"steps"`
	// Jobs is set on a run of a topology of two jobs (a policy pair such
	// as forgive+dcqcn): each job's own figures, in the topology's job
	// order, an idle job's too. The run's other fields are then its first
	// running job's (job a's, or job b's when a is idle), the fabric's
	// switch counters and series excepted, which are the whole fabric's.
	Jobs []JobRun `json:"jobs,omitempty"`
	// LossPattern summarizes where the run's forgiveness fell, beside its
	// uniform control; the ranges themselves are in the file it names
	// (docs/loss-patterns.md).
	LossPattern *LossPattern `json:"loss_pattern,omitempty"`
	// PatternFile is that file's contents, from the run to the writer of
	// the results; never in results.json.
	PatternFile []byte `json:"-"`
	// Series are sampled during the run for the plots.
	Rate      []RatePoint  `json:"rate,omitempty"`      // one sender's rate
	Occupancy []QueuePoint `json:"occupancy,omitempty"` // the bottleneck queue
	// Signals are the fabric's trims and the hosts' congestion signals,
	// cumulative, at the same instants as Occupancy (the simulator only).
	Signals []SignalPoint `json:"signals,omitempty"`

	// Labels and thresholds of the sampled series, drawn on the plots.
	RateFlow        string  `json:"rate_flow,omitempty"`         // which sender's flow Rate follows
	OccupancyPort   string  `json:"occupancy_port,omitempty"`    // which switch port Occupancy samples
	QueueMarkBytes  float64 `json:"queue_mark_bytes,omitempty"`  // that queue's ECN marking threshold
	QueueLimitBytes float64 `json:"queue_limit_bytes,omitempty"` // that data queue's capacity; it trims above
}

// JobRun is one job of a run of two jobs on one fabric.
type JobRun struct {
	Job    string `json:"job"`    // the topology's name for it: a, b
	Policy string `json:"policy"` // its policy, or idle: its hosts ran nothing
	Ranks  []int  `json:"ranks"`  // the fabric's ranks it ran on
	// The job's own figures, as the run's fields of the same names for a
	// run of one job; zero for an idle job.
	TrainingTimeS float64   `json:"training_time_s"`
	StepTimesS    []float64 `json:"step_times_s"`
	// AllReduceMedianS and AllReduceP99S are over every rank's all-reduce
	// of every step; TPMedianS over every tensor-parallel message.
	AllReduceMedianS float64 `json:"allreduce_median_s"`
	AllReduceP99S    float64 `json:"allreduce_p99_s"`
	TPMedianS        float64 `json:"tp_median_s"`
	RTOs             uint64  `json:"rtos"`
	CNPs             uint64  `json:"cnps"`
	RateCuts         uint64  `json:"rate_cuts"`
	ExemptFlows      int     `json:"exempt_flows"`
	DataBytes        int64   `json:"data_bytes"`
	RetxBytes        int64   `json:"retx_bytes"`
	ForgivenBytes    int64   `json:"forgiven_bytes"`
	ShedBytes        int64   `json:"shed_bytes"`
	// TrimmedBytes are the payload bytes trimmed on the way to the job's
	// receivers (their flows' trimmed_bytes).
	TrimmedBytes int64 `json:"trimmed_bytes"`
	// HostTxBytes is every byte the job's hosts sent, acknowledgements
	// included: 0 for an idle job.
	HostTxBytes int64 `json:"host_tx_bytes"`
	// StartS and EndS are when the job ran, in seconds from the start of
	// the run's jobs (the simulator's virtual time; on real processes
	// the lab's clock, so the span includes the workload's setup): the
	// two jobs of a pair overlap. 0 for an idle job.
	StartS float64 `json:"start_s,omitempty"`
	EndS   float64 `json:"end_s,omitempty"`
	// BudgetInvariantHeld: the FORGIVE invariants held on every step at
	// every rank of the job; ChecksHeld: every check of the job's held
	// (Run.ChecksHeld over its own figures). True for an idle job.
	BudgetInvariantHeld bool `json:"budget_invariant_held"`
	ChecksHeld          bool `json:"checks_held"`
}

// IsIdle reports whether the job ran nothing.
func (j *JobRun) IsIdle() bool { return j.Policy == "idle" }

// Decisions are the ledger's verdicts on trimmed gradient headers, summed
// over ranks and steps: each trim was forgiven or refused for one reason
// (a refused range stays outstanding and is retransmitted), and late
// trims reached a closed step.
type Decisions struct {
	Trims           int64 `json:"trims"`
	Forgives        int64 `json:"forgives"`
	VestingRefusals int64 `json:"vesting_refusals"`
	BudgetRefusals  int64 `json:"budget_refusals"`
	DrawRefusals    int64 `json:"draw_refusals"`
	LateTrims       int64 `json:"late_trims"`
}

// Step is one training step of a run.
type Step struct {
	Step       int       `json:"step"`
	Critical   bool      `json:"critical"`
	TimeS      float64   `json:"time_s"`      // compute and communication
	AllReduceS []float64 `json:"allreduce_s"` // per rank
	TPS        []float64 `json:"tp_s,omitempty"`
	Forgiven   int64     `json:"forgiven"`
	Budget     int64     `json:"budget"` // summed over ranks
	Shed       int64     `json:"shed"`
	Invariant  bool      `json:"invariant_held"`
	// The trim-level accounting of the step, summed over ranks.
	FirstFifthTrimmed  int64 `json:"first_fifth_trimmed"`
	FirstFifthForgiven int64 `json:"first_fifth_forgiven"`
	LastFifthTrimmed   int64 `json:"last_fifth_trimmed"`
	LastFifthForgiven  int64 `json:"last_fifth_forgiven"`
	// The same over the step's gradient traffic, summed over ranks.
	TrafficFirstFifthTrimmed  int64 `json:"traffic_first_fifth_trimmed"`
	TrafficFirstFifthForgiven int64 `json:"traffic_first_fifth_forgiven"`
	TrafficLastFifthTrimmed   int64 `json:"traffic_last_fifth_trimmed"`
	TrafficLastFifthForgiven  int64 `json:"traffic_last_fifth_forgiven"`
	// The step's phases, in seconds on the clock of the run's samples
	// (the simulator's virtual time): it began at StartS, its compute
	// phase ended at ComputeEndS, the first and the last rank began its
	// all-reduce at AllReduceFirstS and AllReduceLastS (after the compute
	// phase and, when the model-parallel exchanges overlap it, after the
	// rank's own), and the last rank finished at EndS. Absent from
	// results written before they were recorded.
	StartS          float64 `json:"start_s,omitempty"`
	ComputeEndS     float64 `json:"compute_end_s,omitempty"`
	AllReduceFirstS float64 `json:"allreduce_first_s,omitempty"`
	AllReduceLastS  float64 `json:"allreduce_last_s,omitempty"`
	EndS            float64 `json:"end_s,omitempty"`
}

// HasPhases reports whether the step recorded its phases.
func (s *Step) HasPhases() bool { return s.EndS > 0 }

// SignalPoint is a sample of the run's cumulative congestion signals: the
// payload bytes the switches trimmed so far, by the role of the port that
// trimmed them (a leaf's host port, its uplink, a spine's downlink), and
// the CNPs the ranks' flows received and the rate cuts they applied, summed
// over the flows that exist at the sample.
type SignalPoint struct {
	TS              float64 `json:"t_s"`
	TrimmedHost     int64   `json:"trimmed_host,omitempty"`
	TrimmedUplink   int64   `json:"trimmed_uplink,omitempty"`
	TrimmedDownlink int64   `json:"trimmed_downlink,omitempty"`
	CNPs            uint64  `json:"cnps,omitempty"`
	RateCuts        uint64  `json:"rate_cuts,omitempty"`
}

// Trimmed is the sample's trimmed bytes over every role.
func (p SignalPoint) Trimmed() int64 { return p.TrimmedHost + p.TrimmedUplink + p.TrimmedDownlink }

// RatePoint is a sample of one sender's rate.
type RatePoint struct {
	TS     float64 `json:"t_s"`
	BPS    float64 `json:"bps"`
	Exempt bool    `json:"exempt"`
}

// QueuePoint is a sample of the bottleneck queue.
type QueuePoint struct {
	TS    float64 `json:"t_s"`
	Bytes float64 `json:"bytes"`
}

// Summary is one policy across seeds.
type Summary struct {
	Policy string `json:"policy"`
	Seeds  int    `json:"seeds"`
	// TrainingTimeChange is (policy - baseline) / baseline of the mean
	// training time, per seed and its range; negative is a cut.
	TrainingTimeChangeMin float64   `json:"training_time_change_min"`
	TrainingTimeChangeMax float64   `json:"training_time_change_max"`
	TrainingTimeChange    []float64 `json:"training_time_change"`
	GivenUpMin            float64   `json:"gradient_bytes_given_up_frac_min"`
	GivenUpMax            float64   `json:"gradient_bytes_given_up_frac_max"`
	AllReduceNonCritical  float64   `json:"allreduce_median_noncritical_s"`
	AllReduceCritical     float64   `json:"allreduce_median_critical_s"`
	RetransmittedFrac     float64   `json:"retransmitted_bytes_frac"`
	TrimmedFrac           float64   `json:"trimmed_bytes_frac"`
	InvariantHeld         bool      `json:"budget_invariant_held"`
	NonGradientExact      bool      `json:"nongradient_bytes_exact"`

	// The seed of each TrainingTimeChange entry, and the other figures the
	// report's tables print (docs/results.md says how each is computed).
	TrainingTimeChangeSeeds  []uint64  `json:"training_time_change_seeds"`
	TrainingTimeMeanS        float64   `json:"training_time_mean_s"`
	RetransmittedFracMin     float64   `json:"retransmitted_bytes_frac_min"`
	RetransmittedFracMax     float64   `json:"retransmitted_bytes_frac_max"`
	TrimmedFracMin           float64   `json:"trimmed_bytes_frac_min"`
	TrimmedFracMax           float64   `json:"trimmed_bytes_frac_max"`
	CNPs                     float64   `json:"cnps_mean"`
	RateCuts                 float64   `json:"rate_cuts_mean"`
	RTOs                     float64   `json:"rtos_mean"`
	TPCompletionMedianS      float64   `json:"tp_completion_median_s"`
	TPCompletionChange       []float64 `json:"tp_completion_change"` // per seed, like TrainingTimeChange
	TPCompletionChangeMin    float64   `json:"tp_completion_change_min"`
	TPCompletionChangeMax    float64   `json:"tp_completion_change_max"`
	ExemptFlows              float64   `json:"exempt_flows_mean"`
	FlagChangesPerExemptFlow float64   `json:"flag_changes_per_exempt_flow"`
	ReObeyedFrac             float64   `json:"reobeyed_frac"`
	ReObeyMeanS              float64   `json:"reobey_mean_s"`
	GradientSumsExact        bool      `json:"gradient_sums_exact"`
	// The byte checks above are over the runs that made them; PayloadFree:
	// some run had no bytes to check. MessageAccountingHeld is over all.
	MessageAccountingHeld bool `json:"message_accounting_held"`
	PayloadFree           bool `json:"payload_free"`

	// The lab's own noise (docs/lab.md, "How many seeds a claim needs").
	// A change's mean is the mean of its per-seed changes. Noise is the
	// policy's own run-to-run variation, the sample standard deviation
	// over the mean of its per-seed values, from NoiseRuns values; with
	// fewer than two it is unknown and 0. Margin is two standard errors
	// of the mean change (stats.go, changeMargin), 0 for the baseline and
	// when the baseline's noise is unknown. WithinNoise is set when the
	// mean change is no larger than its margin: it cannot be told from
	// run-to-run variation.
	TrainingTimeChangeMean   float64 `json:"training_time_change_mean"`
	TrainingTimeChangeMargin float64 `json:"training_time_change_margin"`
	TrainingTimeWithinNoise  bool    `json:"training_time_within_noise"`
	TrainingTimeNoise        float64 `json:"training_time_noise"`
	TrainingTimeNoiseRuns    int     `json:"training_time_noise_runs"`
	TPCompletionChangeMean   float64 `json:"tp_completion_change_mean"`
	TPCompletionChangeMargin float64 `json:"tp_completion_change_margin"`
	TPCompletionWithinNoise  bool    `json:"tp_completion_within_noise"`
	TPCompletionNoise        float64 `json:"tp_completion_noise"`
	TPCompletionNoiseRuns    int     `json:"tp_completion_noise_runs"`
}

// AccountingHeld reports whether the run's message accounting held. A
// results.json written before the check was named (no Checks) checked it
// as part of its byte checks.
func (r *Run) AccountingHeld() bool { return r.MessageAccountingHeld || r.Checks == nil }

// ChecksHeld reports whether every check the run made held: the budget's
// invariants and the message accounting always, the byte checks unless
// the run was payload-free.
func (r *Run) ChecksHeld() bool {
	return r.BudgetInvariantHeld && r.AccountingHeld() && r.UnbudgetedBytes == 0 &&
		(r.PayloadFree || r.NonGradientBytesExact && r.GradientSumsExact) &&
		(r.PayloadFree || r.ReplicasIdentical || !slices.Contains(r.Checks, "replicas_identical"))
}

// LossPattern is a run's loss pattern in figures: the burstiness of the
// forgiven ranges (Pattern) and of its uniform control (Control), which
// has the same forgiven bytes at every rank in every step, placed
// uniformly at random over the rank's receives of the step.
type LossPattern struct {
	// File is the pattern's .npz, beside results.json.
	File string `json:"file"`
	// ControlUnitBytes is the control's range length: the pattern's most
	// common range length (a trimmed packet's payload).
	ControlUnitBytes int64      `json:"control_unit_bytes"`
	Pattern          Burstiness `json:"pattern"`
	Control          Burstiness `json:"control"`
}

// Burstiness is the shape of one set of forgiven ranges.
type Burstiness struct {
	Ranges int64 `json:"ranges"`
	Bytes  int64 `json:"bytes"`
	// Runs are the maximal runs of forgiven bytes in one rank's flat
	// gradient tensor in one step (adjacent or overlapping ranges of both
	// phases merged): their number, mean and median length, and the
	// byte-weighted median (half the forgiven bytes lie in runs at least
	// this long); RunHistogram[k] counts the runs of 2^k to 2^(k+1)-1
	// bytes.
	Runs               int64   `json:"runs"`
	RunMeanBytes       float64 `json:"run_mean_bytes"`
	RunMedianBytes     int64   `json:"run_median_bytes"`
	RunByteMedianBytes int64   `json:"run_byte_median_bytes"`
	RunMaxBytes        int64   `json:"run_max_bytes"`
	RunHistogram       []int64 `json:"run_histogram"`
	// MessageCorrelation is the Pearson correlation, across the ranks of
	// one step, of their forgiven fractions of each ring message (round),
	// averaged over pairs of ranks and over steps: near 1 when every rank
	// loses in the same rounds. StepCorrelation is the same of the ranks'
	// per-step fractions across steps (the control's equals the
	// pattern's by construction). Both are 0 when undefined (a rank or
	// step with no variation).
	MessageCorrelation float64 `json:"message_correlation"`
	StepCorrelation    float64 `json:"step_correlation"`
	// SharedFrac is the share of the forgiven (step, tensor byte) pairs
	// that were forgiven at two or more ranks in that step.
	SharedFrac float64 `json:"shared_frac"`
	// TopStepsFrac is the share of the forgiven bytes on the tenth of the
	// steps (TopSteps, at least one) that forgave the most; the control's
	// equals the pattern's by construction.
	TopSteps     int     `json:"top_steps"`
	TopStepsFrac float64 `json:"top_steps_frac"`
}

// CollectiveShape is what the dry run prints and results.json records of
// the gradient all-reduce's schedule: who sends how much to whom, and the
// time the busiest link needs for it at its rate.
type CollectiveShape struct {
	Schedule  string `json:"schedule"` // workload.Collective's name
	Groups    int    `json:"groups"`   // data-parallel groups
	GroupSize int    `json:"group_size"`
	// Phases are the schedule's phases in order (collective.Send.Phase):
	// each one's largest fan-in (the distinct senders one rank receives
	// from in the phase) and the most bytes a rank receives in it.
	Phases []PhaseShape `json:"phases"`
	// MaxFanIn is the largest fan-in of any phase; Messages the most
	// messages a rank sends per step; SentBytes and ReceivedBytes the most
	// a rank sends and receives per step.
	MaxFanIn      int `json:"max_fan_in"`
	Messages      int `json:"messages"`
	SentBytes     int `json:"sent_bytes"`
	ReceivedBytes int `json:"received_bytes"`
	// IdealNS is a lower bound on the all-reduce's time: the bytes the
	// busiest link carries in a step over its rate (a host's link, or a
	// leaf's uplinks together), dependencies and congestion ignored;
	// Bottleneck names that link.
	IdealNS    int64  `json:"ideal_ns"`
	Bottleneck string `json:"bottleneck"`
}

// PhaseShape is one phase of a schedule.
type PhaseShape struct {
	Phase         int    `json:"phase"`
	Name          string `json:"name"` // "reduce-scatter dim 0 (direct)"
	FanIn         int    `json:"fan_in"`
	ReceivedBytes int    `json:"received_bytes"`
}
