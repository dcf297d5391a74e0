package reliability

import (
	"time"

	"github.com/forgive-emu/forgive/wire"
)

// NackCounts counts retransmission requests by reason.
type NackCounts struct {
	Trimmed        uint64
	TrimmedLastHop uint64
	Gap            uint64
	Probe          uint64
	OutOfWindow    uint64
	Other          uint64
}

func (c *NackCounts) add(r wire.NackReason) {
	switch r {
	case wire.NackTrimmed:
		c.Trimmed++
	case wire.NackTrimmedLastHop:
		c.TrimmedLastHop++
	case wire.NackGap:
		c.Gap++
	case wire.NackProbe:
		c.Probe++
	case wire.NackOutOfWindow:
		c.OutOfWindow++
	default:
		c.Other++
	}
}

// Total returns the number of requests of every reason.
func (c NackCounts) Total() uint64 {
	return c.Trimmed + c.TrimmedLastHop + c.Gap + c.Probe + c.OutOfWindow + c.Other
}

// ReceiverStats counts what a Receiver did. Counters only grow.
type ReceiverStats struct {
	DataPackets    uint64 // untrimmed data packets handed in
	TrimmedHeaders uint64 // trimmed headers handed in
	Probes         uint64 // probes handed in
	Duplicates     uint64 // packets that brought nothing new
	Discarded      uint64 // payloads that fell on forgiven bytes only
	BytesPlaced    uint64 // bytes newly Received (to be copied to memory)
	BytesForgiven  uint64 // bytes newly Forgiven
	Forgiven       uint64 // trimmed headers forgiven
	Repairs        uint64 // trimmed headers refused, retransmission requested
	OutOfOrder     uint64 // go-back-N: packets dropped for not being the expected PSN
	OutOfWindow    uint64 // packets dropped for lack of room: beyond the PSN window, or too many open messages
	Malformed      uint64 // inputs rejected with an error
	Acks           uint64
	Nacks          NackCounts
	Completions    uint64
}

// SenderStats counts what a Sender did. Counters only grow.
type SenderStats struct {
	SentPackets uint64 // new segments handed out
	SentBytes   uint64
	RetxPackets uint64 // retransmitted segments handed out
	RetxBytes   uint64
	RTOs        uint64 // retransmission timeouts
	// SpuriousRTOs counts the timeouts found spurious
	// (SenderConfig.DetectSpuriousRTO): the first ACK after them was an
	// original's.
	SpuriousRTOs uint64
	Acks         uint64
	Nacks        NackCounts // NACKs received, by reason
	Probes       uint64     // probes emitted
	Completions  uint64     // messages fully acknowledged
	RTTSamples   uint64
	// CwndBlocked counts the times new data waited for the congestion
	// window (SetCongestionWindow): one per Next that it refused.
	CwndBlocked uint64
	Malformed   uint64 // inputs rejected with an error
}

// RTTStats are the sender's round-trip estimates. They are reported, not
// used: IRN's timeouts are fixed, not derived from the RTT.
type RTTStats struct {
	Latest, Min, Smoothed time.Duration
}

func (r *RTTStats) sample(d time.Duration) {
	r.Latest = d
	if r.Min == 0 || d < r.Min {
		r.Min = d
	}
	if r.Smoothed == 0 {
		r.Smoothed = d
	} else {
		// RFC 6298: SRTT = 7/8 SRTT + 1/8 R.
		r.Smoothed += (d - r.Smoothed) / 8
	}
}
