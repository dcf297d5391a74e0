package forgivedrv

import (
	"fmt"
	"io/fs"
	"math"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/hostapi/nicapi"
	"github.com/forgive-emu/forgive/internal/cli"
	"github.com/forgive-emu/forgive/internal/pfcwd"
	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/nic"
)

// This file is what a decoded file's fields must hold, and its
// translation into the parts start-up builds from: the engine's
// configuration (NIC), the host-API server's (ServerConfig) and the
// addresses (Addresses). Every error names the file's field and matches
// ErrConfig.

// Validate runs every check that starting the daemon makes on its
// configuration, as Prepare runs them, so a file that passes the check
// (forgived --check, ParseConfig) does not fail at start-up for its
// contents. To do so it builds what start-up builds (prepare.go: the
// engines, and the keyring from the key files) and drops it.
func (c *Config) Validate() error {
	_, err := c.prepare([32]byte{})
	return err
}

// checkDaemon checks the fields of the daemon itself, which no part that
// start-up builds reads: the log level, the metrics address, the number
// of engines, the socket's path and buffer. It returns every problem.
func (c *Config) checkDaemon() []error {
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
	return errs
}

func fieldErr(field string, v any, want string) error {
	return fmt.Errorf("%w: %s: %v: want %s", ErrConfig, field, v, want)
}

// ServerConfig is the host-API server's part of the file.
func (c *Config) ServerConfig() (hostapi.ServerConfig, error) {
	sc := hostapi.ServerConfig{
		HostID: hostapi.HostID(c.Host), HostName: c.Name,
		AllowedUIDs: c.AllowedUIDs, AllowedGIDs: c.AllowedGIDs,
		SocketUID: c.SocketOwner, SocketGID: c.SocketGroup,
		MaxClients: c.MaxClients, MaxClientsPerUID: c.MaxClientsPerUID, MaxClientsPerJob: c.MaxClientsPerJob,
		HelloTimeout: c.HelloTimeout.Std(),
		IdleTimeout:  c.IdleTimeout.Std(),
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
	if c.MaxClientsPerJob < 0 {
		return sc, fieldErr("max_clients_per_job", c.MaxClientsPerJob, ">= 1 (absent: 32)")
	}
	if _, err := c.Reservations(); err != nil {
		return sc, err
	}
	return sc, nil
}

// Reservations are the jobs section as the host API holds it. Each job
// has a valid name (as a hello declares it), at least one uid and a
// range of flow ids; no two ranges overlap.
func (c *Config) Reservations() ([]nicapi.Reservation, error) {
	out := make([]nicapi.Reservation, 0, len(c.Jobs))
	for i, j := range c.Jobs {
		field := fmt.Sprintf("jobs[%d]", i)
		if err := hostapi.Validate(&hostapi.HelloReq{Versions: []int{hostapi.Version}, Job: j.Name}); err != nil || j.Name == "" {
			return nil, fieldErr(field+".name", fmt.Sprintf("%q", j.Name), "a job name of 1 to 64 letters, digits, '.', '_', '-' or '/'")
		}
		if len(j.UIDs) == 0 {
			return nil, fieldErr(field+".uids", "[]", "the uids whose clients may declare the job")
		}
		if j.FirstFlow == 0 || j.LastFlow < j.FirstFlow {
			return nil, fieldErr(field, fmt.Sprintf("first_flow %d, last_flow %d", j.FirstFlow, j.LastFlow), "1 <= first_flow <= last_flow")
		}
		for k, o := range out {
			if uint32(o.First) <= j.LastFlow && j.FirstFlow <= uint32(o.Last) {
				return nil, fieldErr(field, fmt.Sprintf("flows %d to %d", j.FirstFlow, j.LastFlow), fmt.Sprintf("a range that jobs[%d]'s (%d to %d) does not overlap", k, o.First, o.Last))
			}
		}
		out = append(out, nicapi.Reservation{Job: j.Name, UIDs: j.UIDs, First: hostapi.FlowID(j.FirstFlow), Last: hostapi.FlowID(j.LastFlow)})
	}
	return out, nil
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

// NIC translates the file into the engine's configuration and checks it
// (nic.Config.Validate), naming the file's field on error: absent fields
// keep nic.DefaultConfig's values, which take the seed's P_low, P_high
// and P from package budget.
func (c *Config) NIC() (nic.Config, error) {
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
	// FORGIVE: the budget's configuration, which the engine hands to
	// budget.NewLedger as it is.
	f := c.Forgive
	g, err := budget.ParseGatherPolicy(f.Gather)
	if err != nil {
		return n, fieldErr("forgive.gather", fmt.Sprintf("%q", f.Gather), "forgive, repair or owner")
	}
	n.Budget.Gather = g
	if f.Enabled != nil {
		n.Forgive = *f.Enabled
	}
	setP(&n.Budget.PLow, f.PLow)
	setP(&n.Budget.PHigh, f.PHigh)
	setP(&n.Budget.P, f.P)
	n.Budget.NoVesting, n.Budget.NoExemption = f.NoVesting, f.NoExemption
	if err := n.SetExemption(f.Exemption); err != nil {
		want := "hold, line-rate or no-cut"
		if slices.Contains([]string{"hold", "line-rate", "no-cut"}, f.Exemption) {
			want = fmt.Sprintf("a rule for cc %v: %v", n.CC, err)
		}
		return n, fieldErr("forgive.exemption", fmt.Sprintf("%q", f.Exemption), want)
	}
	setF(&n.Eta, f.Eta)
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
	if err := n.Validate(); err != nil {
		return n, fmt.Errorf("%w: %w", ErrConfig, err)
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
	if len(r.PeerWindows) > 0 {
		n.PeerWindows = make(nic.PeerWindows, len(r.PeerWindows))
	}
	for i, pw := range r.PeerWindows {
		at := fmt.Sprintf("reliability.peer_windows[%d]", i)
		switch {
		case pw.First < 1:
			return fieldErr(at+".first", pw.First, "a host id, 1 or more")
		case pw.Last < pw.First:
			return fieldErr(at+".last", pw.Last, fmt.Sprintf("first (%d) or more", pw.First))
		case i > 0 && pw.First <= r.PeerWindows[i-1].Last:
			return fieldErr(at+".first", pw.First, fmt.Sprintf("above peer_windows[%d].last (%d): ranges in increasing order, not overlapping", i-1, r.PeerWindows[i-1].Last))
		case pw.Window < 1 || pw.Window > math.MaxInt32:
			return fieldErr(at+".window", pw.Window.String(), "a size of 1 byte to 2GiB")
		case r.PeerWindowPeriod != 0 && pw.Last > r.PeerWindowPeriod:
			return fieldErr(at+".last", pw.Last, fmt.Sprintf("peer_window_period (%d) or less", r.PeerWindowPeriod))
		}
		n.PeerWindows[i] = nic.PeerWindowRange{First: pw.First, Last: pw.Last, Window: int(pw.Window)}
	}
	if r.PeerWindowPeriod != 0 && len(r.PeerWindows) == 0 {
		return fieldErr("reliability.peer_window_period", r.PeerWindowPeriod, "absent without peer_windows")
	}
	n.PeerWindowPeriod = r.PeerWindowPeriod
	switch r.WindowScale {
	case "", "none":
	case "rate":
		n.RateScaledWindow = true
	default:
		return fieldErr("reliability.window_scale", r.WindowScale, "none or rate")
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

// setP sets a probability the file wrote; absent (nil), it keeps the
// default, and a written 0 is 0.
func setP(dst *float64, v *float64) {
	if v != nil {
		*dst = *v
	}
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
