package forgivedrv

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"go.yaml.in/yaml/v3"

	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/internal/yamlconf"
)

// This file is forgived's file format and its decoding: the types, the
// two loaders and Marshal. What the fields must hold, and their
// translation into the engine's configuration, is validate.go; the key
// files, keyfile.go; what start-up builds from a checked file, prepare.go.

// ErrConfig matches every configuration error.
var ErrConfig = errors.New("forgivedrv: bad config")

// Config is one daemon, as written in its YAML file (docs/forgived.md).
// It is the file format itself: the daemon loads it, and the lab
// (lab/topo) generates every forgived's file by filling it in and encoding
// it, so the two cannot drift apart. Empty fields are left out when
// encoding and take the engine's defaults when loading.
type Config struct {
	Host     uint16 `yaml:"host"`                // host id on the fabric, 1..65535
	Name     string `yaml:"name,omitempty"`      // for logs and status
	Listen   string `yaml:"listen"`              // UDP address of the NIC
	Switch   string `yaml:"switch"`              // UDP address of the switch port it is cabled to
	Socket   string `yaml:"socket"`              // unix socket of the host API
	Metrics  string `yaml:"metrics,omitempty"`   // HTTP address for /metrics; empty: none
	LogLevel string `yaml:"log_level,omitempty"` // debug, info, warn, error
	// Engines is how many NIC engines the daemon runs, each on its own
	// goroutine with its own socket on the listen address (SO_REUSEPORT,
	// steered by flow: docs/forgived.md, "Engines"); absent: 1.
	Engines int `yaml:"engines,omitempty"`

	AllowedUIDs []uint32 `yaml:"allowed_uids,omitempty"`
	AllowedGIDs []uint32 `yaml:"allowed_gids,omitempty"`
	// The socket file's owner and group (numeric ids; absent: the
	// daemon's) and mode (octal, default 0660): a group the allowed users
	// share lets them connect without root.
	SocketOwner *uint32 `yaml:"socket_owner,omitempty"`
	SocketGroup *uint32 `yaml:"socket_group,omitempty"`
	SocketMode  string  `yaml:"socket_mode,omitempty"`
	// Host-API connection limits: in total, per uid before the hello,
	// per job after it, the time a new connection has to say hello, and
	// the time a connection may sit idle with nothing outstanding
	// (defaults 256, 32, 32, 5s, 10m).
	MaxClients       int            `yaml:"max_clients,omitempty"`
	MaxClientsPerUID int            `yaml:"max_clients_per_uid,omitempty"`
	MaxClientsPerJob int            `yaml:"max_clients_per_job,omitempty"`
	HelloTimeout     units.Duration `yaml:"hello_timeout,omitempty"`
	IdleTimeout      units.Duration `yaml:"idle_timeout,omitempty"`

	LineRate  units.Rate     `yaml:"line_rate"`
	MTU       int            `yaml:"mtu,omitempty"`
	ECN       *bool          `yaml:"ecn,omitempty"`
	FailAfter units.Duration `yaml:"fail_after,omitempty"`
	Seed      uint64         `yaml:"seed,omitempty"`
	// SocketBuffer is the NIC socket's SO_RCVBUF and SO_SNDBUF; absent or
	// 0: DefaultSocketBuffer(window).
	SocketBuffer units.Size `yaml:"socket_buffer,omitempty"`

	CC          string            `yaml:"cc,omitempty"` // dcqcn, none or nscc
	DCQCN       DCQCNConfig       `yaml:"dcqcn,omitempty"`
	NSCC        NSCCConfig        `yaml:"nscc,omitempty"`
	CNPInterval units.Duration    `yaml:"cnp_interval,omitempty"`
	Reliability ReliabilityConfig `yaml:"reliability,omitempty"`
	Forgive     ForgiveConfig     `yaml:"forgive,omitempty"`
	DSCP        DSCPConfig        `yaml:"dscp,omitempty"`
	PFC         PFCConfig         `yaml:"pfc,omitempty"`
	Security    SecurityConfig    `yaml:"security,omitempty"`
	// Jobs reserves flow ids for jobs (docs/hostapi.md, "Ownership"): a
	// flow id is the host's on the wire, so whoever holds it receives
	// what a peer sends on it; without a reservation the first client to
	// create it holds it.
	Jobs []JobConfig `yaml:"jobs,omitempty"`
}

// JobConfig reserves the flow ids first_flow to last_flow for the job a
// client of one of uids declares as name in its hello: no other client
// may create a flow with one of them, and the job's clients create flows
// only in its reservations.
type JobConfig struct {
	Name      string   `yaml:"name"`
	UIDs      []uint32 `yaml:"uids"`
	FirstFlow uint32   `yaml:"first_flow"`
	LastFlow  uint32   `yaml:"last_flow"`
}

// SecurityConfig turns on the transport security sublayer (package tss,
// docs/security.md): with at least one domain, every packet but PAUSE is
// sealed on sending and must open on receipt; without, packets go plain
// and a sealed packet is refused as of an unknown domain.
type SecurityConfig struct {
	Domains []SecurityDomain `yaml:"domains,omitempty"`
	// StartFile keeps the epoch of the daemon's last start, so the next
	// start's is larger even if the wall clock stepped back (startfile.go,
	// docs/security.md "Incarnations"). Absent: the socket's path with
	// ".start" appended. Only a sealing daemon reads and writes it.
	StartFile string `yaml:"start_file,omitempty"`
}

