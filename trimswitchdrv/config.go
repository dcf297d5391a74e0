package trimswitchdrv

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/internal/yamlconf"
	"github.com/forgive-emu/forgive/switchcore"
)

// ErrConfig matches (errors.Is) every error LoadConfig, ParseConfig and
// Config.Validate return.
var ErrConfig = errors.New("trimswitchdrv: bad config")

// ConfigError lists the problems found in a configuration. Each problem's
// message starts with the path of its field: `ports[2].rate: "10Gbs":
// unknown unit`. It matches ErrConfig, and unwraps to the problems (so
// errors.Is(err, units.ErrUnit) works).
type ConfigError struct {
	Problems []error
}

func (e *ConfigError) Error() string {
	if len(e.Problems) == 1 {
		return "trimswitchdrv: bad config: " + e.Problems[0].Error()
	}
	var b strings.Builder
	b.WriteString("trimswitchdrv: bad config:")
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.Error())
	}
	return b.String()
}

// Is reports whether target is ErrConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

// Unwrap returns the problems.
func (e *ConfigError) Unwrap() []error { return e.Problems }

// configErrorf is a ConfigError of one problem.
func configErrorf(format string, args ...any) error {
	return &ConfigError{Problems: []error{fmt.Errorf(format, args...)}}
}

// Config is one switch, as written in its YAML file. docs/trimswitch.md
// documents every field; Validate checks them and FabricConfig translates
// them for the engine. It is the file format itself: the lab (lab/topo)
// generates every trimswitch's file by filling it in and encoding it
// (Marshal); empty fields are left out.
type Config struct {
	Name    string `yaml:"name,omitempty"`
	Seed    uint64 `yaml:"seed,omitempty"`
	Metrics string `yaml:"metrics,omitempty"` // host:port of the HTTP server; empty: none
	// LogLevel is debug, info, warn or error; empty means info.
	LogLevel string `yaml:"log_level,omitempty"`
	// MaxDatagram is the receive buffer per datagram; a longer datagram is
	// truncated by the kernel and counted invalid. Zero means 9216.
	MaxDatagram units.Size `yaml:"max_datagram,omitempty"`
	// Batch is the most datagrams one recvmmsg/sendmmsg moves, at most
	// udpio.MaxBatchSize; zero means udpio's default.
	Batch int `yaml:"batch,omitempty"`
	// SocketBuffer is the SO_RCVBUF/SO_SNDBUF of every port; zero means
	// udpio's default.
	SocketBuffer   units.Size     `yaml:"socket_buffer,omitempty"`
	Capture        Capture        `yaml:"capture,omitempty"`
	Classification Classification `yaml:"classification,omitempty"`
	Defaults       PortSettings   `yaml:"defaults,omitempty"`
	PFC            []PFC          `yaml:"pfc,omitempty"`
	Ports          []Port         `yaml:"ports"`
	Routes         []Route        `yaml:"routes,omitempty"`
	// DefaultRoute names the ports (several: ECMP) of destinations no
	// route lists; empty: such packets are dropped.
	DefaultRoute []string `yaml:"default_route,flow,omitempty"`
}

// Capture selects the ports whose traffic is written to a pcap file.
type Capture struct {
	File  string   `yaml:"file,omitempty"`       // empty: no capture
	Ports []string `yaml:"ports,flow,omitempty"` // empty: every port
}

// Classification maps DSCPs to queues and PFC priorities.
type Classification struct {
	// DataDSCPs lists the DSCPs the fabric's senders use for data. It is
	// a check, not a filter: a listed DSCP may not also be a control DSCP.
	// Every DSCP that is not a control DSCP is treated as data.
	DataDSCPs []uint8 `yaml:"data_dscps,flow,omitempty"`
	// ControlDSCPs always take the strict-priority queue. Absent means the
	// engine's default {46, 48}; an empty list means none.
	ControlDSCPs []uint8 `yaml:"control_dscps,flow,omitempty"`
	// Priorities maps a DSCP to its PFC priority; unlisted DSCPs use DSCP>>3.
	Priorities map[uint8]uint8 `yaml:"priorities,omitempty"`
}

