package switchcore

import (
	"time"
	"unsafe"
)

// port is one switch port: the egress queues and link toward its
// neighbour, and the PFC state of what arrives from that neighbour. It is
// padded to whole 64-byte cache lines, so every port of a switch starts at
// the same offset in a line and its hot fields share as few lines as they
// can. The padding is 1 to 64 bytes, never none: a zero-size last field
// would be padded by the compiler to the struct's alignment, off the line.
type port struct {
	portState
	_ [64 - unsafe.Sizeof(portState{})%64]byte
}

type portState struct {
	// Hot: what every packet through the port reads or writes, together
	// at the front so a hop touches few cache lines.
	linkFree  time.Duration // when the packet on the link finishes serializing
	wireAt    time.Duration // far-end arrival of the oldest packet on the wire; never when none
	lastAt    time.Duration // far-end arrival of the last packet put on the wire
	excess    uint64        // serialization time paid ahead of the rate, in ns·bit/s
	rate      uint64        // cfg.Rate in bits per second, for the serialization arithmetic
	dataBytes int
	seq       uint64 // arrival order of data entries
	headerCap int
	// Copies of the cfg fields every hop reads, so a hop reads the
	// port's first lines and not its config.
	dataCap  int
	overhead int
	delay    time.Duration
	id       PortID
	dataMask uint8 // priorities whose data FIFO is not empty
	rr       uint8 // round-robin position among data priorities
	// PFC frames owed to the neighbour, one per priority at most: the
	// latest state (pause time, or 0 to resume) is what gets sent, so
	// refreshes never pile up behind a slow link.
	pfcPending uint8
	pausing    uint8 // priorities whose ingress has paused the neighbour (ingress[prio].pausing)
	trim       TrimMode
	// portECN: cfg.ECN.Enabled; portFaults: cfg.Fault can lose, delay or
	// cut a packet (down and transmit look at it). One byte for both, so
	// the hot fields end at byte 96 and the wire's, the strict-priority
	// queue's and the first data queue's rings follow in the next line.
	flags uint8

	wire ring                // packets on the wire, FIFO by arrival at the far end
	hdr  ring                // strict-priority queue: control packets, trimmed headers
	data [NumPriorities]ring // one data FIFO per priority, sharing DataCap

	cfg PortConfig // caps, trim, ECN, delay, faults

	cls [NumClasses]classHot // per queue class: enqueued, dequeued, peak occupancy

	ingress [NumPriorities]ingressPFC // what we told the neighbour, and the bytes held per priority
}

// classHot is the part of ClassStats every packet of a class updates,
// 104 bytes instead of the 344 of ClassStats. Its occupancy histogram
// counts in 32 bits; a bucket that wraps carries 2^32 into the cold
// ClassStats.Occupancy, and Switch.Stats adds the two.
type classHot struct {
	enqueues, dequeued Counter
	maxOccupancy       int
	occupancy          [HistBuckets]uint32
}

// observe counts an enqueue that left occ of capacity bytes queued.
func (h *classHot) observe(cold *Histogram, occ, capacity int) {
	i := bucket(occ, capacity)
	h.occupancy[i]++
	if h.occupancy[i] == 0 {
		cold[i] += 1 << 32
	}
}

// portCold is the state of a port a hop through it does not touch unless
// PFC is in use or something unusual happens (a drop, a trim, a mark): kept
// apart from the ports (Switch.cold) so the fabric's hot state is dense.
type portCold struct {
	pause     [NumPriorities]egressPause // what the neighbour's PAUSE frames say
	pauseUS   [NumPriorities]uint16      // PAUSE time this port asks for, µs
	pfcMicros [NumPriorities]uint16
	refresh   [NumPriorities]time.Duration // interval between PAUSE refreshes

	// stats holds the port's counters but for those in port (received,
	// sent, cls), which Switch.Stats adds in.
	stats PortStats
}

func (p *port) init(c *portCold, id PortID, cfg PortConfig, pfc *[NumPriorities]PFCConfig) {
	p.id, p.cfg = id, cfg
	p.dataCap, p.overhead, p.delay, p.trim = cfg.DataCap, cfg.Overhead, cfg.Delay, cfg.Trim
	if cfg.ECN.Enabled {
		p.flags |= portECN
	}
	f := &cfg.Fault
	if f.Loss > 0 || f.Jitter > 0 || f.DownStart < f.DownEnd {
		p.flags |= portFaults
	}
	p.wireAt = never
	p.rate = uint64(cfg.Rate)
	p.headerCap = cfg.headerCap()
	for i := range pfc {
		d := pfc[i].pauseTime(cfg.Rate)
		us := (d + time.Microsecond - 1) / time.Microsecond
		c.pauseUS[i] = uint16(us)
		c.refresh[i] = time.Duration(us) * time.Microsecond / 2
	}
	// The queues start empty and grow to the depth they reach (ring), so
	// a port's arrays are as large as its traffic needs and no larger.
}

// Bits of portState.flags.
const (
	portECN    uint8 = 1 << iota // cfg.ECN.Enabled
	portFaults                   // cfg.Fault can lose, delay or cut a packet
)

// ecn reports whether the port marks ECN.
func (p *port) ecn() bool { return p.flags&portECN != 0 }

// faults reports whether the port's config can lose, delay or cut a packet.
func (p *port) faults() bool { return p.flags&portFaults != 0 }

// down reports whether the link is down at t.
func (p *port) down(t time.Duration) bool {
	if !p.faults() {
		return false
	}
	f := &p.cfg.Fault
	return t >= f.DownStart && t < f.DownEnd
}
