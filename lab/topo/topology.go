package topo

import (
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"

	"go.yaml.in/yaml/v3"

	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/internal/yamlconf"
	"github.com/forgive-emu/forgive/trimswitchdrv"
)

// DefaultTopology is the topology the lab uses when none is named.
const DefaultTopology = "leaf-spine-2x4"

// Kind is a topology's shape.
type Kind string

// Kinds.
const (
	KindStar      Kind = "star"       // one switch, a port per host
	KindLeafSpine Kind = "leaf-spine" // leaves with hosts, every leaf cabled to every spine
)

// Placement says which leaf a rank's host sits on.
type Placement string

// Placements.
const (
	// Interleaved puts rank i on leaf i % leaves, so every edge of a ring
	// over the ranks crosses the spine: the ring all-reduce meets the
	// oversubscribed uplinks on every step.
	Interleaved Placement = "interleaved"
	// Packed fills leaf 1 with ranks 0..hosts_per_leaf-1, then leaf 2, so
	// only the ring edges between leaves cross the spine.
	Packed Placement = "packed"
)

// Topology is a fabric's shape, as written in its YAML file
// (docs/topologies.md).
type Topology struct {
	Name        string `yaml:"name"`
	Description string `yaml:"description"`
	Kind        Kind   `yaml:"kind"`

	Hosts int `yaml:"hosts"` // star: hosts on the switch

	Leaves       int `yaml:"leaves"`
	HostsPerLeaf int `yaml:"hosts_per_leaf"`
	Spines       int `yaml:"spines"`
	// Oversubscription is a leaf's host capacity over its uplink capacity:
	// uplinks carry hosts_per_leaf x host rate / oversubscription, split
	// evenly over the spines.
	Oversubscription *Ratio    `yaml:"oversubscription"`
	Placement        Placement `yaml:"placement"` // default interleaved

	// Switch overrides the profile's switch settings on every port.
	Switch *SwitchOverrides `yaml:"switch"`
	// Faults are injected on named switch egress ports.
	Faults []Fault `yaml:"faults"`
	// Jobs, when set, places two jobs on the fabric: the ranks split into
	// len(Jobs) contiguous blocks of equal size, in order, so job Jobs[0]
	// has ranks 0..N/2-1 and Jobs[1] the rest. With ranks interleaved
	// over the leaves, every leaf holds hosts of both jobs and both rings
	// cross the same uplinks. Absent: one job on every host.
	Jobs []string `yaml:"jobs"`
}

// MaxJobs is the number of jobs a topology may place.
const MaxJobs = 2

// SwitchOverrides replace the profile's switch settings. Sizes are
// relative, so a topology means the same under every profile: the buffer
// in the profile's BDPs, thresholds as fractions of the buffer.
type SwitchOverrides struct {
	BufferBDP *Fraction               `yaml:"buffer_bdp"`
	ECN       *ECNOverride            `yaml:"ecn"`
	Trim      *trimswitchdrv.TrimMode `yaml:"trim"`
	PFC       *PFCOverride            `yaml:"pfc"`
}

// ECNOverride replaces the marking ramp, or turns marking off.
type ECNOverride struct {
	Enabled  *bool    `yaml:"enabled"` // absent: true
	KMinFrac Fraction `yaml:"kmin_frac"`
	KMaxFrac Fraction `yaml:"kmax_frac"`
	PMax     Fraction `yaml:"pmax"` // absent: the profile's
}

// PFCOverride turns priority flow control on.
type PFCOverride struct {
	// Priorities default to [0], the priority of the data DSCP (0).
	Priorities  []uint8  `yaml:"priorities"`
	XOffFrac    Fraction `yaml:"xoff_frac"`    // of the data queue
	XOnFrac     Fraction `yaml:"xon_frac"`     // of the data queue; absent: 0
	HeadroomBDP Fraction `yaml:"headroom_bdp"` // absent: unlimited
}

// Fault impairs one switch egress port (one direction of a link).
type Fault struct {
	Switch    string         `yaml:"switch"`
	Port      string         `yaml:"port"`
	Loss      Fraction       `yaml:"loss"`
	DownFrom  units.Duration `yaml:"down_from"`
	DownUntil units.Duration `yaml:"down_until"`
	Jitter    units.Duration `yaml:"jitter"`
}

