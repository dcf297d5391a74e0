package scenario

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/reliability"
	"github.com/forgive-emu/forgive/sim"
	"github.com/forgive-emu/forgive/switchcore"
)

// Player runs a scenario's directives in order on one fabric.
type Player struct {
	nicArgs []Arg
	build   *sim.Build
	port    switchcore.PortConfig
	mtu     int
	entropy nic.Entropy

	recvsPosted, recvsDone int
	comps                  []string
	printComps             bool
	src                    []byte // read by every send
	srcRegion              map[int]nic.RegionID
	sink                   []byte // every unverified receive lands here
	dstRegion              map[int]nic.RegionID
	verify                 bool
	pending                []pendingRecv
	bad                    int // verified receives whose bytes differ
	nextWR                 uint64
	// Wall, when set, is told how long each run directive took on the wall
	// clock; the package itself never reads it.
	Wall func(d Directive, run func() error) error
	// Workers, when above 1, is the goroutines every fabric the player
	// builds runs on (sim.Sim.SetWorkers); the outputs are the same.
	Workers int
}

type pendingRecv struct {
	host int
	key  nic.FlowKey
	wr   uint64
	mem  []byte
}

// NewPlayer returns a player with nothing built yet.
func NewPlayer() *Player {
	return &Player{srcRegion: map[int]nic.RegionID{}, dstRegion: map[int]nic.RegionID{}, verify: true}
}

// Sim returns the simulation built by the fabric directive, or nil.
func (p *Player) Sim() *sim.Sim {
	if p.build == nil {
		return nil
	}
	return p.build.Sim
}

// Build returns the fabric built by the fabric directive, or nil.
func (p *Player) Build() *sim.Build { return p.build }

// Traffic returns the flow counters of every host of the fabric, summed
// (zero before the fabric directive).
func (p *Player) Traffic() Traffic {
	if p.build == nil {
		return Traffic{}
	}
	return TrafficOf(p.build.NICs)
}

// Do runs one directive and returns what it prints.
func (p *Player) Do(d Directive) (string, error) {
	out, err := p.do(d)
	if err != nil {
		return "", fmt.Errorf("%w: line %d: %s: %w", ErrScenario, d.Line, d.Cmd, err)
	}
	return out, nil
}

func (p *Player) do(d Directive) (string, error) {
	a := args(slices.Clone(d.Args))
	need := func() error {
		if p.build == nil {
			return errors.New("no fabric yet (a fabric directive comes first)")
		}
		return nil
	}
	switch d.Cmd {
	case "nic":
		p.nicArgs = d.Args // read when the fabric is built, with its rate
		return "", nil
	case "fabric":
		return p.fabric(a)
	}
	if err := need(); err != nil {
		return "", err
	}
	switch d.Cmd {
	case "step":
		return "", p.step(a)
	case "flow":
		return "", p.flow(a)
	case "send":
		return "", p.send(a)
	case "matrix":
		return p.matrix(a, d.Input)
	case "ring":
		return p.ring(a)
	case "run":
		run := func() error { return p.runErr(a) }
		var err error
		if p.Wall != nil {
			err = p.Wall(d, run)
		} else {
			err = run()
		}
		out := strings.Join(p.comps, "")
		p.comps = p.comps[:0]
		if err != nil {
			return "", err
		}
		return out + fmt.Sprintf("done at %s: %d receives\n", us(p.build.Sim.Now()), p.recvsDone), nil
	case "endstep":
		return p.endStep(a)
	case "switches":
		return p.switches(a)
	case "traffic":
		return p.traffic(a)
	case "stats":
		st := p.build.Sim.Stats()
		return fmt.Sprintf("instants %d events %d packet-hops %d engine-runs %d engine-calls %d callbacks %d\n",
			st.Instants, st.Events, st.PacketHops, st.EngineRuns, st.EngineCalls, st.Callbacks), a.unused()
	}
	return "", fmt.Errorf("unknown command (want nic, fabric, step, flow, send, matrix, ring, run, endstep, switches, traffic or stats)")
}

