package forgivedrv

import (
	"crypto/rand"
	"errors"
	"fmt"
	"github.com/forgive-emu/forgive/budget"
	"io"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/internal/cli"
	"github.com/forgive-emu/forgive/internal/pfcwd"
	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/internal/yamlconf"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/tss"
	"github.com/forgive-emu/forgive/udpio"
)

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
	// Host-API connection limits: in total, per uid, the time a new
	// connection has to say hello, and the time a connection may sit idle
	// with nothing outstanding (defaults 256, 32, 5s, 10m).
	MaxClients       int            `yaml:"max_clients,omitempty"`
	MaxClientsPerUID int            `yaml:"max_clients_per_uid,omitempty"`
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
}

// SecurityConfig turns on the transport security sublayer (package tss,
// docs/security.md): with at least one domain, every packet but PAUSE is
// sealed on sending and must open on receipt; without, packets go plain
// and a sealed packet is refused as of an unknown domain.
type SecurityConfig struct {
	Domains []SecurityDomain `yaml:"domains,omitempty"`
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

// Keyring reads the key files of the security section and derives the
// domains' keys; it is nil (and no error) when the section names no
// domain. An error names the field.
func (c *Config) Keyring() (*tss.Keyring, error) {
	if len(c.Security.Domains) == 0 {
		return nil, nil
	}
	ds := make([]tss.Domain, 0, len(c.Security.Domains))
	for i, d := range c.Security.Domains {
		field := fmt.Sprintf("security.domains[%d].key_file", i)
		if d.KeyFile == "" {
			return nil, fieldErr(field, `""`, "the path of a key file (forgivectl keygen writes one)")
		}
		key, err := readKeyFile(d.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrConfig, field, err)
		}
		ds = append(ds, tss.Domain{ID: d.ID, Key: key, Hosts: d.Hosts})
	}
	ring, err := tss.NewKeyring(ds...)
	if err != nil {
		return nil, fmt.Errorf("%w: security.domains: %w", ErrConfig, err)
	}
	if _, ok := ring.DomainOf(c.Host); !ok {
		return nil, fieldErr("security.domains", fmt.Sprintf("no domain for host %d", c.Host),
			"this host listed in a domain's hosts, or a default domain (one without hosts)")
	}
	return ring, nil
}

