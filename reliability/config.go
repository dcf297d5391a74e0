package reliability

import (
	"errors"
	"fmt"
	"time"

	"github.com/forgive-emu/forgive/wire"
)

// Sentinel errors, returned wrapped with the details. None of them is fatal
// to a Sender or Receiver: the offending input is ignored and the state
// machine keeps running.
var (
	ErrConfig          = errors.New("reliability: invalid config")
	ErrBadHeader       = errors.New("reliability: inconsistent data header")
	ErrOutOfWindow     = errors.New("reliability: PSN outside the receive window")
	ErrTooManyMessages = errors.New("reliability: too many open messages")
	ErrBadAck          = errors.New("reliability: ACK acknowledges PSNs never sent")
	ErrBadNack         = errors.New("reliability: NACK names PSNs never sent")
	ErrBadProbe        = errors.New("reliability: inconsistent probe")
	ErrWrongFlow       = errors.New("reliability: packet of another flow")
	ErrMsgOrder        = errors.New("reliability: message ids must increase")
	ErrUnknownMode     = errors.New("reliability: unknown loss-recovery mode")
)

// Mode selects the loss-recovery discipline of a flow. Both ends of a flow
// must use the same mode.
type Mode uint8

const (
	// SelectiveRepeat keeps out-of-order packets, reports them in a SACK
	// bitmap and resends only the PSNs a NACK names (IRN, Ultra Ethernet).
	SelectiveRepeat Mode = iota
	// GoBackN accepts only the expected PSN, NACKs the first gap and makes
	// the sender resend everything from it (today's RoCE NICs).
	GoBackN
)