// fabric builds the topology with its links and the hosts' NICs.
func (p *Player) fabric(a args) (string, error) {
	if p.build != nil {
		return "", errors.New("the fabric is already built")
	}
	var t sim.Topology
	var err error
	switch kind := a.str("kind", "star"); kind {
	case "star":
		t, err = sim.Star(a.int("hosts", 4))
	case "leaf-spine":
		t, err = sim.LeafSpine(a.int("leaves", 2), a.int("hosts-per-leaf", 4), a.int("spines", 2))
	case "fat-tree":
		k := a.int("k", 4)
		t, err = sim.FatTree(k, a.int("hosts", k*k*k/4))
	default:
		return "", fmt.Errorf("kind %q: want star, leaf-spine or fat-tree", kind)
	}
	if err != nil {
		return "", err
	}
	rate := a.rate("rate", 1e9)
	p.mtu = int(a.size("mtu", reliability.DefaultMTU))
	p.port = switchcore.PortConfig{Rate: rate, Delay: a.dur("delay", 2*time.Microsecond), DataCap: int(a.size("buffer", 64<<10)),
		Overhead: int(a.size("overhead", 0))}
	if p.port.Trim, err = switchcore.ParseTrimMode(a.str("trim", "ndp")); err != nil {
		return "", err
	}
	if ecn := a.str("ecn", "off"); ecn != "off" {
		parts := strings.Split(ecn, ":")
		if len(parts) != 3 {
			return "", fmt.Errorf("ecn %q: want off or kmin:kmax:pmax", ecn)
		}
		kmin, err1 := units.ParseSize(parts[0])
		kmax, err2 := units.ParseSize(parts[1])
		pmax, err3 := strconv.ParseFloat(parts[2], 64)
		if err := errors.Join(err1, err2, err3); err != nil {
			return "", fmt.Errorf("ecn %q: %w", ecn, err)
		}
		p.port.ECN = switchcore.ECNConfig{Enabled: true, KMin: int(kmin), KMax: int(kmax), PMax: pmax}
	}
	seed := uint64(a.int("seed", 1))
	hostDelay := a.dur("host-delay", p.port.Delay)
	if err := a.unused(); err != nil {
		return "", err
	}
	newNIC, err := p.nicFactory(rate)
	if err != nil {
		return "", err
	}
	b, err := sim.BuildFabric(sim.FabricSpec{Topology: t, MTU: p.mtu, Port: p.port, Seed: seed, HostDelay: hostDelay, NewNIC: newNIC})
	if err != nil {
		return "", err
	}
	p.build = b
	b.Sim.SetWorkers(p.Workers)
	p.printComps = true
	b.Sim.OnCompletion = p.onCompletion
	return fmt.Sprintf("%s: %d switches, %d hosts, %d links\n", t.Name, len(t.Switches), len(t.Hosts), len(t.Links)), nil
}

// nicFactory reads the nic directive's arguments.
func (p *Player) nicFactory(rate units.Rate) (func(uint16) (*nic.Engine, error), error) {
	a := args(slices.Clone(p.nicArgs))
	rate = a.rate("rate", rate)
	base := nic.DefaultConfig(0, rate)
	base.MTU = p.mtu
	if a.has("window") {
		base.Sender.Window = int(a.size("window", 0))
	}
	if a.has("rto") {
		lo, hi, ok := strings.Cut(a.str("rto", ""), ":")
		l, err1 := units.ParseDuration(lo)
		h, err2 := units.ParseDuration(hi)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("nic rto %q: want low:high durations", a.str("rto", ""))
		}
		base.Sender.RTOLow, base.Sender.RTOHigh = l, h
	}
	base.Forgive = a.bool("forgive", base.Forgive)
	if err := base.SetCC(a.str("cc", "dcqcn")); err != nil {
		return nil, fmt.Errorf("nic cc: %w", err)
	}
	if err := base.SetRecovery(a.str("mode", "sr")); err != nil {
		return nil, fmt.Errorf("nic mode: %w", err)
	}
	ent, err := nic.ParseEntropy(a.str("entropy", "single"))
	if err != nil {
		return nil, err
	}
	p.entropy = ent
	base.ECN = a.bool("ecn", base.ECN)
	base.Seed = uint64(a.int("seed", 1))
	if a.has("overhead") {
		base.Overhead = int(a.size("overhead", 0))
	}
	base.NoPayload = !a.bool("payload", true)
	if err := a.unused(); err != nil {
		return nil, fmt.Errorf("nic: %w", err)
	}
	return func(id uint16) (*nic.Engine, error) {
		c := base
		c.Host = id
		return nic.New(c)
	}, nil
}

