package topo

import (
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/forgive-emu/forgive/collective"
	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/internal/yamlconf"
	"github.com/forgive-emu/forgive/trimswitchdrv"
)

// DefaultProfile is the profile the lab uses when none is named.
const DefaultProfile = "loopback"

// Profile is an emulation profile: a reference fabric, the emulation
// target it is scaled down to, and explicit overrides of derived values.
// docs/profiles.md documents every field and every rule.
type Profile struct {
	Name        string    `yaml:"name"`
	Description string    `yaml:"description"`
	Reference   Reference `yaml:"reference"`
	Emulation   Emulation `yaml:"emulation"`
	// Overrides pins derived values by name ("reliability.window:
	// 64KiB"); a value that depends on a pinned one is derived from it.
	Overrides Overrides `yaml:"overrides"`
	// Workload is the lab's defaults for the job a run of this profile
	// drives, where the user names none: the reading of the seed's
	// traffic the profile stands for (docs/profiles.md, "The seed
	// profiles' reading"). Empty: the lab's own defaults.
	Workload ProfileWorkload `yaml:"workload"`

	params Params
}

// ProfileWorkload is a profile's defaults for the lab's job: each field
// stands where the user gives no flag of its own.
type ProfileWorkload struct {
	// Collective is the gradient all-reduce's algorithm per dimension,
	// comma-separated as --collective takes it; empty: the flat ring.
	Collective string `yaml:"collective"`
	// Dims are the collective's logical dimensions, fastest first, as
	// --dims takes them; their product is the data-parallel group's size.
	Dims []int `yaml:"dims"`
	// Flows is how gradient messages map onto flows: persistent (one per
	// ordered pair of ranks) or message (a flow per message, as
	// --flow-per-message); empty: persistent.
	Flows string `yaml:"flows"`
}

// The values of ProfileWorkload.Flows, and of the lab's --flows.
const (
	FlowsPersistent = "persistent"
	FlowsMessage    = "message"
)

// Ranks is the data-parallel group size the defaults' dimensions need,
// or 0 when they name none.
func (w ProfileWorkload) Ranks() int {
	if len(w.Dims) == 0 {
		return 0
	}
	n := 1
	for _, d := range w.Dims {
		n *= d
	}
	return n
}

func (w *ProfileWorkload) validate(p *problems) {
	if w.Collective != "" {
		for _, name := range strings.Split(w.Collective, ",") {
			if _, err := collective.ParseAlgorithm(strings.TrimSpace(name)); err != nil {
				p.add("workload.collective", "%q: %v", w.Collective, err)
				break
			}
		}
	}
	for _, d := range w.Dims {
		if d < 1 || d > 1<<20 {
			p.add("workload.dims", "%v: every dimension needs 1 to 1048576 ranks", w.Dims)
			break
		}
	}
	if len(w.Dims) > 0 && w.Collective == "" {
		p.add("workload.dims", "%v without workload.collective: name the algorithm the dimensions run", w.Dims)
	}
	switch w.Flows {
	case "", FlowsPersistent, FlowsMessage:
	default:
		p.add("workload.flows", "%q: want %s or %s", w.Flows, FlowsPersistent, FlowsMessage)
	}
}

// Reference is the fabric whose ratios the emulation keeps: the seed's
// 400 Gb/s leaf-spine.
type Reference struct {
	LineRate    units.Rate              `yaml:"link_rate"`
	BaseRTT     units.Duration          `yaml:"base_rtt"`
	MTU         int                     `yaml:"mtu"`
	DataQueue   units.Size              `yaml:"data_queue"` // per switch port
	Trim        *trimswitchdrv.TrimMode `yaml:"trim"`
	ECN         RefECN                  `yaml:"ecn"`
	DCQCN       RefDCQCN                `yaml:"dcqcn"`
	CNPInterval units.Duration          `yaml:"cnp_interval"`
	Reliability RefReliability          `yaml:"reliability"`
}

// RefECN is the RED marking ramp of a switch port.
type RefECN struct {
	KMin units.Size `yaml:"kmin"`
	KMax units.Size `yaml:"kmax"`
	PMax Fraction   `yaml:"pmax"`
}

