package nic

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/internal/pfcwd"
	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/reliability"
	"github.com/forgive-emu/forgive/wire"
)

// Sentinel errors of the engine.
var (
	ErrConfig       = errors.New("nic: invalid config")
	ErrNoRegion     = errors.New("nic: no such memory region")
	ErrBounds       = errors.New("nic: range outside the memory region")
	ErrNoFlow       = errors.New("nic: no such flow")
	ErrFlowExists   = errors.New("nic: flow already exists")
	ErrFlowFailed   = errors.New("nic: flow failed")
	ErrLimit        = errors.New("nic: limit reached")
	ErrRegionInUse  = errors.New("nic: memory region in use by posted work")
	ErrBadRequest   = errors.New("nic: bad request")
	ErrPeerTimeout  = errors.New("nic: peer unreachable: no acknowledgement")
	ErrMsgTooLong   = errors.New("nic: message longer than the posted receive")
	ErrFlowDestroy  = errors.New("nic: flow destroyed with work outstanding")
	ErrStepClassify = errors.New("nic: step classification")
	// ErrPeerRestarted completes the work a flow was moving when the
	// peer's flow was recreated (a restarted daemon): the flow rebinds to
	// the new incarnation, and this work is lost with the old one.
	ErrPeerRestarted = errors.New("nic: peer flow recreated (a new incarnation): work in progress lost")
)

// Class is a flow's traffic class. Only gradient all-reduce traffic is
// eligible for forgiveness and exemption ("neither tensor-parallel nor
// pipeline-parallel traffic is eligible").
type Class uint8

// Traffic classes.
const (
	ClassGradient Class = iota // data-parallel gradient all-reduce
	ClassTensor                // tensor-parallel
	ClassPipeline              // pipeline-parallel
	ClassOther                 // anything else
	NumClasses
)

var classNames = [NumClasses]string{"gradient", "tensor", "pipeline", "other"}

func (c Class) String() string {
	if c < NumClasses {
		return classNames[c]
	}
	return fmt.Sprintf("Class(%d)", uint8(c))
}