func (p *Player) host(a args, key string) (int, error) {
	h := a.int(key, 0)
	if h < 1 || h > len(p.build.NICs) {
		return 0, fmt.Errorf("%s=%d: want a host id 1..%d", key, h, len(p.build.NICs))
	}
	return h, nil
}

func (p *Player) step(a args) error {
	h, err := p.host(a, "host")
	if err != nil {
		return err
	}
	id := budget.StepID(a.int("step", 1))
	crit := a.bool("critical", false)
	exp := a.size("expected", 0)
	if err := a.unused(); err != nil {
		return err
	}
	_, err = p.build.NICs[h-1].BeginStep(p.build.Sim.Now(), nic.StepReq{Step: id, Critical: &crit, Expected: exp})
	return err
}

func (p *Player) flow(a args) error {
	x, err := p.host(a, "a")
	if err != nil {
		return err
	}
	y, err := p.host(a, "b")
	if err != nil {
		return err
	}
	return p.makeFlow(x, y, uint32(a.int("id", 1)), a)
}

func (p *Player) makeFlow(x, y int, id uint32, a args) error {
	class, err := nic.ParseClass(a.str("class", "gradient"))
	if err != nil {
		return err
	}
	ent := p.entropy
	if a.has("entropy") {
		if ent, err = nic.ParseEntropy(a.str("entropy", "")); err != nil {
			return err
		}
	}
	if err := a.unused(); err != nil {
		return err
	}
	now := p.build.Sim.Now()
	for _, e := range [][2]int{{x, y}, {y, x}} {
		if err := p.build.NICs[e[0]-1].CreateFlow(now, nic.FlowSpec{Peer: uint16(e[1]), ID: id, Class: class, Entropy: ent}); err != nil {
			return err
		}
	}
	return nil
}

func (p *Player) send(a args) error {
	from, err := p.host(a, "from")
	if err != nil {
		return err
	}
	to, err := p.host(a, "to")
	if err != nil {
		return err
	}
	id := uint32(a.int("flow", 1))
	size := a.size("size", 0)
	step := budget.StepID(a.int("step", 0))
	wr := uint64(a.int("wr", 0))
	if err := a.unused(); err != nil {
		return err
	}
	return p.post(from, to, id, int(size), step, wr)
}

// post posts a receive at to and the matching send at from.
func (p *Player) post(from, to int, id uint32, size int, step budget.StepID, wr uint64) error {
	if size < 0 || size > 1<<30 {
		return fmt.Errorf("size %d: want 0..1GiB", size)
	}
	if p.verify && p.build.Sim.PayloadFree() {
		return errors.New("a verified receive needs payloads: verify=false, or no payload=false on the nic directive")
	}
	if wr == 0 {
		p.nextWR++
		wr = p.nextWR
	}
	if len(p.src) < size {
		p.src = make([]byte, size)
		// A payload-free NIC never reads its send memory (nic.Config
		// NoPayload), so there the pattern would be written for nothing:
		// 20 MB of stores and page faults for the paper-scale matrices.
		if !p.build.Sim.PayloadFree() {
			for i := range p.src {
				p.src[i] = byte(i*7 + i>>8)
			}
		}
		clear(p.srcRegion)
	}
	sn, dn := p.build.NICs[from-1], p.build.NICs[to-1]
	src, ok := p.srcRegion[from]
	if !ok {
		var err error
		if src, err = sn.RegisterMemory(p.src); err != nil {
			return err
		}
		p.srcRegion[from] = src
	}
	var mem []byte
	var dst nic.RegionID
	if p.verify {
		mem = make([]byte, size)
		var err error
		if dst, err = dn.RegisterMemory(mem); err != nil {
			return err
		}
	} else {
		// the bytes are not checked: every receive of every host lands in
		// one buffer, so a paper-scale matrix needs no gigabytes
		if len(p.sink) < size {
			p.sink = make([]byte, size)
			clear(p.dstRegion)
		}
		mem = p.sink
		if r, ok := p.dstRegion[to]; ok {
			dst = r
		} else {
			var err error
			if dst, err = dn.RegisterMemory(mem); err != nil {
				return err
			}
			p.dstRegion[to] = dst
		}
	}
	if err := dn.PostRecv(nic.RecvReq{Key: nic.FlowKey{Peer: uint16(from), ID: id}, WR: wr, Region: dst, Length: size, Step: step}); err != nil {
		return err
	}
	if err := sn.PostSend(p.build.Sim.Now(), nic.SendReq{Key: nic.FlowKey{Peer: uint16(to), ID: id}, WR: wr, Region: src, Length: size}); err != nil {
		return err
	}
	p.recvsPosted++
	if p.verify {
		p.pending = append(p.pending, pendingRecv{host: to - 1, key: nic.FlowKey{Peer: uint16(from), ID: id}, wr: wr, mem: mem[:size]})
	}
	p.build.Sim.Wake(from - 1)
	p.build.Sim.Wake(to - 1)
	return nil
}