func (m Mode) String() string {
	switch m {
	case SelectiveRepeat:
		return "selective-repeat"
	case GoBackN:
		return "go-back-n"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}

// ParseMode reads a mode by its configuration name: "selective-repeat"
// (or "sr") or "go-back-n" (or "gbn").
func ParseMode(s string) (Mode, error) {
	switch s {
	case "selective-repeat", "sr":
		return SelectiveRepeat, nil
	case "go-back-n", "gbn":
		return GoBackN, nil
	}
	return 0, fmt.Errorf("%w: %q (want selective-repeat or go-back-n)", ErrUnknownMode, s)
}

// MarshalText lets a Mode appear by name in JSON, YAML and flag values.
func (m Mode) MarshalText() ([]byte, error) {
	if m > GoBackN {
		return nil, fmt.Errorf("%w: %d", ErrUnknownMode, uint8(m))
	}
	return []byte(m.String()), nil
}

// UnmarshalText is ParseMode for decoders.
func (m *Mode) UnmarshalText(text []byte) error {
	parsed, err := ParseMode(string(text))
	if err != nil {
		return err
	}
	*m = parsed
	return nil
}

// FlowInfo names one flow at one end: the flow (queue pair) id, the host
// ids written into the packets this end emits, and the PSN of the flow's
// first packet, agreed by both ends when the flow is set up.
type FlowInfo struct {
	Flow       uint32
	Local      uint16 // this end's host id: Src of the packets it emits
	Peer       uint16 // the other end's host id: Dst of those packets
	InitialPSN wire.PSN
}

// Defaults, with the source of each (see PARAMETERS.md, "Reliability").
const (
	// DefaultMTU is the payload per packet: "4,096-byte packets" (FORGIVE seed).
	DefaultMTU = 4096
	// DefaultWindow is IRN's BDP-FC cap, "at most one BDP unacknowledged per
	// flow", for the seed's fabric: 400 Gb/s x 22 us / 8 = 1.1 MB.
	DefaultWindow = 1_100_000
	// DefaultMaxInFlight caps the PSN span a sender keeps unacknowledged so
	// that it never outruns the receiver's bitmap (DefaultBitmapPSNs).
	DefaultMaxInFlight = 1024
	// DefaultRTOLow and DefaultRTOHigh: "RTO_low / RTO_high 100 us when <= 3
	// MTU in flight / 320 us otherwise" (IRN as run in conweave-ns3).
	DefaultRTOLow        = 100 * time.Microsecond
	DefaultRTOHigh       = 320 * time.Microsecond
	DefaultRTOLowPackets = 3
	// DefaultBitmapPSNs is the receiver's PSN window; PFLD uses 512 bits and
	// suggests 1024 for larger BDPs.
	DefaultBitmapPSNs = 1024
	// DefaultAckEvery: "ACK every 16 KB received" (htsim, Linux UET RFC).
	DefaultAckEvery = 16 * 1024
	// DefaultAckDelay bounds how long a coalesced ACK may wait. No source
	// fixes it; 10 us is half a fabric RTT and a tenth of RTO_low, so a tail
	// ACK is never late enough to fire the sender's timer.
	DefaultAckDelay = 10 * time.Microsecond
	// DefaultNackInterval: "go-back-N NACK interval 500 us" (HPCC ns-3).
	DefaultNackInterval = 500 * time.Microsecond
	// DefaultMaxMessages bounds the messages a receiver keeps open per flow.
	DefaultMaxMessages = 1024
)

// Hard limits of the configuration.
const (
	MaxBitmapPSNs = 1 << 20
	MaxSubflows   = 128
)

// ReceiverConfig configures a Receiver.
type ReceiverConfig struct {
	Mode Mode
	// BitmapPSNs is the least number of PSNs beyond the cumulative PSN the
	// receiver can record; the bitmap rounds it up (see Receiver.Window).
	BitmapPSNs int
	// AckEvery is the number of payload bytes after which an ACK is sent.
	AckEvery int
	// AckDelay is the longest a coalesced ACK waits (the delayed-ACK timer).
	AckDelay time.Duration
	// NackInterval is the least time between two go-back-N NACKs for the
	// same expected PSN.
	NackInterval time.Duration
	// MaxMessages bounds the messages open (seen, not complete) at once.
	MaxMessages int
	// SprayPerPacket says the sender sprays every packet independently, so
	// no ordering holds between packets: neither a gap nor a probe proves a
	// loss, and only the sender's RTO recovers a silent drop. The wire's
	// subflow count cannot say this (0 and 1 both mean one ordered path).
	SprayPerPacket bool
	// TrimmedLastHop makes retransmission requests for trimmed headers use
	// the TRIMMED_LASTHOP reason instead of TRIMMED.
	TrimmedLastHop bool
}

// DefaultReceiverConfig returns the defaults listed above, selective repeat.
func DefaultReceiverConfig() ReceiverConfig {
	return ReceiverConfig{
		Mode:         SelectiveRepeat,
		BitmapPSNs:   DefaultBitmapPSNs,
		AckEvery:     DefaultAckEvery,
		AckDelay:     DefaultAckDelay,
		NackInterval: DefaultNackInterval,
		MaxMessages:  DefaultMaxMessages,
	}
}

// Validate names the first field that is out of range.
func (c ReceiverConfig) Validate() error {
	switch {
	case c.Mode > GoBackN:
		return fieldErr("ReceiverConfig.Mode", c.Mode, "selective-repeat or go-back-n")
	case c.BitmapPSNs < wire.SackBits || c.BitmapPSNs > MaxBitmapPSNs:
		return fieldErr("ReceiverConfig.BitmapPSNs", c.BitmapPSNs, fmt.Sprintf("%d..%d", wire.SackBits, MaxBitmapPSNs))
	case c.AckEvery < 1:
		return fieldErr("ReceiverConfig.AckEvery", c.AckEvery, ">= 1")
	case c.AckDelay <= 0:
		return fieldErr("ReceiverConfig.AckDelay", c.AckDelay, "> 0")
	case c.NackInterval < 0:
		return fieldErr("ReceiverConfig.NackInterval", c.NackInterval, ">= 0")
	case c.MaxMessages < 1:
		return fieldErr("ReceiverConfig.MaxMessages", c.MaxMessages, ">= 1")
	}
	return nil
}

// SenderConfig configures a Sender.
type SenderConfig struct {
	Mode Mode
	// MTU is the payload bytes of a full segment.
	MTU int
	// Window is IRN's BDP-FC: the bytes from the lowest unacknowledged PSN
	// to the newest PSN sent never exceed it (one segment always may go).
	Window int
	// MaxInFlight caps the same span in PSNs; keep it at or below the
	// receiver's BitmapPSNs.
	MaxInFlight int
	// RTOLow applies while at most RTOLowPackets packets are unacknowledged,
	// RTOHigh otherwise.
	RTOLow, RTOHigh time.Duration
	RTOLowPackets   int
	// Subflows is sigma: PSN p travels on subflow p mod sigma, each subflow
	// in order. A power of two, so the mapping survives PSN wrap-around.
	Subflows int
	// TailProbe sends a tail probe on every subflow that carried new data
	// when the sender runs out of data to send.
	TailProbe bool
	// RetxProbe sends a probe behind every retransmission.
	RetxProbe bool
	// ProbeEvery sends a periodic probe after every ProbeEvery new packets
	// of a subflow; 0 disables periodic probes.
	ProbeEvery int
	// DetectSpuriousRTO, under selective repeat, makes a timeout resend
	// the oldest unacknowledged PSN alone and wait for the first ACK that
	// acknowledges something new: if the packet that triggered it was not
	// a retransmission (no AckRetx flag), the originals were only late
	// and nothing more is resent (a spurious RTO, counted); if it was,
	// every unacknowledged PSN is queued, as IRN does at once. Eifel's
	// detection (RFC 3522) with the ACK's retransmission flag for its
	// timestamp, and F-RTO's response (RFC 5682): a receiver stalled past
	// the RTO, as a daemon descheduled on a loaded machine is, no longer
	// costs the sender its whole window. Off, the default, is IRN's rule.
	// Go-back-N ignores it.
	DetectSpuriousRTO bool
}

// DefaultSenderConfig returns the defaults listed above: selective repeat,
// one ordered path, tail probes only. With Subflows > 1, Ordered Chaos also
// turns on RetxProbe and a ProbeEvery of a few packets.
func DefaultSenderConfig() SenderConfig {
	return SenderConfig{
		Mode:          SelectiveRepeat,
		MTU:           DefaultMTU,
		Window:        DefaultWindow,
		MaxInFlight:   DefaultMaxInFlight,
		RTOLow:        DefaultRTOLow,
		RTOHigh:       DefaultRTOHigh,
		RTOLowPackets: DefaultRTOLowPackets,
		Subflows:      1,
		TailProbe:     true,
	}
}

// Validate names the first field that is out of range.
func (c SenderConfig) Validate() error {
	switch {
	case c.Mode > GoBackN:
		return fieldErr("SenderConfig.Mode", c.Mode, "selective-repeat or go-back-n")
	case c.MTU < 1 || c.MTU > wire.MaxPayload:
		return fieldErr("SenderConfig.MTU", c.MTU, fmt.Sprintf("1..%d", wire.MaxPayload))
	case c.Window < 1:
		return fieldErr("SenderConfig.Window", c.Window, ">= 1")
	case c.MaxInFlight < 1 || c.MaxInFlight > MaxBitmapPSNs:
		return fieldErr("SenderConfig.MaxInFlight", c.MaxInFlight, fmt.Sprintf("1..%d", MaxBitmapPSNs))
	case c.RTOLow <= 0:
		return fieldErr("SenderConfig.RTOLow", c.RTOLow, "> 0")
	case c.RTOHigh < c.RTOLow:
		return fieldErr("SenderConfig.RTOHigh", c.RTOHigh, ">= RTOLow")
	case c.RTOLowPackets < 0:
		return fieldErr("SenderConfig.RTOLowPackets", c.RTOLowPackets, ">= 0")
	case c.Subflows < 1 || c.Subflows > MaxSubflows || c.Subflows&(c.Subflows-1) != 0:
		return fieldErr("SenderConfig.Subflows", c.Subflows, fmt.Sprintf("a power of two in 1..%d", MaxSubflows))
	case c.ProbeEvery < 0:
		return fieldErr("SenderConfig.ProbeEvery", c.ProbeEvery, ">= 0")
	}
	return nil
}

func fieldErr(name string, v any, want string) error {
	return fmt.Errorf("%w: %s = %v, want %s", ErrConfig, name, v, want)
}