// ParseClass reads a class name.
func ParseClass(s string) (Class, error) {
	for i, n := range classNames {
		if n == s {
			return Class(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown class %q (want gradient, tensor, pipeline or other)", ErrBadRequest, s)
}

// Entropy says how a flow picks the entropy field a switch hashes for ECMP.
type Entropy uint8

// Entropy policies.
const (
	// EntropySingle keeps one entropy value: one path, like RoCE's ECMP.
	EntropySingle Entropy = iota
	// EntropySpray draws a fresh entropy for every packet (Ultra Ethernet's
	// default bulk mode); packets of a flow reorder freely.
	EntropySpray
	// EntropySubflows splits the flow into ordered subflows, each with its
	// own entropy (Ordered Chaos's RSS), so gaps and probes reveal losses.
	EntropySubflows
	// EntropyMessage gives each message one entropy value, the same for
	// every packet and every retransmission of it and independent between
	// messages: a path per message, like ECMP over a new queue pair (a
	// new UDP source port) per message, as ASTRA-sim's ns-3 backend does.
	// Messages of a flow overtake one another, so the receiver infers no
	// loss from order, as under EntropySpray. The value is a hash of the
	// flow's tag, its id and the message id (messageEntropy): it draws
	// nothing from the engine's random streams.
	EntropyMessage
)

var entropyNames = [...]string{"single", "spray", "subflows", "message"}

func (e Entropy) String() string {
	if int(e) < len(entropyNames) {
		return entropyNames[e]
	}
	return fmt.Sprintf("Entropy(%d)", uint8(e))
}

// ParseEntropy reads an entropy policy name.
func ParseEntropy(s string) (Entropy, error) {
	for i, n := range entropyNames {
		if n == s {
			return Entropy(i), nil
		}
	}
	return 0, fmt.Errorf("%w: unknown entropy policy %q (want single, spray, subflows or message)", ErrBadRequest, s)
}

// PeerWindowRange is the window, in bytes, of the flows to the peer
// hosts First to Last (host ids, both included).
type PeerWindowRange struct {
	First, Last uint16
	Window      int
}

// PeerWindows is a window per peer host as ranges of host ids, in
// increasing order and not overlapping (Config.Validate): each run of
// consecutive ids with one window is one range, where an entry per peer
// would make every host's configuration as long as the fabric is wide.
type PeerWindows []PeerWindowRange

// Window returns the window of the flows to peer, and false when no
// range holds peer. It searches the ranges by halves.
func (w PeerWindows) Window(peer uint16) (int, bool) {
	i := sort.Search(len(w), func(i int) bool { return w[i].Last >= peer })
	if i < len(w) && w[i].First <= peer {
		return w[i].Window, true
	}
	return 0, false
}

// PeerWindow returns the window of the flows to peer (PeerWindows,
// PeerWindowPeriod), and false when no range holds it.
func (c *Config) PeerWindow(peer uint16) (int, bool) {
	if c.PeerWindowPeriod != 0 && peer != 0 {
		peer = (peer-1)%c.PeerWindowPeriod + 1
	}
	return c.PeerWindows.Window(peer)
}

// Config configures one host's NIC.
type Config struct {
	Host     uint16     // this host's id, the Src of every packet it sends
	MTU      int        // payload bytes per packet
	LineRate units.Rate // the host link in bits/s; the NIC never sends faster
	// Overhead is the framing bytes per packet (Ethernet, IP, UDP, gaps)
	// that the host link's pacer counts on top of the packet.
	Overhead int

	CC    congestion.Kind        // dcqcn, none or nscc
	DCQCN congestion.DCQCNConfig // LineRate 0 takes the host's
	// NSCC is the window-based controller's: LineRate and MTU 0 take the
	// host's, BaseRTT 0 the reference network's 12 µs (a fabric should
	// set its own).
	NSCC     congestion.NSCCConfig
	Notifier congestion.NotifierConfig
	SenderCC congestion.SenderConfig // FORGIVE sender mode and pacer burst

	Sender reliability.SenderConfig // MTU is taken from Config.MTU
	// PeerWindows is the Window (BDP-FC) of the flows to each peer host
	// in bytes, as ASTRA-sim's ns-3 frontend gives each queue pair the
	// BDP of its host pair: ranges of host ids, in increasing order and
	// not overlapping, each with its window; a peer in no range takes
	// Sender.Window (PeerWindow looks a peer up).
	PeerWindows PeerWindows
	// PeerWindowPeriod, when not 0, repeats PeerWindows every so many
	// host ids: peer p takes the window of the range holding
	// ((p-1) mod PeerWindowPeriod) + 1, and the ranges lie within 1 to
	// PeerWindowPeriod. A placement that deals consecutive ids round the
	// switches has windows that repeat so, and few ranges only this way.
	PeerWindowPeriod uint16
	// RateScaledWindow scales a flow's window by its rate controller's
	// current rate over the line rate (ns-3's VAR_WIN: rdma-queue-pair.cc
	// GetWin), never below one packet (SetWindow). Under a window
	// controller (NSCC) it does nothing: NSCC paces at the line rate and
	// its own window, within the Window, limits the flow.
	RateScaledWindow bool
	Receiver         reliability.ReceiverConfig

	// Forgive turns on FORGIVE at this receiving rank: trimmed gradient
	// ranges go to the budget and every ACK and NACK carries its flags.
	// Off, no range is ever forgiven and no sender is ever exempt.
	Forgive bool
	Budget  budget.Config
	Eta     float64 // the critical-regime detector's threshold

	// DSCP is the traffic class each flow class's data carries.
	DSCP [NumClasses]uint8
	// ECN makes data ECN-capable (ECT(0)), so switches mark instead of drop.
	ECN bool

	// FailAfter fails a flow whose oldest unacknowledged packet has seen no
	// acknowledgement for this long: a dead or restarted peer.
	FailAfter time.Duration

	Seed uint64 // entropy and the budget's draw

	// TagSeed seeds the generator of flow tags, and so of initial PSNs
	// (wire.Tags, wire.InitialPSN). The daemon fills it from crypto/rand
	// so that an off-path sender cannot guess a tag; all zero derives it
	// from Seed and Host, deterministic as the simulator and tests need.
	TagSeed [32]byte

	// The PAUSE watchdog, the switch's PFC watchdog (switchcore.PFCConfig)
	// at the host. It bounds the time paused over a sliding window, not
	// the length of one pause: a leaky bucket fills with the time data is
	// paused and drains, while data is not paused, at the rate that lets
	// WatchdogLimit of every WatchdogWindow be paused. When it holds
	// WatchdogLimit the watchdog fires: the pause ends, and PAUSE frames
	// are ignored for WatchdogRecovery (the bucket drains meanwhile). A
	// pause from an empty bucket so ends after the limit, as a watchdog
	// of continuous pause does; a stream of short pauses with breaks
	// between them (PAUSE 0, then PAUSE again) fills the bucket as well.
	// Over any interval of length T the host is paused at most
	// WatchdogLimit + T*WatchdogLimit/WatchdogWindow.
	//
	// Zero limit means pfcwd.DefaultLimit; negative turns the watchdog
	// off. Zero recovery means the limit; zero window means
	// pfcwd.DefaultWindows times the limit, and a window must be longer
	// than the limit.
	WatchdogLimit    time.Duration
	WatchdogRecovery time.Duration
	WatchdogWindow   time.Duration

	MaxFlows   int
	MaxRegions int

	// NoPayload is the simulator's payload-free mode, for workloads that
	// never read what they receive: a data packet carries its header and
	// its full length, but its payload bytes are neither read from the
	// send's memory nor written to the receive's (they are whatever the
	// packet buffer held, and the buffer past the header is not touched).
	// Everything else, every counter included, is as with payloads.
	NoPayload bool
}

// DefaultConfig returns a NIC for host on a link of lineRate bits/s with the
// defaults of every component: 4,096-byte packets, DCQCN, selective repeat,
// FORGIVE on with the seed's P_low, P_high and P (budget.DefaultConfig).
func DefaultConfig(host uint16, lineRate units.Rate) Config {
	return Config{
		Host:      host,
		MTU:       reliability.DefaultMTU,
		LineRate:  lineRate,
		Overhead:  DefaultOverhead,
		CC:        congestion.KindDCQCN,
		DCQCN:     congestion.DefaultDCQCN(lineRate),
		NSCC:      congestion.DefaultNSCC(0, congestion.DefaultNSCCBaseRTT, 0), // the host's rate and MTU
		Notifier:  congestion.DefaultNotifierConfig(),
		SenderCC:  congestion.DefaultSenderConfig(),
		Sender:    reliability.DefaultSenderConfig(),
		Receiver:  reliability.DefaultReceiverConfig(),
		Forgive:   true,
		Budget:    budget.DefaultConfig(),
		Eta:       budget.DefaultEta,
		DSCP:      [NumClasses]uint8{wire.DSCPData, wire.DSCPData, wire.DSCPData, wire.DSCPData},
		ECN:       true,
		FailAfter: DefaultFailAfter,
		MaxFlows:  DefaultMaxFlows, MaxRegions: DefaultMaxRegions,
	}
}

// SetCC chooses the congestion control by name: "dcqcn", "none" or
// "nscc".
func (c *Config) SetCC(name string) error {
	k, err := congestion.ParseKind(name)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c.CC = k
	return nil
}

// SetDCQCNVariant chooses DCQCN's rules by name: "paper" (or "", the
// default) or "mellanox" (congestion.DCQCNMellanox, which has no byte
// counter: it sets DCQCN.ByteCounter to 0).
func (c *Config) SetDCQCNVariant(name string) error {
	v, err := congestion.ParseDCQCNVariant(name)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c.DCQCN.Variant = v
	if v == congestion.DCQCNMellanox {
		c.DCQCN.ByteCounter = 0
	}
	return nil
}

// SetExemption chooses an exempt sender's rule by name
// (congestion.ParseExemption: "hold", the default for "", "line-rate" or
// "no-cut"), refusing a rule that does not fit the controller c.CC names.
func (c *Config) SetExemption(name string) error {
	e, err := congestion.ParseExemption(name)
	if err == nil {
		err = congestion.CheckExemption(e, c.CC)
	}
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c.SenderCC.Exemption = e
	return nil
}

// SetRecovery chooses the loss recovery of both ends of every flow by
// name: "selective-repeat" (or "sr") or "go-back-n" (or "gbn").
func (c *Config) SetRecovery(name string) error {
	switch name {
	case "selective-repeat", "sr":
		c.Sender.Mode = reliability.SelectiveRepeat
	case "go-back-n", "gbn":
		c.Sender.Mode = reliability.GoBackN
	default:
		return fmt.Errorf("%w: loss recovery %q (want selective-repeat or go-back-n)", ErrConfig, name)
	}
	c.Receiver.Mode = c.Sender.Mode
	return nil
}

// Defaults.
const (
	// DefaultOverhead: Ethernet header, FCS, preamble and gap (38) plus IPv4
	// (20) and UDP (8).
	DefaultOverhead   = 66
	DefaultFailAfter  = 2 * time.Second // without progress
	DefaultMaxFlows   = 4096
	DefaultMaxRegions = 4096
)

// watchdog returns the PAUSE watchdog's limit, recovery and window; ok
// is false when it is off (pfcwd.Settings).
func (c *Config) watchdog() (limit, recovery, window time.Duration, ok bool) {
	return pfcwd.Settings(c.WatchdogLimit, c.WatchdogRecovery, c.WatchdogWindow)
}

// Validate names the first field that is out of range.
func (c *Config) Validate() error {
	bad := func(field string, v any, want string) error {
		return fmt.Errorf("%w: %s = %v, want %s", ErrConfig, field, v, want)
	}
	switch {
	case c.MTU < 1 || c.MTU > wire.MaxPayload:
		return bad("MTU", c.MTU, fmt.Sprintf("1..%d", wire.MaxPayload))
	case c.LineRate <= 0:
		return bad("LineRate", c.LineRate, "> 0 bits/s")
	case c.Overhead < 0:
		return bad("Overhead", c.Overhead, ">= 0")
	case c.FailAfter <= 0:
		return bad("FailAfter", c.FailAfter, "> 0")
	case c.MaxFlows < 1:
		return bad("MaxFlows", c.MaxFlows, ">= 1")
	case c.MaxRegions < 1:
		return bad("MaxRegions", c.MaxRegions, ">= 1")
	case c.WatchdogRecovery < 0:
		return bad("WatchdogRecovery", c.WatchdogRecovery, ">= 0 (0: the limit)")
	}
	if limit, _, window, on := c.watchdog(); on && window <= limit {
		return bad("WatchdogWindow", c.WatchdogWindow, fmt.Sprintf("longer than the limit %v (0: %d limits)", limit, pfcwd.DefaultWindows))
	}
	for i, d := range c.DSCP {
		if d > 63 {
			return bad(fmt.Sprintf("DSCP[%s]", Class(i)), d, "0..63")
		}
	}
	dc := c.dcqcn()
	if err := dc.Validate(); err != nil {
		return fmt.Errorf("%w: DCQCN: %w", ErrConfig, err)
	}
	nc := c.nscc()
	if err := nc.Validate(); err != nil {
		return fmt.Errorf("%w: NSCC: %w", ErrConfig, err)
	}
	if err := c.Notifier.Validate(); err != nil {
		return fmt.Errorf("%w: Notifier: %w", ErrConfig, err)
	}
	for i, r := range c.PeerWindows {
		at := fmt.Sprintf("PeerWindows[%d]", i)
		switch {
		case r.First < 1:
			return bad(at+".First", r.First, ">= 1 (host ids start at 1)")
		case r.Last < r.First:
			return bad(at+".Last", r.Last, fmt.Sprintf(">= First (%d)", r.First))
		case i > 0 && r.First <= c.PeerWindows[i-1].Last:
			return bad(at+".First", r.First, fmt.Sprintf("> PeerWindows[%d].Last (%d): ranges in increasing order, not overlapping", i-1, c.PeerWindows[i-1].Last))
		case r.Window < 1:
			return bad(at+".Window", r.Window, ">= 1 byte")
		case c.PeerWindowPeriod != 0 && r.Last > c.PeerWindowPeriod:
			return bad(at+".Last", r.Last, fmt.Sprintf("<= PeerWindowPeriod (%d)", c.PeerWindowPeriod))
		}
	}
	if c.PeerWindowPeriod != 0 && len(c.PeerWindows) == 0 {
		return bad("PeerWindowPeriod", c.PeerWindowPeriod, "0 without PeerWindows")
	}
	if err := congestion.CheckExemption(c.SenderCC.Exemption, c.CC); err != nil {
		return fmt.Errorf("%w: SenderCC.Exemption: %w", ErrConfig, err)
	}
	sc := c.sender()
	if err := sc.Validate(); err != nil {
		return fmt.Errorf("%w: Sender: %w", ErrConfig, err)
	}
	if err := c.Receiver.Validate(); err != nil {
		return fmt.Errorf("%w: Receiver: %w", ErrConfig, err)
	}
	if c.Sender.Mode != c.Receiver.Mode {
		return bad("Receiver.Mode", c.Receiver.Mode, "the same mode as Sender.Mode")
	}
	if err := c.Budget.Validate(); err != nil {
		return fmt.Errorf("%w: Budget: %w", ErrConfig, err)
	}
	if _, err := budget.NewDetector(c.Eta); err != nil {
		return fmt.Errorf("%w: Eta: %w", ErrConfig, err)
	}
	return nil
}

func (c *Config) dcqcn() congestion.DCQCNConfig {
	d := c.DCQCN
	if d.LineRate == 0 {
		d.LineRate = c.LineRate
	}
	return d
}

func (c *Config) nscc() congestion.NSCCConfig {
	n := c.NSCC
	if n.LineRate == 0 {
		n.LineRate = c.LineRate
	}
	if n.MTU == 0 {
		n.MTU = c.MTU
	}
	if n.BaseRTT == 0 {
		n.BaseRTT = congestion.DefaultNSCCBaseRTT
	}
	return n
}

// controller returns one flow's congestion controller.
func (c *Config) controller() (congestion.Controller, error) {
	if c.CC == congestion.KindNSCC {
		return congestion.NewNSCC(c.nscc())
	}
	return congestion.New(c.CC, c.dcqcn())
}

// scaledWindow is ns-3's GetWin with VAR_WIN: the window times the rate
// over the line rate, in whole bytes (truncated), at least 1.
func scaledWindow(window int, rate, line float64) int {
	if rate >= line || line <= 0 {
		return window
	}
	return max(int(float64(window)*rate/line), 1)
}

func (c *Config) sender() reliability.SenderConfig {
	s := c.Sender
	s.MTU = c.MTU
	return s
}

// ccLineRate is the rate a rate controller starts at: DCQCN's line rate,
// the host link's unless set.
func (e *Engine) ccLineRate() float64 {
	if e.cfg.DCQCN.LineRate != 0 {
		return float64(e.cfg.DCQCN.LineRate)
	}
	return float64(e.cfg.LineRate)
}