// matrix reads htsim's connection-matrix lines ("src->dst", hosts from 0)
// and starts one flow and one message of size per line.
func (p *Player) matrix(a args, input []string) (string, error) {
	size := int(a.size("size", 0))
	p.verify = a.bool("verify", p.verify)
	p.printComps = a.bool("print", p.printComps)
	id0 := uint32(a.int("id", 1))
	fa := a.sub("class", "entropy")
	if err := a.unused(); err != nil {
		return "", err
	}
	n, hops := 0, 0
	for _, l := range input {
		f := strings.Fields(l)
		if len(f) == 0 || f[0] == "Nodes" || f[0] == "Connections" {
			continue
		}
		s, d, ok := strings.Cut(f[0], "->")
		x, err1 := strconv.Atoi(s)
		y, err2 := strconv.Atoi(d)
		if !ok || err1 != nil || err2 != nil {
			return "", fmt.Errorf("matrix line %q: want src->dst", l)
		}
		if x == y || x < 0 || y < 0 || x >= len(p.build.NICs) || y >= len(p.build.NICs) {
			return "", fmt.Errorf("matrix line %q: want two distinct hosts 0..%d", l, len(p.build.NICs)-1)
		}
		id := id0 + uint32(n)
		if err := p.makeFlow(x+1, y+1, id, args(slices.Clone(fa))); err != nil {
			return "", err
		}
		if err := p.post(x+1, y+1, id, size, 0, 0); err != nil {
			return "", err
		}
		hops += p.build.Topo.Hops(x+1, y+1)
		n++
	}
	if n == 0 {
		return "", errors.New("no src->dst lines")
	}
	return fmt.Sprintf("%d flows of %d bytes, %.3f links per path\n", n, size, float64(hops)/float64(n)), nil
}

// ring starts a ring exchange: every host sends size bytes to the next,
// the last to the first, all in one step when step is given.
func (p *Player) ring(a args) (string, error) {
	size := int(a.size("size", 0))
	step := budget.StepID(a.int("step", 0))
	id := uint32(a.int("id", 1))
	fa := a.sub("class", "entropy")
	if err := a.unused(); err != nil {
		return "", err
	}
	n := len(p.build.NICs)
	if n < 2 {
		return "", errors.New("a ring needs 2 hosts or more")
	}
	if step != 0 {
		crit := false
		for h := range n {
			if _, err := p.build.NICs[h].BeginStep(p.build.Sim.Now(), nic.StepReq{Step: step, Critical: &crit, Expected: int64(size)}); err != nil {
				return "", err
			}
		}
	}
	for h := 1; h <= n; h++ {
		if err := p.makeFlow(h, h%n+1, id, args(slices.Clone(fa))); err != nil {
			return "", err
		}
	}
	for h := 1; h <= n; h++ {
		if err := p.post(h, h%n+1, id, size, step, 0); err != nil {
			return "", err
		}
	}
	return fmt.Sprintf("%d flows of %d bytes\n", n, size), nil
}