// PortSettings are the per-port parameters: the defaults section and the
// overrides of each port. A nil field is unset: a port inherits the
// default, and a required field unset in both is an error.
type PortSettings struct {
	Rate        *units.Rate     `yaml:"rate,omitempty"` // 0: unshaped
	Delay       *units.Duration `yaml:"delay,omitempty"`
	Overhead    *units.Size     `yaml:"overhead,omitempty"`
	DataQueue   *units.Size     `yaml:"data_queue,omitempty"`
	HeaderQueue *units.Size     `yaml:"header_queue,omitempty"` // 0: twice data_queue
	ECN         *ECN            `yaml:"ecn,omitempty"`
	Trim        *TrimMode       `yaml:"trim,omitempty"`
	TrimmedDSCP *Remark         `yaml:"trimmed_dscp,omitempty"`
	Faults      *Faults         `yaml:"faults,omitempty"`
}

// ECN is a RED marking ramp on data-queue occupancy. A port that sets the
// section replaces the default section whole.
type ECN struct {
	Enabled *bool      `yaml:"enabled,omitempty"` // absent: true
	KMin    units.Size `yaml:"kmin"`
	KMax    units.Size `yaml:"kmax"`
	PMax    float64    `yaml:"pmax"`
}

// Faults are injected on a port's egress link.
type Faults struct {
	Loss      float64        `yaml:"loss,omitempty"`
	DownFrom  units.Duration `yaml:"down_from,omitempty"`
	DownUntil units.Duration `yaml:"down_until,omitempty"`
	Jitter    units.Duration `yaml:"jitter,omitempty"`
}

// PFC enables priority flow control on some priorities, switch-wide (the
// engine keeps one PFC configuration per priority, not per port).
type PFC struct {
	Priorities       []uint8        `yaml:"priorities,flow"`
	XOff             units.Size     `yaml:"xoff"`
	XOn              units.Size     `yaml:"xon"`
	Headroom         units.Size     `yaml:"headroom,omitempty"`
	PauseTime        units.Duration `yaml:"pause_time,omitempty"`
	Watchdog         units.Duration `yaml:"watchdog,omitempty"`
	WatchdogRecovery units.Duration `yaml:"watchdog_recovery,omitempty"`
	WatchdogWindow   units.Duration `yaml:"watchdog_window,omitempty"`
	NoWatchdog       bool           `yaml:"no_watchdog,omitempty"`
}

// Port is one switch port: a UDP socket and the neighbour it talks to.
type Port struct {
	Name     string `yaml:"name"`
	Local    string `yaml:"local"`    // address the port's socket binds
	Neighbor string `yaml:"neighbor"` // address egress packets are sent to, and the only one datagrams are taken from
	// Host is the id of the host whose forgived is the neighbour; set, the
	// port's source guard drops packets naming another source host. Empty
	// or 0: the port faces a switch.
	Host         uint16 `yaml:"host,omitempty"`
	PortSettings `yaml:",inline"`
}

// Route sends the listed destination hosts out of the listed ports.
type Route struct {
	Dst   []uint16 `yaml:"dst,flow"`
	Ports []string `yaml:"ports,flow"`
}

// LoadConfig reads and validates a configuration file.
func LoadConfig(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, configErrorf("%w", err)
	}
	return ParseConfig(data)
}

