package switchcore

import "time"

// Counter counts packets and their bytes.
type Counter struct {
	Packets, Bytes uint64
}

func (c *Counter) add(bytes int) {
	c.Packets++
	c.Bytes += uint64(bytes)
}

// HistBuckets is the number of occupancy histogram buckets.
const HistBuckets = 16

// Histogram counts enqueues by the occupancy of the queue they joined:
// bucket i holds those that found it between i/16 and (i+1)/16 of its
// capacity (the last bucket also holds a full queue).
type Histogram [HistBuckets]uint64

// bucket returns the histogram bucket of an occupancy.
func bucket(occupancy, capacity int) int {
	i := 0
	if capacity > 0 {
		i = occupancy * HistBuckets / capacity
	}
	return min(max(i, 0), HistBuckets-1)
}

// ClassStats are the counters of one queue class of one egress port: a
// data priority, or [ClassHeader].
type ClassStats struct {
	Enqueued Counter // joined the queue
	Dequeued Counter // left the queue onto the link (also those the link then lost)
	Marked   Counter // ECN CE set at dequeue
	// Trimmed counts data packets cut to their header; Bytes is the
	// payload bytes removed.
	Trimmed Counter
	Drops   [NumDropReasons]Counter
	// MaxOccupancy and Occupancy describe the queue each packet joined, in
	// bytes after it joined. Data priorities share the port's data buffer,
	// so for them it is the port's data occupancy, the quantity trimming
	// and marking act on.
	MaxOccupancy int
	Occupancy    Histogram
}

// PortStats are the counters of one port.
type PortStats struct {
	Received Counter // every packet that arrived on the port
	Sent     Counter // every packet emitted out of the port
	// RxDrops counts drops decided before a packet has an egress queue:
	// malformed, no route, headroom.
	RxDrops [NumDropReasons]Counter
	Classes [NumClasses]ClassStats

	PauseFrames Counter // PAUSE frames received from the neighbour (consumed)
	// Paused is how long each priority's data departures on this port
	// were stopped by the neighbour's PAUSE frames.
	Paused        [NumPriorities]time.Duration
	PausesSent    [NumPriorities]uint64 // PAUSE frames this port sent upstream
	ResumesSent   [NumPriorities]uint64
	WatchdogFires [NumPriorities]uint64
}

// Stats is a snapshot of the switch counters.
type Stats struct {
	Now   time.Duration // the latest time the switch was given
	Ports []PortStats
	// BadIngress counts packets handed to Receive with an ingress port
	// that does not exist (a driver bug); they are dropped.
	BadIngress Counter
}

// Totals sums the counters the conservation checks need over every port.
type Totals struct {
	Received, Sent Counter
	Dropped        Counter
	TrimmedBytes   uint64 // payload bytes removed by trimming
	PausesSent     uint64 // PAUSE and RESUME frames the switch generated
	PausesConsumed Counter
}

// Totals sums s over ports.
func (s Stats) Totals() Totals {
	t := Totals{Received: s.BadIngress, Dropped: s.BadIngress}
	for i := range s.Ports {
		p := &s.Ports[i]
		t.Received.Packets += p.Received.Packets
		t.Received.Bytes += p.Received.Bytes
		t.Sent.Packets += p.Sent.Packets
		t.Sent.Bytes += p.Sent.Bytes
		t.PausesConsumed.Packets += p.PauseFrames.Packets
		t.PausesConsumed.Bytes += p.PauseFrames.Bytes
		for r := range p.RxDrops {
			t.Dropped.Packets += p.RxDrops[r].Packets
			t.Dropped.Bytes += p.RxDrops[r].Bytes
		}
		for c := range p.Classes {
			cs := &p.Classes[c]
			t.TrimmedBytes += cs.Trimmed.Bytes
			for r := range cs.Drops {
				t.Dropped.Packets += cs.Drops[r].Packets
				t.Dropped.Bytes += cs.Drops[r].Bytes
			}
		}
		for prio := range NumPriorities {
			t.PausesSent += p.PausesSent[prio] + p.ResumesSent[prio]
		}
	}
	return t
}
