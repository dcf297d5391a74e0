package switchcore

import (
	"fmt"
	"time"

	"github.com/forgive-emu/forgive/wire"
)

// PortID names a switch port: an index into [Config.Ports].
type PortID uint16

// NoPort is the ingress port of a packet the switch generated itself (a
// PAUSE frame).
const NoPort PortID = 0xFFFF

// NumPriorities is the number of PFC priorities (802.1Qbb classes of
// service). A DSCP maps to one of them.
const NumPriorities = 8

// Queue classes for counters: the data queues of the eight priorities and
// the strict-priority queue that carries control packets and trimmed
// headers.
const (
	ClassHeader = NumPriorities     // the strict-priority (header/control) queue
	NumClasses  = NumPriorities + 1 // data priorities 0..7, then ClassHeader
)

// ECN codepoints: the low two bits of the IP TOS byte (RFC 3168).
const (
	ECNNotECT uint8 = 0
	ECNECT1   uint8 = 1
	ECNECT0   uint8 = 2
	ECNCE     uint8 = 3
	ecnMask   uint8 = 3
)

// Packet is what the switch carries: the bytes of one UDP payload (a wire
// packet) and the IP TOS byte it arrived with.
//
// The switch owns Buf from the moment Receive is called until the packet
// comes back through [Switch.Drain] (forwarded, possibly trimmed in place so
// len(Buf) shrinks) or [Switch.Reclaim] (dropped or consumed). The driver
// must not touch Buf in between.
type Packet struct {
	Buf []byte
	TOS uint8  // DSCP<<2 | ECN, as carried in the IP header
	In  PortID // the port it arrived on; NoPort for frames the switch made
}

// DSCP returns the differentiated-services codepoint of p.
func (p Packet) DSCP() uint8 { return p.TOS >> 2 }

// ECN returns the ECN codepoint of p.
func (p Packet) ECN() uint8 { return p.TOS & ecnMask }

// Output is a packet whose time on the wire has elapsed: the driver sends
// Pkt out of Port. At is the instant the packet reached the far end of the
// link (at or before the now of the call that produced it).
//
// Hdr is what wire.Inspect returns for Pkt.Buf, carried from the Receive
// (or ReceiveInspected) that brought the packet in and inspected again
// from the bytes when the switch rewrote them (a trim) or wrote them (a
// PAUSE); a zero Hdr.Type means the bytes were not inspected. A driver
// that hands the packet to another switch may pass Hdr to its
// ReceiveInspected instead of parsing the header again at every hop;
// TestOutputHeaderIsInspect holds Hdr to wire.Inspect of the bytes.
type Output struct {
	Port PortID
	Pkt  Packet
	At   time.Duration
	Hdr  wire.Summary
}

// DropReason says why the switch dropped a packet.
type DropReason uint8

// Drop reasons. DropNone means the packet was accepted (queued, trimmed or,
// for a PAUSE frame, consumed).
const (
	DropNone           DropReason = iota
	DropMalformed                 // not a valid wire packet, or arrived on a port that does not exist
	DropNoRoute                   // no route for its destination host
	DropHeadroom                  // arrived after the PFC headroom of its ingress priority was used up
	DropHeaderOverflow            // the strict-priority queue was full
	DropDataFull                  // the data queue was full and the packet could not be trimmed
	DropFaultLoss                 // lost on the link by fault injection (no trim)
	DropLinkDown                  // the link was down
	DropWatchdog                  // cleared by the PFC watchdog from a queue paused too long
	// DropSourceGuard: arrived on a host-facing port (PortConfig.Host)
	// with another host's id as its source, a ToR's source guard.
	DropSourceGuard
	NumDropReasons
)

var dropNames = [...]string{"none", "malformed", "no_route", "headroom", "header_overflow",
	"data_full", "fault_loss", "link_down", "watchdog", "source_guard"}

func (r DropReason) String() string {
	if int(r) < len(dropNames) {
		return dropNames[r]
	}
	return fmt.Sprintf("DropReason(%d)", uint8(r))
}
