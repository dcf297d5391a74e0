package sim_test

import (
	"errors"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/sim"
	"github.com/forgive-emu/forgive/switchcore"
)

// pair is two hosts on a two-switch line: host 1 - switch 0 = switch 1 -
// host 2, the switches joined by Connect.
func pair(t *testing.T) (*sim.Sim, []*nic.Engine) {
	t.Helper()
	s := sim.New(4096)
	port := switchcore.PortConfig{Rate: 10e9, Delay: time.Microsecond, DataCap: 64 << 10, Trim: switchcore.TrimNDP}
	for i := range 2 {
		other := uint16(2 - i)
		sw, err := switchcore.New(switchcore.Config{Ports: []switchcore.PortConfig{port, port},
			Routes: map[uint16][]switchcore.PortID{uint16(i + 1): {0}, other: {1}}})
		if err != nil {
			t.Fatal(err)
		}
		s.AddSwitch(sw)
	}
	if err := s.Connect(0, 1, 1, 1); err != nil {
		t.Fatal(err)
	}
	var nics []*nic.Engine
	for i := range 2 {
		c := nic.DefaultConfig(uint16(i+1), 10e9)
		c.CC, c.Forgive = congestion.KindNone, false
		e, err := nic.New(c)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.AddHost(e, i, 0, time.Microsecond); err != nil {
			t.Fatal(err)
		}
		nics = append(nics, e)
	}
	for _, e := range [][2]int{{0, 1}, {1, 0}} {
		if err := nics[e[0]].CreateFlow(0, nic.FlowSpec{Peer: uint16(e[1] + 1), ID: 1}); err != nil {
			t.Fatal(err)
		}
	}
	return s, nics
}

// post posts a receive of n bytes at host 2 and the send at host 1.
func post(t *testing.T, s *sim.Sim, nics []*nic.Engine, wr uint64, mem []byte) {
	t.Helper()
	src, _ := nics[0].RegisterMemory(mem)
	dst, _ := nics[1].RegisterMemory(make([]byte, len(mem)))
	if err := nics[1].PostRecv(nic.RecvReq{Key: nic.FlowKey{Peer: 1, ID: 1}, WR: wr, Region: dst, Length: len(mem)}); err != nil {
		t.Fatal(err)
	}
	if err := nics[0].PostSend(s.Now(), nic.SendReq{Key: nic.FlowKey{Peer: 2, ID: 1}, WR: wr, Region: src, Length: len(mem)}); err != nil {
		t.Fatal(err)
	}
}

// A message crosses two switches joined by Connect: four packet hops per
// packet, and it arrives.
func TestConnectCarriesAcrossSwitches(t *testing.T) {
	s, nics := pair(t)
	recvd := 0
	s.OnCompletion = func(host int, c nic.Completion) {
		if c.Err != nil {
			t.Errorf("host %d: %v", host+1, c.Err)
		}
		if c.Kind == nic.WorkRecv {
			recvd++
		}
	}
	post(t, s, nics, 1, make([]byte, 40960))
	if err := s.RunUntil(func() bool { return recvd == 1 }, time.Second); err != nil {
		t.Fatal(err)
	}
	data := nics[0].Stats().TxPackets
	st := s.Stats()
	if st.PacketHops < 3*data {
		t.Errorf("%d packet hops for %d packets sent by host 1: the switch-to-switch link is not crossed", st.PacketHops, data)
	}
	for i := range 2 {
		if sent := s.Switch(i).Stats().Ports[1].Sent.Packets; sent == 0 {
			t.Errorf("switch %d sent nothing on its inter-switch port", i)
		}
	}
}

// Work posted from inside a run needs Wake: a callback that posts to an
// idle host without it leaves the host unread and the run goes idle; with
// it the second message arrives.
func TestWakeRunsWorkPostedInCallbacks(t *testing.T) {
	for _, wake := range []bool{false, true} {
		s, nics := pair(t)
		recvd := 0
		s.OnCompletion = func(host int, c nic.Completion) {
			if c.Kind == nic.WorkRecv {
				recvd++
			}
		}
		post(t, s, nics, 1, make([]byte, 8192))
		s.At(time.Millisecond, func() { // long after the first message
			post(t, s, nics, 2, make([]byte, 8192))
			if wake {
				s.Wake(0)
			}
		})
		err := s.RunUntil(func() bool { return recvd == 2 }, time.Second)
		switch {
		case wake && err != nil:
			t.Fatalf("with Wake: %v", err)
		case !wake && !errors.Is(err, sim.ErrIdle):
			t.Fatalf("without Wake: got %v, want ErrIdle (the posted send is never seen)", err)
		}
	}
}

// At runs callbacks at their time, FIFO among equal times, and a callback
// may schedule another at the same instant.
func TestAtOrder(t *testing.T) {
	s, _ := pair(t)
	var got []string
	at := func(d time.Duration, name string) {
		s.At(d, func() {
			got = append(got, name+"@"+s.Now().String())
			if name == "b" {
				s.At(s.Now(), func() { got = append(got, "b2@"+s.Now().String()) })
			}
		})
	}
	at(5*time.Microsecond, "c")
	at(2*time.Microsecond, "a")
	at(5*time.Microsecond, "d")
	at(2*time.Microsecond, "b")
	if err := s.RunUntil(func() bool { return len(got) == 5 }, time.Second); err != nil {
		t.Fatal(err)
	}
	want := "a@2µs b@2µs b2@2µs c@5µs d@5µs"
	if g := strings.Join(got, " "); g != want {
		t.Fatalf("callbacks ran as %q, want %q", g, want)
	}
	if st := s.Stats(); st.Callbacks != 5 {
		t.Fatalf("Stats().Callbacks = %d, want 5", st.Callbacks)
	}
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("At in the past did not panic")
		}
	}()
	s.At(time.Microsecond, func() {})
}

func TestWiringErrors(t *testing.T) {
	s, nics := pair(t)
	if err := s.Connect(0, 1, 1, 0); err == nil {
		t.Error("Connect of a wired port succeeded")
	}
	if err := s.Connect(0, 9, 1, 0); err == nil {
		t.Error("Connect of a port the switch lacks succeeded")
	}
	if err := s.Connect(5, 0, 1, 0); err == nil {
		t.Error("Connect of a switch that does not exist succeeded")
	}
	if _, err := s.AddHost(nics[0], 0, 0, time.Microsecond); err == nil {
		t.Error("AddHost on a wired port succeeded")
	}
	sw, _ := switchcore.New(switchcore.Config{Ports: []switchcore.PortConfig{{Rate: 1e9, DataCap: 1 << 16}}})
	i := s.AddSwitch(sw)
	if _, err := s.AddHost(nics[0], i, 0, -time.Microsecond); err == nil {
		t.Error("AddHost with a negative delay succeeded")
	}
	if err := s.Connect(i, 0, i, 0); err == nil {
		t.Error("Connect of a port to itself succeeded")
	}
}

// The simulator is an engine-level package: it imports no driver, daemon,
// lab or workload package, so every layer above can use it.
func TestSimImportsOnlyEngines(t *testing.T) {
	allowed := map[string]bool{"wire": true, "reliability": true, "congestion": true, "budget": true, "switchcore": true, "nic": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if rest, ok := strings.CutPrefix(path, "github.com/forgive-emu/forgive/"); ok && !allowed[rest] {
				t.Errorf("%s imports %s: sim may import only the engines", name, rest)
			}
			if path == "os" || path == "net" || strings.HasPrefix(path, "net/") || path == "syscall" {
				t.Errorf("%s imports %s: sim does no I/O", name, path)
			}
		}
	}
}