// Kind values decode strictly.
func (k *Kind) UnmarshalYAML(n *yaml.Node) error {
	if !scalar(n) {
		return notScalar(n)
	}
	switch v := Kind(n.Value); v {
	case KindStar, KindLeafSpine:
		*k = v
		return nil
	}
	return quoted(n, errors.New("unknown kind (want star or leaf-spine)"))
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (p *Placement) UnmarshalYAML(n *yaml.Node) error {
	if !scalar(n) {
		return notScalar(n)
	}
	switch v := Placement(n.Value); v {
	case Interleaved, Packed:
		*p = v
		return nil
	}
	return quoted(n, errors.New("unknown placement (want interleaved or packed)"))
}

// ParseTopology decodes and checks a topology. Unknown keys are errors;
// every problem names its field.
func ParseTopology(data []byte) (*Topology, error) {
	var t Topology
	if errs := yamlconf.Decode(data, &t); errs != nil {
		return nil, &Error{Kind: ErrTopology, Problems: errs}
	}
	if err := t.validate(); err != nil {
		return nil, err
	}
	return &t, nil
}

// LoadTopology reads a topology file.
func LoadTopology(file string) (*Topology, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, &Error{Kind: ErrTopology, Problems: []error{err}}
	}
	t, err := ParseTopology(data)
	return t, withFile(err, file)
}

// OpenTopology reads the topology called name from fsys, such as the
// embedded topologies.Files.
func OpenTopology(fsys fs.FS, name string) (*Topology, error) {
	data, file, err := openNamed(fsys, name, "topology")
	if err != nil {
		return nil, &Error{Kind: ErrTopology, Problems: []error{err}}
	}
	t, err := ParseTopology(data)
	return t, withFile(err, file)
}

func (t *Topology) validate() error {
	var p problems
	if t.Name == "" {
		p.add("name", "missing")
	}
	switch t.Kind {
	case KindStar:
		t.validateStar(&p)
	case KindLeafSpine:
		t.validateLeafSpine(&p)
	default:
		p.add("kind", "missing (star or leaf-spine)")
	}
	if t.Switch != nil {
		t.Switch.validate(&p)
	}
	for i := range t.Faults {
		t.Faults[i].validate(&p, fmt.Sprintf("faults[%d]", i))
	}
	t.validateJobs(&p)
	return p.err(ErrTopology)
}

func (t *Topology) validateStar(p *problems) {
	if t.Hosts < 2 {
		p.add("hosts", "%d: a star needs at least 2 hosts", t.Hosts)
	}
	for _, f := range []struct {
		name string
		set  bool
	}{
		{"leaves", t.Leaves != 0}, {"hosts_per_leaf", t.HostsPerLeaf != 0}, {"spines", t.Spines != 0},
		{"oversubscription", t.Oversubscription != nil}, {"placement", t.Placement != ""},
	} {
		if f.set {
			p.add(f.name, "only for kind leaf-spine")
		}
	}
}

func (t *Topology) validateLeafSpine(p *problems) {
	if t.Hosts != 0 {
		p.add("hosts", "only for kind star (a leaf-spine has leaves x hosts_per_leaf)")
	}
	if t.Leaves < 2 {
		p.add("leaves", "%d: a leaf-spine needs at least 2 leaves", t.Leaves)
	}
	if t.HostsPerLeaf < 1 {
		p.add("hosts_per_leaf", "%d: want at least 1", t.HostsPerLeaf)
	}
	if t.Spines < 1 {
		p.add("spines", "%d: want at least 1", t.Spines)
	}
	if t.Oversubscription == nil {
		p.add("oversubscription", `missing (such as "2:1"; "1:1" is non-blocking)`)
	}
	if t.Placement == "" {
		t.Placement = Interleaved
	}
}

func (s *SwitchOverrides) validate(p *problems) {
	if b := s.BufferBDP; b != nil && b.Num == 0 {
		p.add("switch.buffer_bdp", "must be positive")
	}
	if e := s.ECN; e != nil && (e.Enabled == nil || *e.Enabled) {
		probability(p, "switch.ecn.kmin_frac", e.KMinFrac, true)
		probability(p, "switch.ecn.kmax_frac", e.KMaxFrac, false)
		if e.KMaxFrac.Rat().Cmp(e.KMinFrac.Rat()) < 0 {
			p.add("switch.ecn.kmax_frac", "%v is below kmin_frac %v", e.KMaxFrac, e.KMinFrac)
		}
		if e.PMax.IsSet() {
			probability(p, "switch.ecn.pmax", e.PMax, false)
		}
	}
	if f := s.PFC; f != nil {
		probability(p, "switch.pfc.xoff_frac", f.XOffFrac, false)
		if f.XOnFrac.Rat().Cmp(f.XOffFrac.Rat()) > 0 {
			p.add("switch.pfc.xon_frac", "%v is above xoff_frac %v", f.XOnFrac, f.XOffFrac)
		}
		for i, prio := range f.Priorities {
			if prio > 7 {
				p.add(fmt.Sprintf("switch.pfc.priorities[%d]", i), "priority %d: want 0 to 7", prio)
			}
		}
	}
}