// RefDCQCN is DCQCN's reaction point. Rate steps are fractions of the
// link rate.
type RefDCQCN struct {
	G           Fraction       `yaml:"g"`
	AlphaTimer  units.Duration `yaml:"alpha_timer"`
	RateTimer   units.Duration `yaml:"rate_timer"`
	ByteCounter units.Size     `yaml:"byte_counter"`
	F           *int           `yaml:"f"`
	RAI         Fraction       `yaml:"rai"`
	RHAI        Fraction       `yaml:"rhai"`
	MinRate     Fraction       `yaml:"min_rate"`
	// RateReducePeriod is the shortest time between two rate cuts of a
	// flow (Mellanox's rate_reduce_monitor_period); absent, it is the
	// reference's cnp_interval, the most often an honest fabric signals.
	RateReducePeriod units.Duration `yaml:"rate_reduce_period,omitempty"`
	// Variant is the reaction point's rules: absent or "paper", the DCQCN
	// paper's; "mellanox", HPCC's ns-3 rdma-hw.cc (congestion.DCQCNMellanox),
	// where alpha_timer is the α update period, rate_reduce_period the
	// rate-decrease check's and the rate timer the only increase (so
	// byte_counter must be absent).
	Variant string `yaml:"variant,omitempty"`
	// ClampTargetRate is the mellanox variant's CLAMP_TARGET_RATE.
	ClampTargetRate bool `yaml:"clamp_target_rate,omitempty"`
}

// variant parses Variant; validate has refused what does not parse.
func (d *RefDCQCN) variant() congestion.DCQCNVariant {
	v, _ := congestion.ParseDCQCNVariant(d.Variant)
	return v
}

// The window's modes and scalings (RefReliability).
const (
	WindowGlobal    = "global"
	WindowPairBDP   = "pair-bdp"
	WindowScaleNone = "none"
	WindowScaleRate = "rate"
)

// RefReliability is the transport's window, timers and ACK coalescing.
type RefReliability struct {
	WindowBDP Fraction `yaml:"window_bdp"` // the window in BDPs
	// WindowMode is what window_bdp counts BDPs of: global (absent) the
	// profile's BDP, link rate x base RTT, for every flow; pair-bdp the
	// BDP of each host pair's path in the placed fabric, computed as
	// ASTRA-sim's ns-3 backend does (scratch/common.h: the path's
	// bottleneck rate x (its propagation delay both ways + one packet's
	// serialization on every hop one way)).
	WindowMode string `yaml:"window_mode,omitempty"`
	// WindowScale rate scales each flow's window by its DCQCN rate over
	// the line rate, as ns-3's VAR_WIN; absent or none: fixed.
	WindowScale string         `yaml:"window_scale,omitempty"`
	RTOLow      units.Duration `yaml:"rto_low"`
	RTOHigh     units.Duration `yaml:"rto_high"`
	AckEvery    units.Size     `yaml:"ack_every"`
	AckDelay    units.Duration `yaml:"ack_delay"`
}

// Emulation is what the lab actually runs.
type Emulation struct {
	LineRate units.Rate     `yaml:"link_rate"` // every host link
	BaseRTT  units.Duration `yaml:"base_rtt"`  // of the longest path, unloaded
	MTU      int            `yaml:"mtu"`
	// LinkDelay is the propagation delay of every switch egress link;
	// absent or "auto": chosen by Place per topology to meet BaseRTT.
	LinkDelay *LinkDelay `yaml:"link_delay"`
	// HopLatency is what one switch traversal costs beyond serialization
	// and propagation on this machine (process wake-ups, the forwarding
	// itself); "auto" link delays subtract it.
	HopLatency units.Duration `yaml:"hop_latency"`
	// FailAfter is forgived's fail_after: how long a flow may go without
	// progress. Default DefaultFailAfter.
	FailAfter units.Duration `yaml:"fail_after"`
	// SocketBuffer is every switch port's SO_RCVBUF and SO_SNDBUF
	// (trimswitch's socket_buffer): how long a descheduled switch may stop
	// reading before the kernel drops what arrives. Zero: the switch's
	// default (udpio.DefaultSocketBuffer).
	SocketBuffer units.Size `yaml:"socket_buffer"`
	// SpuriousRTO is every forgived's reliability.spurious_rto: a timeout
	// resends the oldest packet alone until an ACK tells a late original
	// from a lost one (docs/forgived.md, "Spurious timeouts"). Off, the
	// default, is IRN's rule, as the seed's simulation runs it.
	SpuriousRTO bool `yaml:"spurious_rto"`
}

// DefaultFailAfter is generous: a loaded two-core machine can stall a
// process for tens of milliseconds, and a flow that fails aborts the run.
const DefaultFailAfter = units.Duration(5 * time.Second)

// MTU bounds: a 64-byte payload is the least that makes sense, and a full
// datagram (40-byte header) must fit a UDP payload.
const (
	MinMTU = 64
	MaxMTU = 65535 - dataHeaderBytes
)

// Overrides pins derived values by name. It keeps each value's text and
// position; Derive parses it as the kind its name calls for.
type Overrides []Override