func (p *Player) onCompletion(host int, c nic.Completion) {
	var forgiven uint32
	for _, r := range c.Forgiven {
		forgiven += r.Len()
	}
	if c.Kind == nic.WorkRecv {
		p.recvsDone++
		if p.verify {
			p.check(host, c, forgiven)
		}
	}
	if p.printComps {
		p.comps = append(p.comps, fmt.Sprintf("%10.3fus host %d %s flow %v wr %d len %d forgiven %d err %v\n",
			float64(p.build.Sim.Now())/1e3, host+1, c.Kind, c.Flow, c.WR, c.Len, forgiven, c.Err))
	}
}

// check compares a verified receive with what was sent: byte-exact, or
// zero where forgiven.
func (p *Player) check(host int, c nic.Completion, forgiven uint32) {
	for i, r := range p.pending {
		if r.host != host || r.key != c.Flow || r.wr != c.WR {
			continue
		}
		p.pending = slices.Delete(p.pending, i, i+1)
		if c.Err != nil {
			return
		}
		want := slices.Clone(p.src[:len(r.mem)])
		for _, f := range c.Forgiven {
			clear(want[f.Start:f.End])
		}
		if string(want) != string(r.mem) {
			p.bad++
			p.comps = append(p.comps, fmt.Sprintf("host %d flow %v wr %d: received bytes differ from the sent ones (forgiven %d)\n",
				host+1, c.Flow, c.WR, forgiven))
		}
		return
	}
}

func (p *Player) runErr(a args) error {
	limit := a.dur("limit", 10*time.Second)
	p.printComps = a.bool("print", p.printComps)
	if err := a.unused(); err != nil {
		return err
	}
	return p.build.Sim.RunUntil(func() bool { return p.recvsDone >= p.recvsPosted }, p.build.Sim.Now()+limit)
}

func (p *Player) endStep(a args) (string, error) {
	h, err := p.host(a, "host")
	if err != nil {
		return "", err
	}
	id := budget.StepID(a.int("step", 1))
	if err := a.unused(); err != nil {
		return "", err
	}
	e := p.build.NICs[h-1]
	e.EndStep(p.build.Sim.Now(), id)
	r, ok := e.StepRecord(id)
	if !ok {
		return "", fmt.Errorf("host %d has no step %d", h, id)
	}
	out := fmt.Sprintf("step %d: p %g expected %d budget %d received %d forgiven %d outstanding %d invariant %v\n",
		r.Step, r.P, r.Expected, r.Budget, r.Received, r.Forgiven, r.Outstanding, r.InvariantHeld)
	if err := e.CheckStep(id); err != nil {
		return "", err
	}
	return out, nil
}

func (p *Player) switches(a args) (string, error) {
	if err := a.unused(); err != nil {
		return "", err
	}
	var trimmed, marked, dropped, sent uint64
	s := p.build.Sim
	for i := range s.NumSwitches() {
		st := s.Switch(i).Stats()
		for _, pt := range st.Ports {
			sent += pt.Sent.Packets
			for _, c := range pt.Classes {
				trimmed += c.Trimmed.Packets
				marked += c.Marked.Packets
				for _, d := range c.Drops {
					dropped += d.Packets
				}
			}
			for _, d := range pt.RxDrops {
				dropped += d.Packets
			}
		}
	}
	return fmt.Sprintf("switch: trimmed %d marked %d dropped %d sent %d\n", trimmed, marked, dropped, sent), nil
}

func (p *Player) traffic(a args) (string, error) {
	if err := a.unused(); err != nil {
		return "", err
	}
	t := p.Traffic()
	return fmt.Sprintf("data %d (new %d retx %d) probes %d acks %d nacks %d cnps %d trimmed-recv %d tx %d rx %d\n",
		t.DataPackets, t.DataPackets-t.RetxPackets, t.RetxPackets, t.Probes, t.AcksRecv, t.NacksRecv, t.CNPsRecv,
		t.TrimmedRecv, t.TxPackets, t.RxPackets), nil
}

func us(d time.Duration) string { return fmt.Sprintf("%.3fus", float64(d)/1e3) }
