package switchcore

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/forgive-emu/forgive/internal/pfcwd"
	"github.com/forgive-emu/forgive/internal/units"
)

// ErrInvalidConfig is wrapped by every error [Config.Validate] returns.
var ErrInvalidConfig = errors.New("switchcore: invalid config")

// TrimMode says what a port does with a data packet that does not fit in a
// full data queue.
type TrimMode uint8

// Trim modes.
const (
	// TrimOff drops the arriving packet (drop-tail).
	TrimOff TrimMode = iota
	// TrimArrival cuts the arriving packet to its header and puts the
	// header on the strict-priority queue.
	TrimArrival
	// TrimNDP is htsim's composite queue: with probability 1/2 trim the
	// arriving packet, otherwise trim the most recently queued data
	// packet(s) until the arrival fits, and queue the arrival.
	TrimNDP
)

var trimNames = [...]string{"off", "arrival", "ndp"}

// ParseTrimMode reads a trim mode by the name String prints: "off",
// "arrival" or "ndp".
func ParseTrimMode(name string) (TrimMode, error) {
	for m, n := range trimNames {
		if n == name {
			return TrimMode(m), nil
		}
	}
	return 0, fmt.Errorf("%w: trim mode %q (want off, arrival or ndp)", ErrInvalidConfig, name)
}

func (m TrimMode) String() string {
	if int(m) < len(trimNames) {
		return trimNames[m]
	}
	return fmt.Sprintf("TrimMode(%d)", uint8(m))
}

// ECNConfig is a port's RED/ECN marking ramp on data-queue occupancy.
type ECNConfig struct {
	Enabled bool
	// KMin and KMax are occupancies in bytes: no mark at or below KMin,
	// probability PMax·(q−KMin)/(KMax−KMin) up to KMax, always above KMax.
	// KMin == KMax marks deterministically above the one threshold
	// (DCQCN-d).
	KMin, KMax int
	PMax       float64
}

// FaultConfig injects faults on a port's egress link.
type FaultConfig struct {
	// Loss is the probability that a packet put on the link never arrives:
	// a corruption drop, which produces no trimmed header.
	Loss float64
	// The link carries nothing during [DownStart, DownEnd): packets routed
	// to it, dequeued for it or arriving at its far end in the window are
	// dropped. DownStart == DownEnd means the link never goes down.
	DownStart, DownEnd time.Duration
	// Jitter adds a uniform extra delay in [0, Jitter) to each packet's
	// propagation. A link never reorders, so a packet is never emitted
	// before the one sent ahead of it.
	Jitter time.Duration
}

// PortConfig describes one switch port and its egress link.
type PortConfig struct {
	Rate     units.Rate    // egress link rate in bits per second
	Delay    time.Duration // propagation delay of the link
	Overhead int           // framing bytes per packet (Ethernet, IP, UDP, gap) counted in serialization time
	DataCap  int           // data-queue capacity in bytes, shared by the port's data priorities
	// HeaderCap is the strict-priority queue capacity in bytes; zero
	// means 2 × DataCap, htsim's choice.
	HeaderCap int
	ECN       ECNConfig
	Trim      TrimMode
	// RemarkTrimmed sets the DSCP of every header this port trims to
	// TrimmedDSCP (NVIDIA Cumulus remarks trimmed packets to 11).
	RemarkTrimmed bool
	TrimmedDSCP   uint8
	Fault         FaultConfig
	// Host is the id of the host whose NIC this port faces; 0 means the
	// port faces another switch. A packet arriving on a host-facing port
	// must name that host as its source (a PAUSE may name 0, "my link
	// neighbour"), or it is dropped as DropSourceGuard: a host cannot
	// speak for another, as a ToR's IP source guard enforces.
	Host uint16
}

// Classification maps the DSCP of a packet to its treatment.
type Classification struct {
	// Control lists the DSCPs whose packets always take the
	// strict-priority queue. Nil means {46, 48}: EF, on which the UEC
	// reference provider sends ACKs, and 48, on which the Cisco CVD sends
	// CNPs. ACK, NACK and CNP packets take that queue whatever their DSCP,
	// and so do trimmed headers. Every other DSCP is a data class.
	Control []uint8
	// Priority maps a DSCP to its PFC priority (0-7). An unlisted DSCP uses
	// its class selector, DSCP>>3, so CS3/AF31 (24/26) map to priority 3.
	Priority map[uint8]uint8
}