// Override is one pinned value.
type Override struct {
	Name, Value  string
	line, column int
}

// UnmarshalYAML reads a mapping of names to scalars, in file order.
func (o *Overrides) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return badValue(n, errors.New("want a mapping of derived value names to values"))
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !scalar(v) {
			return notScalar(v)
		}
		if seen[k.Value] {
			return badValue(v, errors.New("set twice"))
		}
		seen[k.Value] = true
		*o = append(*o, Override{Name: k.Value, Value: v.Value, line: v.Line, column: v.Column})
	}
	return nil
}

// MarshalYAML writes the mapping back.
func (o Overrides) MarshalYAML() (any, error) {
	m := make(map[string]string, len(o))
	for _, v := range o {
		m[v.Name] = v.Value
	}
	return m, nil
}

// ParseProfile decodes a profile, checks every field and derives the
// emulated parameters. Unknown keys are errors; every problem names its
// field, as in `emulation.link_rate: "10Gbs": unknown unit`.
func ParseProfile(data []byte) (*Profile, error) {
	var p Profile
	if errs := yamlconf.Decode(data, &p); errs != nil {
		return nil, &Error{Kind: ErrProfile, Problems: errs}
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	params, err := Derive(p.Reference, p.Emulation, p.Overrides)
	if err != nil {
		return nil, err
	}
	p.params = params
	return &p, nil
}

// LoadProfile reads a profile file.
func LoadProfile(file string) (*Profile, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, &Error{Kind: ErrProfile, Problems: []error{err}}
	}
	p, err := ParseProfile(data)
	return p, withFile(err, file)
}

// OpenProfile reads the profile called name ("loopback" or
// "loopback.yaml") from fsys, such as the embedded profiles.Files.
func OpenProfile(fsys fs.FS, name string) (*Profile, error) {
	data, file, err := openNamed(fsys, name, "profile")
	if err != nil {
		return nil, &Error{Kind: ErrProfile, Problems: []error{err}}
	}
	p, err := ParseProfile(data)
	return p, withFile(err, file)
}

// openNamed reads name.yaml from fsys; a missing file lists what exists.
func openNamed(fsys fs.FS, name, what string) (data []byte, file string, err error) {
	file = strings.TrimSuffix(name, ".yaml") + ".yaml"
	data, err = fs.ReadFile(fsys, file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, file, fmt.Errorf("no %s named %q (known: %s)", what, name, strings.Join(Names(fsys), ", "))
	}
	return data, file, err
}

// Names lists the YAML files of fsys without their extension, sorted.
func Names(fsys fs.FS) []string {
	matches, _ := fs.Glob(fsys, "*.yaml")
	names := make([]string, len(matches))
	for i, m := range matches {
		names[i] = strings.TrimSuffix(path.Base(m), ".yaml")
	}
	sort.Strings(names)
	return names
}

// Params returns the derived parameters.
func (p *Profile) Params() Params { return p.params }

// Derived returns every derived value, and the inputs they came from,
// as name -> printed value, for printing with results. The names are
// those of docs/profiles.md and of the profile's overrides.
func (p *Profile) Derived() map[string]string { return p.params.Derived() }

// validate checks the fields on their own; Derive checks what comes out.
func (p *Profile) validate() error {
	var probs problems
	if p.Name == "" {
		probs.add("name", "missing")
	}
	p.Reference.validate(&probs)
	p.Emulation.setDefaults()
	p.Emulation.validate(&probs)
	p.Workload.validate(&probs)
	return probs.err(ErrProfile)
}

func (r *Reference) validate(p *problems) {
	positive(p, "reference.link_rate", int64(r.LineRate))
	positive(p, "reference.base_rtt", int64(r.BaseRTT))
	checkMTU(p, "reference.mtu", r.MTU)
	positive(p, "reference.data_queue", int64(r.DataQueue))
	if r.MTU > 0 && r.DataQueue > 0 && int(r.DataQueue) < r.MTU {
		p.add("reference.data_queue", "%v does not hold one %d-byte packet", r.DataQueue, r.MTU)
	}
	if r.Trim == nil {
		p.add("reference.trim", "missing (off, arrival or ndp)")
	}
	positive(p, "reference.ecn.kmin", int64(r.ECN.KMin))
	positive(p, "reference.ecn.kmax", int64(r.ECN.KMax))
	if r.ECN.KMax < r.ECN.KMin {
		p.add("reference.ecn.kmax", "%v is below kmin %v", r.ECN.KMax, r.ECN.KMin)
	}
	if r.DataQueue > 0 && r.ECN.KMax > r.DataQueue {
		p.add("reference.ecn.kmax", "%v is above data_queue %v", r.ECN.KMax, r.DataQueue)
	}
	probability(p, "reference.ecn.pmax", r.ECN.PMax, false)
	r.DCQCN.validate(p)
	positive(p, "reference.cnp_interval", int64(r.CNPInterval))
	r.Reliability.validate(p)
}

