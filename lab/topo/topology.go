package topo

import (
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"os"
	"slices"
	"strings"

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
	// KindFatTree is a three-tier k-ary fat tree (Al-Fares et al.): k pods
	// of k/2 edge and k/2 aggregation switches, (k/2)^2 cores, k^3/4
	// hosts, every link at the host rate (non-blocking).
	KindFatTree Kind = "fat-tree"
	// KindRail is a rail-optimized fabric, as large GPU clusters are
	// cabled: nodes of `rails` ranks, rank g of every node on a leaf of
	// rail g, every leaf cabled to every spine.
	KindRail Kind = "rail-optimized"
)

// kindNames lists the kinds for an error.
const kindNames = "star, leaf-spine, fat-tree or rail-optimized"

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

	// Hosts is a star's hosts on the switch; on a fat tree, the hosts
	// placed (absent: k^3/4, every slot).
	Hosts int `yaml:"hosts"`

	// K is a fat tree's switch radix: even, 4 or more.
	K int `yaml:"k"`

	// Nodes and Rails shape a rail-optimized fabric: Nodes nodes of Rails
	// ranks each; rank r is rank r % Rails of node r / Rails and sits on
	// rail r % Rails. NodesPerLeaf nodes share each rail leaf (absent:
	// every node, one leaf per rail).
	Nodes        int `yaml:"nodes"`
	Rails        int `yaml:"rails"`
	NodesPerLeaf int `yaml:"nodes_per_leaf"`

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
	case KindStar, KindLeafSpine, KindFatTree, KindRail:
		*k = v
		return nil
	}
	return quoted(n, errors.New("unknown kind (want "+kindNames+")"))
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
// embedded topologies.Files, or a topology by parameter (NamedTopology).
func OpenTopology(fsys fs.FS, name string) (*Topology, error) {
	data, file, err := TopologyData(fsys, name)
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
	case KindFatTree:
		t.validateFatTree(&p)
	case KindRail:
		t.validateRail(&p)
	default:
		p.add("kind", "missing ("+kindNames+")")
	}
	t.onlyFor(&p)
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
}

// onlyFor refuses a shape field the topology's kind does not have.
func (t *Topology) onlyFor(p *problems) {
	if !slices.Contains([]Kind{KindStar, KindLeafSpine, KindFatTree, KindRail}, t.Kind) {
		return // the kind's own problem says enough
	}
	for _, f := range []struct {
		name  string
		set   bool
		kinds []Kind
	}{
		{"hosts", t.Hosts != 0, []Kind{KindStar, KindFatTree}},
		{"leaves", t.Leaves != 0, []Kind{KindLeafSpine}},
		{"hosts_per_leaf", t.HostsPerLeaf != 0, []Kind{KindLeafSpine}},
		{"spines", t.Spines != 0, []Kind{KindLeafSpine, KindRail}},
		{"oversubscription", t.Oversubscription != nil, []Kind{KindLeafSpine, KindRail}},
		{"placement", t.Placement != "", []Kind{KindLeafSpine, KindFatTree}},
		{"k", t.K != 0, []Kind{KindFatTree}},
		{"nodes", t.Nodes != 0, []Kind{KindRail}},
		{"rails", t.Rails != 0, []Kind{KindRail}},
		{"nodes_per_leaf", t.NodesPerLeaf != 0, []Kind{KindRail}},
	} {
		if !f.set || slices.Contains(f.kinds, t.Kind) {
			continue
		}
		names := make([]string, len(f.kinds))
		for i, k := range f.kinds {
			names[i] = string(k)
		}
		p.add(f.name, "only for kind %s", strings.Join(names, " or "))
	}
}

// MaxFatTreeK is the largest fat tree's radix whose k^3/4 hosts the
// simulator places (MaxSimHosts).
const MaxFatTreeK = 50

func (t *Topology) validateFatTree(p *problems) {
	if t.K < 4 || t.K%2 != 0 || t.K > MaxFatTreeK {
		p.add("k", "%d: want an even radix from 4 to %d", t.K, MaxFatTreeK)
		return
	}
	if full := t.K * t.K * t.K / 4; t.Hosts != 0 && (t.Hosts < 2 || t.Hosts > full) {
		p.add("hosts", "%d: a fat tree of k = %d holds 2 to %d hosts", t.Hosts, t.K, full)
	}
	if t.Placement == "" {
		t.Placement = Interleaved
	}
}

func (t *Topology) validateRail(p *problems) {
	if t.Rails < 1 {
		p.add("rails", "%d: want at least 1 (the ranks of a node, one rail each)", t.Rails)
	}
	if t.Nodes < 1 {
		p.add("nodes", "%d: want at least 1", t.Nodes)
	}
	if t.Rails*t.Nodes < 2 && t.Rails >= 1 && t.Nodes >= 1 {
		p.add("nodes", "%d nodes of %d ranks: want at least 2 ranks", t.Nodes, t.Rails)
	}
	if t.NodesPerLeaf < 0 || t.NodesPerLeaf > 0 && t.Nodes > 0 && t.Nodes%t.NodesPerLeaf != 0 {
		p.add("nodes_per_leaf", "%d: want a divisor of nodes (%d)", t.NodesPerLeaf, t.Nodes)
	}
	if t.Spines < 1 {
		p.add("spines", "%d: want at least 1", t.Spines)
	}
	if t.Oversubscription == nil {
		p.add("oversubscription", `missing (such as "2:1"; "1:1" is non-blocking)`)
	}
}