func (f *Fault) validate(p *problems, path string) {
	if f.Switch == "" {
		p.add(path+".switch", "missing")
	}
	if f.Port == "" {
		p.add(path+".port", "missing")
	}
	if f.Loss.IsSet() {
		probability(p, path+".loss", f.Loss, true)
	}
	if f.DownUntil < f.DownFrom {
		p.add(path+".down_until", "%v is before down_from %v", f.DownUntil, f.DownFrom)
	}
}

// validateJobs checks the job names and that the ranks split evenly.
func (t *Topology) validateJobs(p *problems) {
	if t.Jobs == nil {
		return
	}
	if len(t.Jobs) != MaxJobs {
		p.add("jobs", "%d jobs: want exactly %d names, such as [a, b]", len(t.Jobs), MaxJobs)
		return
	}
	seen := map[string]bool{}
	for i, name := range t.Jobs {
		field := fmt.Sprintf("jobs[%d]", i)
		switch {
		case !jobName(name):
			p.add(field, "%q: want 1 to 16 characters of [a-z0-9]", name)
		case seen[name]:
			p.add(field, "%q: named twice", name)
		}
		seen[name] = true
	}
	if n := t.Ranks(); n%len(t.Jobs) != 0 || n/len(t.Jobs) < 2 {
		p.add("jobs", "%d ranks do not split into %d jobs of at least 2 ranks each", n, len(t.Jobs))
	}
}

func jobName(s string) bool {
	if len(s) < 1 || len(s) > 16 {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') {
			return false
		}
	}
	return true
}

// JobRanks returns, for each of the topology's jobs, its ranks in order;
// nil for a topology of one job.
func (t *Topology) JobRanks() [][]int {
	if len(t.Jobs) == 0 {
		return nil
	}
	per := t.Ranks() / len(t.Jobs)
	out := make([][]int, len(t.Jobs))
	for j := range out {
		for k := range per {
			out[j] = append(out[j], j*per+k)
		}
	}
	return out
}

// Ranks is the number of ranks (one per host) the file describes.
func (t *Topology) Ranks() int {
	if t.Kind == KindStar {
		return t.Hosts
	}
	return t.Leaves * t.HostsPerLeaf
}

// WithRanks returns a copy of t for n ranks: a star gets n hosts, a
// leaf-spine keeps its leaves and spines and scales hosts_per_leaf, so its
// uplinks (and its oversubscription) scale with it. A count that does not
// fit is refused with what would. Zero returns t as written.
func (t *Topology) WithRanks(n int) (*Topology, error) {
	c := *t
	if n == 0 {
		return &c, nil
	}
	var p problems
	switch {
	case n > MaxHosts:
		p.add("ranks", "%d: at most %d hosts fit the address plan of one /24", n, MaxHosts)
	case t.Kind == KindStar && n < 2:
		p.add("ranks", "%d: the star %s needs at least 2", n, t.Name)
	case t.Kind == KindStar:
		c.Hosts = n
	case n%t.Leaves != 0 || n < t.Leaves:
		p.add("ranks", "%d ranks do not fit %s's %d leaves evenly: give a multiple of %d", n, t.Name, t.Leaves, t.Leaves)
	default:
		c.HostsPerLeaf = n / t.Leaves
	}
	return &c, p.err(ErrPlace)
}

// switchPorts counts the ports of every switch.
func (t *Topology) switchPorts() int {
	if t.Kind == KindStar {
		return t.Hosts
	}
	return t.Ranks() + 2*t.Leaves*t.Spines
}

// UplinkRate is the rate of each leaf-spine link for hosts at hostRate:
// hosts_per_leaf x hostRate / oversubscription / spines, to the nearest
// bit/s. Zero for a star.
func (t *Topology) UplinkRate(hostRate units.Rate) units.Rate {
	if t.Kind != KindLeafSpine || t.Oversubscription == nil {
		return 0
	}
	r := new(big.Rat).SetInt64(int64(t.HostsPerLeaf) * int64(hostRate))
	r.Quo(r, t.Oversubscription.Rat())
	r.Quo(r, new(big.Rat).SetInt64(int64(t.Spines)))
	return units.Rate(roundRat(r))
}