// PFCConfig is priority flow control for one priority. Thresholds are in
// bytes of switch buffer held by packets that came in on one port with this
// priority (in any queue of any egress port).
type PFCConfig struct {
	Enabled bool
	// XOff: above it the switch pauses the upstream neighbour. XOn: at or
	// below it the switch resumes it. XOn ≤ XOff.
	XOff, XOn int
	// Headroom absorbs what the neighbour sends before the pause takes
	// effect; a packet that would take the ingress occupancy above
	// XOff+Headroom is dropped. Zero means no limit.
	Headroom int
	// PauseTime is the time a PAUSE frame asks for (the switch refreshes it
	// every PauseTime/2 while above XOn). Zero means 65535 quanta of 512
	// bit times at the port's rate, what 802.1Qbb switches send; it is
	// clamped to the 1–65535 µs a frame can carry.
	PauseTime time.Duration
	// The PFC watchdog bounds the time a data queue is paused over a
	// sliding window, not the length of one pause: a leaky bucket fills
	// with the time the queue is paused and drains, while it is not, at
	// the rate that lets WatchdogLimit of every WatchdogWindow be paused.
	// When it holds WatchdogLimit with data queued, the queue is cleared
	// and ignores pause for WatchdogRecovery. A pause from an empty bucket
	// so fires after the limit (100 ms: Cisco CVD), as a watchdog of
	// continuous pause does, and so does a stream of pauses with breaks
	// between them (PAUSE 0, then PAUSE again): over any interval of
	// length T a queue with data is paused at most WatchdogLimit +
	// T*WatchdogLimit/WatchdogWindow.
	//
	// Zero limit means pfcwd.DefaultLimit (100 ms); negative turns the
	// watchdog off. Zero recovery means the limit; zero window means
	// pfcwd.DefaultWindows limits, and a window must be longer than the
	// limit.
	WatchdogLimit    time.Duration
	WatchdogRecovery time.Duration
	WatchdogWindow   time.Duration
}

// Config describes a whole switch.
type Config struct {
	Ports   []PortConfig
	Classes Classification
	// Routes maps a destination host id to its egress ports; with several,
	// the switch picks one by ECMP hash of (destination, flow, entropy).
	Routes map[uint16][]PortID
	// DefaultRoute is used for destinations Routes does not list (a leaf's
	// uplinks). Empty: such packets are dropped as DropNoRoute.
	DefaultRoute []PortID
	PFC          [NumPriorities]PFCConfig
	// Seed makes every random choice (marking, NDP coin, faults, ECMP hash
	// salt) deterministic.
	Seed uint64
	// NewBuffer allocates the buffer of a PAUSE frame the switch sends,
	// with capacity at least n; nil uses make. Drivers with a buffer pool
	// plug it in here.
	NewBuffer func(n int) []byte
}

// Defaults for parameters left at zero.
const (
	pauseQuanta    = 65535 * 512 // bit times in a maximal 802.1Qbb pause
	maxPauseMicros = 65535
	maxOverhead    = 65535 // keeps serialization arithmetic within 64 bits
)

// defaultControlDSCPs are EF (ACKs) and 48 (CNPs).
var defaultControlDSCPs = []uint8{46, 48}

// Validate checks c and returns every problem found, each naming its field.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: "+format, append([]any{ErrInvalidConfig}, args...)...))
	}
	if len(c.Ports) == 0 || len(c.Ports) >= int(NoPort) {
		bad("Ports: need 1 to %d ports, have %d", int(NoPort)-1, len(c.Ports))
	}
	for i := range c.Ports {
		c.Ports[i].validate(fmt.Sprintf("Ports[%d]", i), bad)
	}
	c.Classes.validate(bad)
	for dst, ports := range c.Routes {
		c.validateRoute(fmt.Sprintf("Routes[%d]", dst), ports, bad)
	}
	if len(c.DefaultRoute) > 0 {
		c.validateRoute("DefaultRoute", c.DefaultRoute, bad)
	}
	for i := range c.PFC {
		c.PFC[i].validate(fmt.Sprintf("PFC[%d]", i), bad)
	}
	return errors.Join(errs...)
}