// Uplinks is the number of uplinks of a switch hosts are cabled to (a
// leaf, a fat tree's edge), each at UplinkRate; zero for a star.
func (t *Topology) Uplinks() int {
	switch t.Kind {
	case KindLeafSpine, KindRail:
		return t.Spines
	case KindFatTree:
		return t.K / 2
	}
	return 0
}

// RailLeaves is a rail-optimized fabric's number of leaves per rail.
func (t *Topology) RailLeaves() int {
	if t.NodesPerLeaf == 0 {
		return 1
	}
	return t.Nodes / t.NodesPerLeaf
}

// nodesPerLeaf is a rail leaf's hosts.
func (t *Topology) nodesPerLeaf() int {
	if t.NodesPerLeaf == 0 {
		return t.Nodes
	}
	return t.NodesPerLeaf
}

func (t *Topology) validateLeafSpine(p *problems) {
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
	switch t.Kind {
	case KindStar:
		return t.Hosts
	case KindFatTree:
		if t.Hosts != 0 {
			return t.Hosts
		}
		return t.K * t.K * t.K / 4
	case KindRail:
		return t.Nodes * t.Rails
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
	case n > MaxSimHosts:
		p.add("ranks", "%d: at most %d hosts fit any placement (16-bit host ids)", n, MaxSimHosts)
	case t.Kind == KindStar && n < 2:
		p.add("ranks", "%d: the star %s needs at least 2", n, t.Name)
	case t.Kind == KindStar:
		c.Hosts = n
	case t.Kind == KindFatTree && (n < 2 || n > t.K*t.K*t.K/4):
		p.add("ranks", "%d: the fat tree %s (k = %d) holds 2 to %d hosts", n, t.Name, t.K, t.K*t.K*t.K/4)
	case t.Kind == KindFatTree:
		c.Hosts = n
	case t.Kind == KindRail && (n%t.Rails != 0 || n < 2):
		p.add("ranks", "%d ranks do not fill %s's nodes of %d ranks: give a multiple of %d", n, t.Name, t.Rails, t.Rails)
	case t.Kind == KindRail && t.NodesPerLeaf > 0 && (n/t.Rails)%t.NodesPerLeaf != 0:
		p.add("ranks", "%d ranks make %d nodes, which do not fill %s's leaves of %d nodes: give a multiple of %d",
			n, n/t.Rails, t.Name, t.NodesPerLeaf, t.Rails*t.NodesPerLeaf)
	case t.Kind == KindRail:
		c.Nodes = n / t.Rails
	case n%t.Leaves != 0 || n < t.Leaves:
		p.add("ranks", "%d ranks do not fit %s's %d leaves evenly: give a multiple of %d", n, t.Name, t.Leaves, t.Leaves)
	default:
		c.HostsPerLeaf = n / t.Leaves
	}
	return &c, p.err(ErrPlace)
}

// switchPorts counts the ports of every switch.
func (t *Topology) switchPorts() int {
	switch t.Kind {
	case KindStar:
		return t.Hosts
	case KindFatTree:
		// every edge has its hosts and k/2 uplinks; aggregations k ports,
		// cores k
		h := t.K / 2
		return t.Ranks() + t.K*h*h + t.K*h*t.K + h*h*t.K
	case KindRail:
		return t.Ranks() + 2*t.Rails*t.RailLeaves()*t.Spines
	}
	return t.Ranks() + 2*t.Leaves*t.Spines
}

// UplinkRate is the rate of each leaf-spine link for hosts at hostRate:
// hosts_per_leaf x hostRate / oversubscription / spines, to the nearest
// bit/s; a rail leaf's hosts are its nodes_per_leaf. A fat tree's every
// link runs at the host rate. Zero for a star.
func (t *Topology) UplinkRate(hostRate units.Rate) units.Rate {
	if t.Kind == KindFatTree {
		return hostRate // non-blocking: k/2 hosts, k/2 uplinks
	}
	if t.Kind == KindStar || t.Oversubscription == nil {
		return 0
	}
	perLeaf := t.HostsPerLeaf
	if t.Kind == KindRail {
		perLeaf = t.nodesPerLeaf()
	}
	r := new(big.Rat).SetInt64(int64(perLeaf) * int64(hostRate))
	r.Quo(r, t.Oversubscription.Rat())
	r.Quo(r, new(big.Rat).SetInt64(int64(t.Spines)))
	return units.Rate(roundRat(r))
}
