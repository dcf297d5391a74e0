package sim

import (
	"container/heap"
	"errors"
	"fmt"
	"time"

	"github.com/forgive-emu/forgive/fabric"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/wire"
)

// Errors of a run.
var (
	ErrTimeout  = errors.New("sim: time limit reached")
	ErrIdle     = errors.New("sim: nothing left to do")
	ErrLivelock = errors.New("sim: engines keep asking to run at the same instant")
)

// maxStepsPerInstant bounds the steps at one virtual instant: engines that
// keep asking to run without time moving are a bug, not a workload.
const maxStepsPerInstant = 100000

// endpoint is where a link delivers: a host, or a switch port.
type endpoint struct {
	host int // -1 for a switch
	sw   int
	port fabric.PortID
}

// Host is one simulated host.
type Host struct {
	NIC    *nic.Engine
	uplink endpoint      // the switch port its link enters
	delay  time.Duration // propagation delay of its uplink
}

type arrival struct {
	at  time.Duration
	seq uint64 // FIFO among equal times, for determinism
	to  endpoint
	buf []byte
	tos uint8
}

type arrivals []arrival

func (a arrivals) Len() int { return len(a) }
func (a arrivals) Less(i, j int) bool {
	if a[i].at != a[j].at {
		return a[i].at < a[j].at
	}
	return a[i].seq < a[j].seq
}
func (a arrivals) Swap(i, j int) { a[i], a[j] = a[j], a[i] }
func (a *arrivals) Push(x any)   { *a = append(*a, x.(arrival)) }
func (a *arrivals) Pop() any {
	old := *a
	x := old[len(old)-1]
	*a = old[:len(old)-1]
	return x
}

// Sim is a fabric of hosts and switches on a virtual clock.
type Sim struct {
	now      time.Duration
	hosts    []*Host
	switches []*fabric.Switch
	// peer[sw][port] is what switch sw's port is wired to.
	peer    [][]endpoint
	queue   arrivals
	seq     uint64
	free    [][]byte
	outputs []fabric.Output
	bufSize int

	// OnCompletion, when set, sees every completion of every host.
	OnCompletion func(host int, c nic.Completion)
	// OnStep, when set, runs after every event time with the current time.
	OnStep func(now time.Duration)
}

// New returns an empty simulation whose packet buffers hold mtu bytes of
// payload.
func New(mtu int) *Sim { return &Sim{bufSize: wire.DataLen + mtu} }

// Now returns the virtual time.
func (s *Sim) Now() time.Duration { return s.now }

// AddSwitch adds a switch and returns its index.
func (s *Sim) AddSwitch(sw *fabric.Switch) int {
	s.switches = append(s.switches, sw)
	peers := make([]endpoint, sw.NumPorts())
	for i := range peers {
		peers[i] = endpoint{host: -2} // unwired
	}
	s.peer = append(s.peer, peers)
	return len(s.switches) - 1
}

// AddHost wires a host NIC to port of switch sw; delay is the propagation
// delay of the host's uplink (the switch port's own config gives the
// downlink's). It returns the host's index.
func (s *Sim) AddHost(n *nic.Engine, sw int, port fabric.PortID, delay time.Duration) (int, error) {
	if err := s.checkPort(sw, port); err != nil {
		return 0, err
	}
	idx := len(s.hosts)
	s.hosts = append(s.hosts, &Host{NIC: n, uplink: endpoint{host: -1, sw: sw, port: port}, delay: delay})
	s.peer[sw][port] = endpoint{host: idx}
	return idx, nil
}

// Connect wires port pa of switch a to port pb of switch b.
func (s *Sim) Connect(a int, pa fabric.PortID, b int, pb fabric.PortID) error {
	if err := s.checkPort(a, pa); err != nil {
		return err
	}
	if err := s.checkPort(b, pb); err != nil {
		return err
	}
	s.peer[a][pa] = endpoint{host: -1, sw: b, port: pb}
	s.peer[b][pb] = endpoint{host: -1, sw: a, port: pa}
	return nil
}