// readKeyFile reads a key file that only the daemon may read, write or
// replace: a regular file named directly (not through a symbolic link),
// owned by the daemon's uid, mode 0600 or stricter, in a directory that
// only root or the daemon's uid owns and no group or other user can
// write, under ancestors no other user can write (a sticky directory
// such as /tmp excepted: others cannot rename what they do not own in
// it). Each refusal names its reason.
func readKeyFile(path string) (tss.Key, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return tss.Key{}, fmt.Errorf("%s: a symbolic link: name the key file itself, whose owner and directory are checked", path)
	}
	// O_NOFOLLOW: a link put in its place since the Lstat is refused too.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		return tss.Key{}, fmt.Errorf("%s: a symbolic link: name the key file itself, whose owner and directory are checked", path)
	}
	if err != nil {
		return tss.Key{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return tss.Key{}, err
	}
	if !st.Mode().IsRegular() {
		return tss.Key{}, fmt.Errorf("%s: not a regular file", path)
	}
	euid := uint32(os.Geteuid())
	if uid, ok := ownerOf(st); !ok || uid != euid {
		return tss.Key{}, fmt.Errorf("%s: owned by uid %d, not the daemon's uid %d: another user controls the key (chown %d %s)", path, uid, euid, euid, path)
	}
	if m := st.Mode().Perm(); m&0o077 != 0 {
		return tss.Key{}, fmt.Errorf("%s: mode %04o lets group or others at the key: want 0600 (chmod 600 %s)", path, m, path)
	}
	if err := checkKeyDirs(path, euid); err != nil {
		return tss.Key{}, err
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return tss.Key{}, fmt.Errorf("%s: %w", path, err)
	}
	k, err := tss.ParseKeyFile(b)
	if err != nil {
		return tss.Key{}, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// checkKeyDirs refuses a key whose directory another user could write or
// owns, or under an ancestor another user could write (unless sticky):
// such a user could replace the key, or the directory holding it.
func checkKeyDirs(path string, euid uint32) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	dir := filepath.Dir(abs)
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("%s: directory %s: %w", path, d, err)
		}
		m := fi.Mode()
		sticky := m&fs.ModeSticky != 0 && d != dir
		if m.Perm()&0o022 != 0 && !sticky {
			return fmt.Errorf("%s: directory %s is mode %04o, writable by group or others, who could replace the key (chmod go-w %s)", path, d, m.Perm(), d)
		}
		if uid, ok := ownerOf(fi); !ok || (uid != 0 && uid != euid && !sticky) {
			return fmt.Errorf("%s: directory %s is owned by uid %d, not root or the daemon's uid %d", path, d, uid, euid)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// ownerOf returns the uid that owns a file.
func ownerOf(fi fs.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
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
	Mode     string         `yaml:"mode,omitempty"` // selective-repeat or go-back-n
	Window   units.Size     `yaml:"window,omitempty"`
	RTOLow   units.Duration `yaml:"rto_low,omitempty"`
	RTOHigh  units.Duration `yaml:"rto_high,omitempty"`
	AckEvery units.Size     `yaml:"ack_every,omitempty"`
	AckDelay units.Duration `yaml:"ack_delay,omitempty"`
	// SpuriousRTO: a timeout resends the oldest packet alone until an ACK
	// tells whether the originals were lost or only late
	// (reliability.SenderConfig.DetectSpuriousRTO); off is IRN's rule.
	SpuriousRTO bool `yaml:"spurious_rto,omitempty"`
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

// DefaultSocketBuffer is the socket buffer of a daemon whose file sets
// none, for a reliability window of window bytes: twice the window, and at
// least udpio's default of 4 MiB. A receiver's socket must hold a peer's
// whole window while its loop is descheduled: on loopback the kernel
// charges about 8.4 KB per 4 KiB datagram that arrives alone (docs/profiles.md),
// so a 4 MiB buffer holds about 990 of them, less than the 1024 packets of
// a 4 MiB window, and the window's tail is dropped before the daemon reads
// it (BenchmarkOneFlow's sockdrops/op, docs/trimswitch.md).
func DefaultSocketBuffer(window int) int {
	return max(udpio.DefaultSocketBuffer, 2*window)
}

// MaxSocketPath is the longest host-API socket path: sun_path's 108 bytes
// less the terminating NUL.
const MaxSocketPath = 107

// LoadConfig reads and validates a config file.
func LoadConfig(path string) (*Config, error) {
	c, err := ReadConfig(path)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ReadConfig reads a config file without validating it, for a caller that
// changes fields first (forgived's flags) and then checks the result once
// (Prepare); unknown keys are errors.
func ReadConfig(path string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c, err := DecodeConfig(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// ParseConfig reads a config from YAML and validates it (Validate);
// unknown keys are errors.
func ParseConfig(b []byte) (*Config, error) {
	c, err := DecodeConfig(b)
	if err != nil {
		return nil, err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}

// DecodeConfig reads a config from YAML without validating it; unknown
// keys are errors.
func DecodeConfig(b []byte) (*Config, error) {
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

// Validate runs every check that starting the daemon makes on its
// configuration, as Prepare runs them, so a file that passes the check
// (forgived --check, ParseConfig, LoadConfig) does not fail at start-up
// for its contents.
func (c *Config) Validate() error {
	_, err := c.prepare([32]byte{})
	return err
}

// Prepared is a configuration checked once and what start-up derives from
// it: the NIC engine (its configuration validated by nic.New, once), the
// host-API server's configuration and the security domains' keyring (each
// key file read once). NewPrepared starts a daemon on it, once.
type Prepared struct {
	cfg    *Config
	eng    *nic.Engine
	more   []*nic.Engine // the other engines of the group (engines > 1)
	ncfg   nic.Config
	server hostapi.ServerConfig
	ring   *tss.Keyring
	// sockBuf is the socket's SO_RCVBUF and SO_SNDBUF request.
	sockBuf int
}

// Prepare runs every check of c (Validate's) and builds what start-up
// needs from it. The flow tags are seeded from the kernel's CSPRNG: an
// off-path sender must not be able to guess them (the simulator keeps them
// derived from its seed).
func Prepare(c *Config) (*Prepared, error) {
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("forgivedrv: flow tag seed: %w", err)
	}
	return c.prepare(seed)
}

// prepare is Prepare with the flow tag seed given: zero derives it from
// the config's seed, as the simulator does.
func (c *Config) prepare(tagSeed [32]byte) (*Prepared, error) {
	p := &Prepared{cfg: c}
	var errs []error
	if _, err := cli.ParseLevel(c.LogLevel); err != nil {
		errs = append(errs, fmt.Errorf("%w: log_level: %w", ErrConfig, err))
	}
	if c.Metrics != "" {
		if err := cli.CheckHostPort(c.Metrics); err != nil {
			errs = append(errs, fmt.Errorf("%w: metrics: %w", ErrConfig, err))
		}
	}
	if c.Engines < 0 || c.Engines > MaxEngines {
		errs = append(errs, fieldErr("engines", c.Engines, fmt.Sprintf("1..%d (absent: 1)", MaxEngines)))
	} else if c.Engines > 1 && len(c.Security.Domains) > 0 {
		// Each engine would seal with a sealer of its own: its nonces,
		// and a peer's replay windows, are per sender start.
		errs = append(errs, fieldErr("engines", c.Engines, "1 with security domains: sealing runs on one engine"))
	}
	if len(c.Socket) > MaxSocketPath {
		errs = append(errs, fieldErr("socket", c.Socket, fmt.Sprintf("a path of at most %d bytes", MaxSocketPath)))
	}
	if c.SocketBuffer < 0 || c.SocketBuffer > MaxSocketBuffer {
		errs = append(errs, fieldErr("socket_buffer", c.SocketBuffer.String(), "a size of at most 1GiB (absent: twice the window, at least 4MiB)"))
	}
	if n, err := c.nicConfig(); err != nil {
		errs = append(errs, err)
	} else {
		p.sockBuf = int(c.SocketBuffer)
		if p.sockBuf == 0 {
			p.sockBuf = DefaultSocketBuffer(n.Sender.Window)
		}
		n.TagSeed = tagSeed
		if engs, err := nic.NewGroup(n, c.engines()); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrConfig, err))
		} else {
			p.eng, p.more = engs[0], engs[1:]
		}
		p.ncfg = n
	}
	var err error
	if p.server, err = c.ServerConfig(); err != nil {
		errs = append(errs, err)
	}
	if p.ring, err = c.Keyring(); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// engines is the number of engines: Engines, or 1 when absent (or out of
// range, which prepare refuses by name).
func (c *Config) engines() int {
	if c.Engines < 1 || c.Engines > MaxEngines {
		return 1
	}
	return c.Engines
}

// ServerConfig is the host-API server's part of the file.
func (c *Config) ServerConfig() (hostapi.ServerConfig, error) {
	sc := hostapi.ServerConfig{
		HostID: hostapi.HostID(c.Host), HostName: c.Name,
		AllowedUIDs: c.AllowedUIDs, AllowedGIDs: c.AllowedGIDs,
		SocketUID: c.SocketOwner, SocketGID: c.SocketGroup,
		MaxClients: c.MaxClients, MaxClientsPerUID: c.MaxClientsPerUID, HelloTimeout: c.HelloTimeout.Std(),
		IdleTimeout: c.IdleTimeout.Std(),
	}
	if c.SocketMode != "" {
		m, err := strconv.ParseUint(c.SocketMode, 8, 32)
		if err != nil || m == 0 || m > 0o777 {
			return sc, fieldErr("socket_mode", c.SocketMode, "an octal permission such as 0660")
		}
		sc.SocketMode = fs.FileMode(m)
	}
	if c.MaxClients < 0 {
		return sc, fieldErr("max_clients", c.MaxClients, ">= 1 (absent: 256)")
	}
	if c.MaxClientsPerUID < 0 {
		return sc, fieldErr("max_clients_per_uid", c.MaxClientsPerUID, ">= 1 (absent: 32)")
	}
	return sc, nil
}

func fieldErr(field string, v any, want string) error {
	return fmt.Errorf("%w: %s: %v: want %s", ErrConfig, field, v, want)
}

// Addresses returns the parsed UDP addresses of the NIC and its switch:
// IPv4, as the fabric's sockets are; the NIC may listen on port 0 (any).
func (c *Config) Addresses() (listen, sw netip.AddrPort, err error) {
	if listen, err = netip.ParseAddrPort(c.Listen); err != nil || !listen.Addr().Is4() {
		return listen, sw, fieldErr("listen", c.Listen, "an IPv4 address and port, like 127.0.0.1:4793")
	}
	if sw, err = netip.ParseAddrPort(c.Switch); err != nil || !sw.Addr().Is4() || sw.Port() == 0 {
		return listen, sw, fieldErr("switch", c.Switch, "an IPv4 address and port, like 127.0.0.101:4793")
	}
	return listen, sw, nil
}

// NIC translates the file into the engine's configuration and checks it,
// naming the file's field on error.
func (c *Config) NIC() (nic.Config, error) {
	n, err := c.nicConfig()
	if err != nil {
		return n, err
	}
	if err := n.Validate(); err != nil {
		return n, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	return n, nil
}

// nicConfig is NIC without the engine's own checks (nic.Config.Validate,
// which nic.New runs).
func (c *Config) nicConfig() (nic.Config, error) {
	if c.Host == 0 {
		return nic.Config{}, fieldErr("host", c.Host, "1..65535")
	}
	if _, _, err := c.Addresses(); err != nil {
		return nic.Config{}, err
	}
	if c.Socket == "" {
		return nic.Config{}, fieldErr("socket", `""`, "a unix socket path")
	}
	if c.LineRate <= 0 {
		return nic.Config{}, fieldErr("line_rate", c.LineRate, "a rate such as 1Gbps")
	}
	n := nic.DefaultConfig(c.Host, c.LineRate)
	if c.MTU != 0 {
		n.MTU = c.MTU
	}
	if c.ECN != nil {
		n.ECN = *c.ECN
	}
	if c.FailAfter != 0 {
		n.FailAfter = c.FailAfter.Std()
	}
	n.Seed = c.Seed
	if c.CC != "" {
		if err := n.SetCC(c.CC); err != nil {
			return n, fieldErr("cc", c.CC, "dcqcn, none or nscc")
		}
	}
	if err := c.DCQCN.apply(&n); err != nil {
		return n, err
	}
	if err := c.NSCC.apply(&n); err != nil {
		return n, err
	}
	if c.CNPInterval != 0 {
		n.Notifier.Interval = c.CNPInterval.Std()
	}
	if err := c.Reliability.apply(&n); err != nil {
		return n, err
	}
	if err := c.Forgive.apply(&n); err != nil {
		return n, err
	}
	if c.PFC.Watchdog < 0 || c.PFC.WatchdogRecovery < 0 || c.PFC.WatchdogWindow < 0 {
		return n, fieldErr("pfc", fmt.Sprintf("%v/%v/%v", c.PFC.Watchdog, c.PFC.WatchdogRecovery, c.PFC.WatchdogWindow), "durations that are not negative")
	}
	n.WatchdogLimit, n.WatchdogRecovery = c.PFC.Watchdog.Std(), c.PFC.WatchdogRecovery.Std()
	n.WatchdogWindow = c.PFC.WatchdogWindow.Std()
	if c.PFC.NoWatchdog {
		n.WatchdogLimit = -1
	}
	if limit, _, window, on := pfcwd.Settings(n.WatchdogLimit, n.WatchdogRecovery, n.WatchdogWindow); on && window <= limit {
		return n, fieldErr("pfc.watchdog_window", c.PFC.WatchdogWindow.String(), fmt.Sprintf("longer than the watchdog's %v (absent: %d x watchdog)", limit, pfcwd.DefaultWindows))
	}
	for cls, v := range []*uint8{c.DSCP.Gradient, c.DSCP.Tensor, c.DSCP.Pipeline, c.DSCP.Other} {
		if v != nil {
			n.DSCP[cls] = *v
		}
	}
	return n, nil
}

func (d DCQCNConfig) apply(n *nic.Config) error {
	c := &n.DCQCN
	if err := n.SetDCQCNVariant(d.Variant); err != nil {
		return fieldErr("dcqcn.variant", d.Variant, "paper or mellanox")
	}
	mellanox := n.DCQCN.Variant.String() == "mellanox"
	if mellanox && d.ByteCounter != 0 {
		return fieldErr("dcqcn.byte_counter", d.ByteCounter, "absent with variant mellanox (it has no byte counter)")
	}
	if !mellanox && d.ClampTargetRate {
		return fieldErr("dcqcn.clamp_target_rate", true, "absent unless variant is mellanox (the paper's form always clamps)")
	}
	c.ClampTargetRate = d.ClampTargetRate
	setF(&c.G, d.G)
	setD(&c.AlphaTimer, d.AlphaTimer)
	setD(&c.RateTimer, d.RateTimer)
	setD(&c.RateReducePeriod, d.RateReducePeriod)
	if d.ByteCounter != 0 {
		c.ByteCounter = int64(d.ByteCounter)
	}
	if d.F != 0 {
		c.F = d.F
	}
	setF(&c.RAI, float64(d.RAI))
	setF(&c.RHAI, float64(d.RHAI))
	setF(&c.MinRate, float64(d.MinRate))
	return nil
}

func (d NSCCConfig) apply(n *nic.Config) error {
	if d.BaseRTT < 0 || d.TargetDelay < 0 {
		return fieldErr("nscc", fmt.Sprintf("base_rtt %v, target_delay %v", d.BaseRTT, d.TargetDelay), "durations that are not negative")
	}
	c := &n.NSCC
	setD(&c.BaseRTT, d.BaseRTT)
	setD(&c.TargetDelay, d.TargetDelay)
	setF(&c.Gamma, d.Gamma)
	setF(&c.MaxWindowBDP, d.MaxWindowBDP)
	if d.NoQuickAdapt {
		c.NoQuickAdapt = true
	}
	return nil
}

func (r ReliabilityConfig) apply(n *nic.Config) error {
	if r.Mode != "" {
		if err := n.SetRecovery(r.Mode); err != nil {
			return fieldErr("reliability.mode", r.Mode, "selective-repeat or go-back-n")
		}
	}
	if r.Window != 0 {
		n.Sender.Window = int(r.Window)
	}
	setD(&n.Sender.RTOLow, r.RTOLow)
	setD(&n.Sender.RTOHigh, r.RTOHigh)
	if r.SpuriousRTO {
		n.Sender.DetectSpuriousRTO = true
	}
	if r.AckEvery != 0 {
		n.Receiver.AckEvery = int(r.AckEvery)
	}
	setD(&n.Receiver.AckDelay, r.AckDelay)
	return nil
}

func (f ForgiveConfig) apply(n *nic.Config) error {
	g, err := budget.ParseGatherPolicy(f.Gather)
	if err != nil {
		return fieldErr("forgive.gather", fmt.Sprintf("%q", f.Gather), "forgive, repair or owner")
	}
	n.Budget.Gather = g
	if f.Enabled != nil {
		n.Forgive = *f.Enabled
	}
	b := &n.Budget
	for _, p := range []struct {
		dst *float64
		src *float64
	}{{&b.PLow, f.PLow}, {&b.PHigh, f.PHigh}, {&b.P, f.P}} {
		if p.src != nil {
			*p.dst = *p.src
		}
	}
	b.NoVesting, b.NoExemption = f.NoVesting, f.NoExemption
	setF(&n.Eta, f.Eta)
	return nil
}

func setF(dst *float64, v float64) {
	if v != 0 {
		*dst = v
	}
}

func setD(dst *time.Duration, v units.Duration) {
	if v != 0 {
		*dst = v.Std()
	}
}