// ParseConfig decodes and validates a YAML document. Unknown keys are
// errors; every error names the path of the field at fault, as in
// `ports[2].rate: "10Gbs": unknown unit`.
func ParseConfig(data []byte) (*Config, error) {
	var c Config
	if errs := yamlconf.Decode(data, &c); errs != nil {
		return nil, &ConfigError{Problems: errs}
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Marshal encodes the configuration as a YAML file under a comment (which
// may span lines; empty: none). ParseConfig reads it back.
func (c *Config) Marshal(comment string) ([]byte, error) {
	return yamlconf.Encode(comment, c)
}

// Defaults for fields left at zero.
const (
	DefaultMaxDatagram = 9216
	DefaultName        = "trimswitch"
	// UnshapedRate stands for rate 0: the engine needs a positive rate, and
	// at an exabit per second a packet's serialization rounds to at most a
	// nanosecond, so the link never holds a packet back.
	UnshapedRate = 1e18
)

// MaxDatagramBytes returns the receive buffer per datagram.
func (c *Config) MaxDatagramBytes() int {
	if c.MaxDatagram == 0 {
		return DefaultMaxDatagram
	}
	return int(c.MaxDatagram)
}

// SwitchName returns the name, or DefaultName.
func (c *Config) SwitchName() string {
	if c.Name == "" {
		return DefaultName
	}
	return c.Name
}

// Effective returns the settings of port i: its overrides over the
// defaults.
func (c *Config) Effective(i int) PortSettings {
	return c.Defaults.overlay(&c.Ports[i].PortSettings)
}

// overlay returns s with every field that o sets replaced.
func (s PortSettings) overlay(o *PortSettings) PortSettings {
	pick(&s.Rate, o.Rate)
	pick(&s.Delay, o.Delay)
	pick(&s.Overhead, o.Overhead)
	pick(&s.DataQueue, o.DataQueue)
	pick(&s.HeaderQueue, o.HeaderQueue)
	pick(&s.ECN, o.ECN)
	pick(&s.Trim, o.Trim)
	pick(&s.TrimmedDSCP, o.TrimmedDSCP)
	pick(&s.Faults, o.Faults)
	return s
}

func pick[T any](dst **T, v *T) {
	if v != nil {
		*dst = v
	}
}

// PortIndex returns the index of the named port.
func (c *Config) PortIndex(name string) (int, bool) {
	for i := range c.Ports {
		if c.Ports[i].Name == name {
			return i, true
		}
	}
	return 0, false
}

// Core translates a validated configuration for the engine.
func (c *Config) Core() switchcore.Config {
	fc := switchcore.Config{
		Ports: make([]switchcore.PortConfig, len(c.Ports)),
		Classes: switchcore.Classification{
			Control:  c.Classification.ControlDSCPs,
			Priority: c.Classification.Priorities,
		},
		Routes: make(map[uint16][]switchcore.PortID),
		Seed:   c.Seed,
	}
	for i := range c.Ports {
		eff := c.Effective(i)
		fc.Ports[i] = eff.fabric()
		fc.Ports[i].Host = c.Ports[i].Host
	}
	for _, r := range c.Routes {
		ids := c.portIDs(r.Ports)
		for _, dst := range r.Dst {
			fc.Routes[dst] = ids
		}
	}
	fc.DefaultRoute = c.portIDs(c.DefaultRoute)
	for _, p := range c.PFC {
		for _, prio := range p.Priorities {
			fc.PFC[prio] = p.fabric()
		}
	}
	return fc
}

func (c *Config) portIDs(names []string) []switchcore.PortID {
	var ids []switchcore.PortID
	for _, n := range names {
		i, _ := c.PortIndex(n)
		ids = append(ids, switchcore.PortID(i))
	}
	return ids
}

// fabric translates effective (validated, complete) port settings.
func (s *PortSettings) fabric() switchcore.PortConfig {
	pc := switchcore.PortConfig{
		Rate:    *s.Rate,
		DataCap: int(*s.DataQueue),
		Trim:    switchcore.TrimOff,
	}
	if pc.Rate == 0 {
		pc.Rate = UnshapedRate
	}
	if s.Delay != nil {
		pc.Delay = s.Delay.Std()
	}
	if s.Overhead != nil {
		pc.Overhead = int(*s.Overhead)
	}
	if s.HeaderQueue != nil {
		pc.HeaderCap = int(*s.HeaderQueue)
	}
	if e := s.ECN; e != nil && e.enabled() {
		pc.ECN = switchcore.ECNConfig{Enabled: true, KMin: int(e.KMin), KMax: int(e.KMax), PMax: e.PMax}
	}
	if s.Trim != nil {
		pc.Trim = switchcore.TrimMode(*s.Trim)
	}
	if r := s.TrimmedDSCP; r != nil && r.Set {
		pc.RemarkTrimmed, pc.TrimmedDSCP = true, r.DSCP
	}
	if f := s.Faults; f != nil {
		pc.Fault = switchcore.FaultConfig{Loss: f.Loss, DownStart: f.DownFrom.Std(), DownEnd: f.DownUntil.Std(), Jitter: f.Jitter.Std()}
	}
	return pc
}

func (e *ECN) enabled() bool { return e.Enabled == nil || *e.Enabled }

func (p *PFC) fabric() switchcore.PFCConfig {
	pc := switchcore.PFCConfig{
		Enabled:          true,
		XOff:             int(p.XOff),
		XOn:              int(p.XOn),
		Headroom:         int(p.Headroom),
		PauseTime:        p.PauseTime.Std(),
		WatchdogLimit:    p.Watchdog.Std(),
		WatchdogRecovery: p.WatchdogRecovery.Std(),
		WatchdogWindow:   p.WatchdogWindow.Std(),
	}
	if p.NoWatchdog {
		pc.WatchdogLimit = -1
	}
	return pc
}
