package sim_test

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/fabric"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/sim"
)

var update = flag.Bool("update", false, "rewrite the golden transcripts in testdata/")

// scenario is a small fabric described in one place: a star of hosts, a
// 3:1 gradient incast into host 1 inside one open non-critical step.
type scenario struct {
	name    string
	hosts   int
	size    int
	forgive bool
	cc      congestion.Kind
}

// run plays the scenario and returns its transcript: every completion in
// the order it happened, then the step's ledger and the switch's totals.
func (sc scenario) run(t *testing.T) string {
	t.Helper()
	cfg := fabric.Config{Routes: map[uint16][]fabric.PortID{}, Seed: 3}
	for i := 0; i < sc.hosts; i++ {
		cfg.Ports = append(cfg.Ports, fabric.PortConfig{Rate: 1e9, Delay: 2 * time.Microsecond, DataCap: 64 << 10,
			Trim: fabric.TrimNDP, ECN: fabric.ECNConfig{Enabled: true, KMin: 16 << 10, KMax: 48 << 10, PMax: 0.2}})
		cfg.Routes[uint16(i+1)] = []fabric.PortID{fabric.PortID(i)}
	}
	sw, err := fabric.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := sim.New(4096)
	si := s.AddSwitch(sw)
	nics := []*nic.Engine{nil}
	for h := 1; h <= sc.hosts; h++ {
		c := nic.DefaultConfig(uint16(h), 1e9)
		c.Sender.Window = 64 << 10
		c.Sender.RTOLow, c.Sender.RTOHigh = 400*time.Microsecond, 2*time.Millisecond
		c.Forgive, c.CC, c.Seed = sc.forgive, sc.cc, 5
		e, err := nic.New(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddHost(e, si, fabric.PortID(h-1), 2*time.Microsecond); err != nil {
			t.Fatal(err)
		}
		nics = append(nics, e)
	}
	var b strings.Builder
	recvs := 0
	s.OnCompletion = func(host int, c nic.Completion) {
		var forgiven uint32
		for _, r := range c.Forgiven {
			forgiven += r.Len()
		}
		fmt.Fprintf(&b, "%10.3fus host %d %s flow %v wr %d len %d forgiven %d err %v\n",
			float64(s.Now())/1e3, host+1, c.Kind, c.Flow, c.WR, c.Len, forgiven, c.Err)
		if c.Kind == nic.WorkRecv {
			recvs++
		}
	}
	nc := false
	if _, err := nics[1].BeginStep(1, &nc, nil, false, int64((sc.hosts-1)*sc.size)); err != nil {
		t.Fatal(err)
	}
	for h := 2; h <= sc.hosts; h++ {
		id := uint32(h)
		for _, e := range [][2]int{{h, 1}, {1, h}} {
			if err := nics[e[0]].CreateFlow(0, nic.FlowSpec{Peer: uint16(e[1]), ID: id, Class: nic.ClassGradient}); err != nil {
				t.Fatal(err)
			}
		}
		dst, _ := nics[1].RegisterMemory(make([]byte, sc.size))
		src, _ := nics[h].RegisterMemory(make([]byte, sc.size))
		if err := nics[1].PostRecv(nic.FlowKey{Peer: uint16(h), ID: id}, uint64(h), dst, 0, sc.size, 1); err != nil {
			t.Fatal(err)
		}
		if err := nics[h].PostSend(0, nic.FlowKey{Peer: 1, ID: id}, uint64(h), src, 0, sc.size); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.RunUntil(func() bool { return recvs == sc.hosts-1 }, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	nics[1].EndStep(1)
	r, _ := nics[1].StepRecord(1)
	fmt.Fprintf(&b, "step 1: p %g expected %d budget %d received %d forgiven %d outstanding %d invariant %v\n",
		r.P, r.Expected, r.Budget, r.Received, r.Forgiven, r.Outstanding, r.InvariantHeld)
	st := sw.Stats()
	var trimmed, marked uint64
	for _, p := range st.Ports {
		for _, c := range p.Classes {
			trimmed += c.Trimmed.Packets
			marked += c.Marked.Packets
		}
	}
	fmt.Fprintf(&b, "switch: trimmed %d marked %d\n", trimmed, marked)
	return b.String()
}

var scenarios = []scenario{
	{name: "incast-forgive", hosts: 4, size: 1 << 20, forgive: true, cc: congestion.KindDCQCN},
	{name: "incast-dcqcn", hosts: 4, size: 1 << 20, forgive: false, cc: congestion.KindDCQCN},
	{name: "incast-nocc", hosts: 4, size: 1 << 20, forgive: false, cc: congestion.KindNone},
}

// The simulator is deterministic: a scenario's transcript is a pure
// function of its configuration and seeds, compared against a golden file
// (go test ./sim -update rewrites them after an intended change).
func TestGoldenTranscripts(t *testing.T) {
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			got := sc.run(t)
			if again := sc.run(t); again != got {
				t.Fatal("two runs of the same scenario differ: the simulation is not deterministic")
			}
			path := filepath.Join("testdata", sc.name+".txt")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (run with -update to create it)", err)
			}
			if got != string(want) {
				t.Fatalf("transcript differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
			}
			if !strings.Contains(got, "invariant true") {
				t.Fatal("the step's FORGIVE invariant did not hold")
			}
		})
	}
}