// SecurityDomain is one security domain: its id (carried in every sealed
// packet), the file holding its key (forgivectl keygen writes one; it must
// not be readable or writable by group or others), and the hosts in it.
// A domain without hosts is the default: it covers every host no other
// domain lists. A packet is sealed for its destination's domain, and a
// packet whose domain is not its source's is refused.
type SecurityDomain struct {
	ID      uint32   `yaml:"id"`
	KeyFile string   `yaml:"key_file"`
	Hosts   []uint16 `yaml:"hosts,omitempty"`
}

// PFCConfig is the NIC's PAUSE watchdog, with the switch's names
// (trimswitch's pfc section): the host may be paused watchdog at a time
// and watchdog of every watchdog_window over time (nic.Config); beyond
// that the pause ends, and PAUSE is ignored for watchdog_recovery.
type PFCConfig struct {
	Watchdog         units.Duration `yaml:"watchdog,omitempty"`          // default 100ms
	WatchdogRecovery units.Duration `yaml:"watchdog_recovery,omitempty"` // default: watchdog
	WatchdogWindow   units.Duration `yaml:"watchdog_window,omitempty"`   // default: 10 x watchdog
	NoWatchdog       bool           `yaml:"no_watchdog,omitempty"`
}

// DCQCNConfig overrides DCQCN's defaults; zero fields keep them.
type DCQCNConfig struct {
	G           float64        `yaml:"g,omitempty"`
	AlphaTimer  units.Duration `yaml:"alpha_timer,omitempty"`
	RateTimer   units.Duration `yaml:"rate_timer,omitempty"`
	ByteCounter units.Size     `yaml:"byte_counter,omitempty"`
	F           int            `yaml:"f,omitempty"`
	RAI         units.Rate     `yaml:"rai,omitempty"`
	RHAI        units.Rate     `yaml:"rhai,omitempty"`
	MinRate     units.Rate     `yaml:"min_rate,omitempty"`
	// RateReducePeriod: at most one rate cut per period, whatever the
	// number of CNPs (congestion.DefaultRateReducePeriod, 4 µs).
	RateReducePeriod units.Duration `yaml:"rate_reduce_period,omitempty"`
	// Variant is paper (absent: the DCQCN paper's rules) or mellanox (HPCC's
	// ns-3 rdma-hw.cc, congestion.DCQCNMellanox: alpha_timer is its α
	// update period, rate_reduce_period its rate-decrease check, no byte
	// counter, so byte_counter must be absent).
	Variant string `yaml:"variant,omitempty"`
	// ClampTargetRate is the mellanox variant's CLAMP_TARGET_RATE.
	ClampTargetRate bool `yaml:"clamp_target_rate,omitempty"`
}

// NSCCConfig sets NSCC (cc: nscc); zero fields keep the defaults
// (congestion.DefaultNSCC). base_rtt is the network's unloaded RTT of its
// longest path: it sets the BDP, so the window's ceiling of 1.5 BDP, and
// the target queueing delay of 0.75 × base_rtt; absent, it is NSCC's
// reference network's 12 µs.
type NSCCConfig struct {
	BaseRTT      units.Duration `yaml:"base_rtt,omitempty"`
	TargetDelay  units.Duration `yaml:"target_delay,omitempty"`
	Gamma        float64        `yaml:"gamma,omitempty"`
	MaxWindowBDP float64        `yaml:"max_window_bdp,omitempty"`
	NoQuickAdapt bool           `yaml:"no_quick_adapt,omitempty"`
}

// ReliabilityConfig overrides the transport's defaults.
type ReliabilityConfig struct {
	Mode   string     `yaml:"mode,omitempty"` // selective-repeat or go-back-n
	Window units.Size `yaml:"window,omitempty"`
	// PeerWindows is the window of the flows to each peer host, as
	// ranges of host ids in increasing order, not overlapping; a peer in
	// no range takes window. The lab writes each host pair's BDP here for
	// a profile with reliability.window_mode pair-bdp, as ASTRA-sim's
	// ns-3 frontend gives each queue pair its pair's BDP, a run of
	// consecutive peers with one window as one range.
	PeerWindows []PeerWindowRange `yaml:"peer_windows,omitempty"`
	// PeerWindowPeriod, when set, repeats peer_windows every so many host
	// ids: peer p takes the window of the range holding
	// ((p - 1) mod peer_window_period) + 1, and the ranges lie within 1
	// to peer_window_period. The lab sets it where the windows repeat so
	// (a placement that deals consecutive ids round the switches) and it
	// takes fewer ranges.
	PeerWindowPeriod uint16 `yaml:"peer_window_period,omitempty"`
	// WindowScale rate scales a flow's window by its DCQCN rate over the
	// line rate (ns-3's VAR_WIN), never below one packet; absent or none:
	// the window is fixed. Under cc nscc it does nothing: NSCC paces at
	// the line rate and its own window limits the flow.
	WindowScale string         `yaml:"window_scale,omitempty"`
	RTOLow      units.Duration `yaml:"rto_low,omitempty"`
	RTOHigh     units.Duration `yaml:"rto_high,omitempty"`
	AckEvery    units.Size     `yaml:"ack_every,omitempty"`
	AckDelay    units.Duration `yaml:"ack_delay,omitempty"`
	// SpuriousRTO: a timeout resends the oldest packet alone until an ACK
	// tells whether the originals were lost or only late
	// (reliability.SenderConfig.DetectSpuriousRTO); off is IRN's rule.
	SpuriousRTO bool `yaml:"spurious_rto,omitempty"`
}