func (d *RefDCQCN) validate(p *problems) {
	probability(p, "reference.dcqcn.g", d.G, false)
	positive(p, "reference.dcqcn.alpha_timer", int64(d.AlphaTimer))
	positive(p, "reference.dcqcn.rate_timer", int64(d.RateTimer))
	if d.RateReducePeriod < 0 {
		p.add("reference.dcqcn.rate_reduce_period", "%v: must not be negative", d.RateReducePeriod)
	}
	if d.F == nil {
		p.add("reference.dcqcn.f", "missing")
	} else if *d.F < 0 {
		p.add("reference.dcqcn.f", "%d: must not be negative", *d.F)
	}
	switch v, err := congestion.ParseDCQCNVariant(d.Variant); {
	case err != nil:
		p.add("reference.dcqcn.variant", "%q: want paper or mellanox", d.Variant)
	case v == congestion.DCQCNMellanox && d.ByteCounter != 0:
		p.add("reference.dcqcn.byte_counter", "%v: must be absent with variant mellanox (it increases on the timer only)", d.ByteCounter)
	case v != congestion.DCQCNMellanox && d.ClampTargetRate:
		p.add("reference.dcqcn.clamp_target_rate", "only the mellanox variant has it (the paper's form always clamps)")
	}
	probability(p, "reference.dcqcn.rai", d.RAI, false)
	if !d.RHAI.IsSet() {
		p.add("reference.dcqcn.rhai", "missing (a fraction of the link rate)")
	}
	probability(p, "reference.dcqcn.min_rate", d.MinRate, false)
}

func (r *RefReliability) validate(p *problems) {
	if !r.WindowBDP.IsSet() || r.WindowBDP.Num == 0 {
		p.add("reference.reliability.window_bdp", "missing or zero")
	}
	switch r.WindowMode {
	case "", WindowGlobal, WindowPairBDP:
	default:
		p.add("reference.reliability.window_mode", "%q: want %s or %s", r.WindowMode, WindowGlobal, WindowPairBDP)
	}
	switch r.WindowScale {
	case "", WindowScaleNone, WindowScaleRate:
	default:
		p.add("reference.reliability.window_scale", "%q: want %s or %s", r.WindowScale, WindowScaleNone, WindowScaleRate)
	}
	positive(p, "reference.reliability.rto_low", int64(r.RTOLow))
	positive(p, "reference.reliability.rto_high", int64(r.RTOHigh))
	if r.RTOHigh < r.RTOLow {
		p.add("reference.reliability.rto_high", "%v is below rto_low %v", r.RTOHigh, r.RTOLow)
	}
	positive(p, "reference.reliability.ack_every", int64(r.AckEvery))
	positive(p, "reference.reliability.ack_delay", int64(r.AckDelay))
}

func (e *Emulation) validate(p *problems) {
	positive(p, "emulation.link_rate", int64(e.LineRate))
	positive(p, "emulation.base_rtt", int64(e.BaseRTT))
	checkMTU(p, "emulation.mtu", e.MTU)
	if e.SocketBuffer < 0 || e.SocketBuffer > math.MaxInt32 {
		p.add("emulation.socket_buffer", "%v: want 0 (the switch's default) to %d bytes", e.SocketBuffer, math.MaxInt32)
	}
}

// setDefaults fills the optional fields: link_delay auto, fail_after
// DefaultFailAfter.
func (e *Emulation) setDefaults() {
	if e.LinkDelay == nil {
		e.LinkDelay = &LinkDelay{Auto: true}
	}
	if e.FailAfter == 0 {
		e.FailAfter = DefaultFailAfter
	}
}

func positive(p *problems, path string, v int64) {
	if v <= 0 {
		p.add(path, "missing or zero")
	}
}

func checkMTU(p *problems, path string, mtu int) {
	if mtu < MinMTU || mtu > MaxMTU {
		p.add(path, "%d: want %d to %d payload bytes", mtu, MinMTU, MaxMTU)
	}
}

// probability checks f is set and in (0, 1] (or [0, 1] when zero is ok).
func probability(p *problems, path string, f Fraction, zeroOK bool) {
	switch {
	case !f.IsSet():
		p.add(path, "missing")
	case f.Num == 0 && !zeroOK:
		p.add(path, "must be positive")
	case f.Num > f.Den:
		p.add(path, "%v: want at most 1", f)
	}
}