func (s *Sim) checkPort(sw int, port fabric.PortID) error {
	if sw < 0 || sw >= len(s.switches) || int(port) >= s.switches[sw].NumPorts() {
		return fmt.Errorf("sim: no port %d on switch %d", port, sw)
	}
	if s.peer[sw][port].host != -2 {
		return fmt.Errorf("sim: port %d of switch %d is already wired", port, sw)
	}
	return nil
}

// Host returns host i.
func (s *Sim) Host(i int) *Host { return s.hosts[i] }

// Switch returns switch i.
func (s *Sim) Switch(i int) *fabric.Switch { return s.switches[i] }

// RunUntil advances virtual time until done returns true (checked after
// every event time) or limit passes, whichever is first.
func (s *Sim) RunUntil(done func() bool, limit time.Duration) error {
	same := 0
	for !done() {
		next, ok := s.next()
		if !ok {
			return fmt.Errorf("%w at %v before the condition held", ErrIdle, s.now)
		}
		if next > limit {
			s.now = limit
			return fmt.Errorf("%w: %v", ErrTimeout, limit)
		}
		if next > s.now {
			s.now, same = next, 0
		} else if same++; same > maxStepsPerInstant {
			return fmt.Errorf("%w: %d steps at %v", ErrLivelock, same, s.now)
		}
		s.step()
		if s.OnStep != nil {
			s.OnStep(s.now)
		}
	}
	return nil
}

// next returns the earliest time anything happens.
func (s *Sim) next() (time.Duration, bool) {
	t, ok := time.Duration(0), false
	take := func(d time.Duration) {
		if !ok || d < t {
			t, ok = d, true
		}
	}
	if len(s.queue) > 0 {
		take(s.queue[0].at)
	}
	for _, sw := range s.switches {
		if d, k := sw.NextDeadline(); k {
			take(d)
		}
	}
	for _, h := range s.hosts {
		if d, k := h.NIC.NextDeadline(); k {
			take(d)
		}
	}
	return max(t, s.now), ok
}

// step does everything due at s.now.
func (s *Sim) step() {
	for len(s.queue) > 0 && s.queue[0].at <= s.now {
		a := heap.Pop(&s.queue).(arrival)
		s.deliver(a)
	}
	for i, sw := range s.switches {
		sw.Advance(s.now)
		s.outputs = sw.Drain(s.outputs[:0])
		for _, o := range s.outputs {
			to := s.peer[i][o.Port]
			if to.host == -2 {
				s.recycle(o.Pkt.Buf)
				continue
			}
			s.push(arrival{at: max(o.At, s.now), to: to, buf: o.Pkt.Buf, tos: o.Pkt.TOS})
		}
		for _, b := range sw.Reclaim(nil) {
			s.recycle(b)
		}
	}
	for i, h := range s.hosts {
		h.NIC.Advance(s.now)
		for {
			buf := s.buffer()
			pkt, tos, ok := h.NIC.Transmit(s.now, buf)
			if !ok {
				s.recycle(buf)
				break
			}
			s.push(arrival{at: s.now + h.delay, to: h.uplink, buf: pkt, tos: tos})
		}
		for _, c := range h.NIC.Completions() {
			if s.OnCompletion != nil {
				s.OnCompletion(i, c)
			}
		}
	}
}

func (s *Sim) deliver(a arrival) {
	if a.to.host >= 0 {
		s.hosts[a.to.host].NIC.Receive(s.now, a.buf, a.tos)
		s.recycle(a.buf)
		return
	}
	s.switches[a.to.sw].Receive(s.now, fabric.Packet{Buf: a.buf, TOS: a.tos, In: a.to.port})
}

func (s *Sim) push(a arrival) {
	s.seq++
	a.seq = s.seq
	heap.Push(&s.queue, a)
}

func (s *Sim) buffer() []byte {
	if n := len(s.free); n > 0 {
		b := s.free[n-1]
		s.free = s.free[:n-1]
		return b[:cap(b)]
	}
	return make([]byte, s.bufSize)
}

func (s *Sim) recycle(b []byte) {
	if cap(b) >= s.bufSize {
		s.free = append(s.free, b[:cap(b)])
	}
}