// PeerWindowRange is the window of the flows to the peer hosts first to
// last (host ids, both included): {first: 2, last: 8, window: 496200B}.
type PeerWindowRange struct {
	First  uint16     `yaml:"first"`
	Last   uint16     `yaml:"last"`
	Window units.Size `yaml:"window"`
}

// MarshalYAML writes a range on one line, as a flow mapping: a host's
// ranges read as a list of them. It builds the node itself, which the
// encoder then writes as it is: a host of a large fabric has many.
func (r PeerWindowRange) MarshalYAML() (any, error) {
	scalar := func(tag, v string) *yaml.Node { return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: v} }
	return &yaml.Node{Kind: yaml.MappingNode, Style: yaml.FlowStyle, Content: []*yaml.Node{
		scalar("!!str", "first"), scalar("!!int", strconv.Itoa(int(r.First))),
		scalar("!!str", "last"), scalar("!!int", strconv.Itoa(int(r.Last))),
		scalar("!!str", "window"), scalar("!!str", r.Window.String()),
	}}, nil
}

// ForgiveConfig is FORGIVE at this receiving rank. Absent probabilities
// take the seed's (package budget's defaults).
type ForgiveConfig struct {
	Enabled     *bool    `yaml:"enabled,omitempty"`
	PLow        *float64 `yaml:"p_low,omitempty"`
	PHigh       *float64 `yaml:"p_high,omitempty"`
	P           *float64 `yaml:"p,omitempty"`
	NoVesting   bool     `yaml:"no_vesting,omitempty"`
	NoExemption bool     `yaml:"no_exemption,omitempty"`
	Eta         float64  `yaml:"eta,omitempty"`
	// Exemption is what an exempt sender's congestion control does
	// (congestion.Exemption): hold (absent, the engine's rule: DCQCN
	// keeps the rate obeying left and recovers on its timers, NSCC holds
	// its window at the ceiling), line-rate (DCQCN restarts at line rate
	// when the exemption begins) or no-cut (NSCC's window keeps its
	// increase rules and is never cut). docs/forgived.md.
	Exemption string `yaml:"exemption,omitempty"`
	// Gather is what this rank does with a trimmed range of a finished
	// value, a receive declared phase gather or gather-owner: forgive
	// (the default, the seed's), repair (never forgive one) or owner
	// (forgive one only in the receive from its owner). docs/forgived.md.
	Gather string `yaml:"gather,omitempty"`
}

// DSCPConfig is the DSCP each traffic class's data carries.
type DSCPConfig struct {
	Gradient *uint8 `yaml:"gradient,omitempty"`
	Tensor   *uint8 `yaml:"tensor,omitempty"`
	Pipeline *uint8 `yaml:"pipeline,omitempty"`
	Other    *uint8 `yaml:"other,omitempty"`
}

// MaxSocketBuffer bounds socket_buffer: 1 GiB, far above what a kernel
// grants a socket by default, and within an int32 SO_RCVBUF request.
const MaxSocketBuffer = 1 << 30

// MaxSocketPath is the longest host-API socket path: sun_path's 108 bytes
// less the terminating NUL.
const MaxSocketPath = 107

// ReadConfig reads a config file and decodes it, without validating it:
// forgived replaces fields with its flags and then checks the result once
// (Prepare), so that --check refuses what start-up refuses and a field a
// flag replaces is not checked as the file wrote it. Unknown keys are
// errors; so is a file that cannot be read (ErrConfig, as a bad file).
func ReadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c, err := decode(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseConfig decodes a YAML document and validates it (Validate). It is
// the second loader because its callers hold a document, not a file, and
// want what the daemon would refuse refused: the simulator builds its
// NICs from the files the lab generates (lab's buildSim), and the tests
// read documents they write. Unknown keys are errors.
func ParseConfig(b []byte) (*Config, error) {
	c, err := decode(b)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// decode reads a config from YAML strictly (internal/yamlconf): unknown
// keys, and an integer written with a fraction, are errors naming their
// field, line and column.
func decode(b []byte) (*Config, error) {
	var c Config
	if errs := yamlconf.Decode(b, &c); errs != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, errors.Join(errs...))
	}
	return &c, nil
}

// Marshal encodes the config as a YAML file under a comment (which may
// span lines; empty: none). ParseConfig reads it back.
func (c *Config) Marshal(comment string) ([]byte, error) {
	return yamlconf.Encode(comment, c)
}