func (p *PortConfig) validate(name string, bad func(string, ...any)) {
	if p.Rate <= 0 {
		bad("%s.Rate: must be positive, got %d", name, p.Rate)
	}
	if p.Delay < 0 {
		bad("%s.Delay: must not be negative, got %v", name, p.Delay)
	}
	if p.Overhead < 0 || p.Overhead > maxOverhead {
		bad("%s.Overhead: must be in [0, %d], got %d", name, maxOverhead, p.Overhead)
	}
	if p.DataCap <= 0 {
		bad("%s.DataCap: must be positive, got %d", name, p.DataCap)
	}
	if p.HeaderCap < 0 {
		bad("%s.HeaderCap: must not be negative, got %d", name, p.HeaderCap)
	}
	if e := p.ECN; e.Enabled {
		if e.KMin < 0 || e.KMax < e.KMin {
			bad("%s.ECN: need 0 ≤ KMin ≤ KMax, got KMin %d KMax %d", name, e.KMin, e.KMax)
		}
		if !(e.PMax > 0 && e.PMax <= 1) {
			bad("%s.ECN.PMax: must be in (0, 1], got %v", name, e.PMax)
		}
	}
	if p.Trim > TrimNDP {
		bad("%s.Trim: unknown mode %d", name, p.Trim)
	}
	if p.TrimmedDSCP > 63 {
		bad("%s.TrimmedDSCP: must be below 64, got %d", name, p.TrimmedDSCP)
	}
	f := p.Fault
	if !(f.Loss >= 0 && f.Loss <= 1) {
		bad("%s.Fault.Loss: must be in [0, 1], got %v", name, f.Loss)
	}
	if f.DownEnd < f.DownStart {
		bad("%s.Fault: DownEnd %v before DownStart %v", name, f.DownEnd, f.DownStart)
	}
	if f.Jitter < 0 {
		bad("%s.Fault.Jitter: must not be negative, got %v", name, f.Jitter)
	}
}

func (cl *Classification) validate(bad func(string, ...any)) {
	for _, d := range cl.Control {
		if d > 63 {
			bad("Classes.Control: DSCP %d is not below 64", d)
		}
	}
	for d, prio := range cl.Priority {
		if d > 63 {
			bad("Classes.Priority: DSCP %d is not below 64", d)
		}
		if prio >= NumPriorities {
			bad("Classes.Priority[%d]: priority %d is not below %d", d, prio, NumPriorities)
		}
	}
}

func (c *Config) validateRoute(name string, ports []PortID, bad func(string, ...any)) {
	if len(ports) == 0 {
		bad("%s: no ports", name)
	}
	for _, p := range ports {
		if int(p) >= len(c.Ports) {
			bad("%s: port %d does not exist (%d ports)", name, p, len(c.Ports))
		}
	}
}

func (p *PFCConfig) validate(name string, bad func(string, ...any)) {
	if !p.Enabled {
		return
	}
	if p.XOff <= 0 || p.XOn < 0 || p.XOn > p.XOff {
		bad("%s: need 0 ≤ XOn ≤ XOff and XOff > 0, got XOn %d XOff %d", name, p.XOn, p.XOff)
	}
	if p.Headroom < 0 {
		bad("%s.Headroom: must not be negative, got %d", name, p.Headroom)
	}
	if p.PauseTime < 0 || p.PauseTime > maxPauseMicros*time.Microsecond {
		bad("%s.PauseTime: must be in [0, %v], got %v", name, maxPauseMicros*time.Microsecond, p.PauseTime)
	}
	if p.WatchdogRecovery < 0 {
		bad("%s.WatchdogRecovery: must not be negative, got %v", name, p.WatchdogRecovery)
	}
	if limit, _, window, on := p.watchdog(); on && window <= limit {
		bad("%s.WatchdogWindow: must be longer than the limit %v (0: %d limits), got %v", name, limit, pfcwd.DefaultWindows, p.WatchdogWindow)
	}
}

// headerCap returns the strict-priority queue capacity of the port.
func (p *PortConfig) headerCap() int {
	if p.HeaderCap > 0 {
		return p.HeaderCap
	}
	return 2 * p.DataCap
}

// pauseTime returns the duration a PAUSE frame for priority prio asks for
// when sent out of a port of the given rate.
func (p *PFCConfig) pauseTime(rate units.Rate) time.Duration {
	d := p.PauseTime
	if d == 0 {
		d = time.Duration(math.Ceil(pauseQuanta * 1e9 / float64(rate)))
	}
	return min(max(d, time.Microsecond), maxPauseMicros*time.Microsecond)
}

// watchdog returns the watchdog limit, recovery and window; ok is false
// when the watchdog is off (pfcwd.Settings).
func (p *PFCConfig) watchdog() (limit, recovery, window time.Duration, ok bool) {
	return pfcwd.Settings(p.WatchdogLimit, p.WatchdogRecovery, p.WatchdogWindow)
}
