package trimswitchdrv

import (
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"time"

	"github.com/forgive-emu/forgive/internal/cli"
	"github.com/forgive-emu/forgive/switchcore"
	"github.com/forgive-emu/forgive/udpio"
)

// problems collects validation errors, each naming its field.
type problems []error

func (p *problems) add(path, format string, args ...any) {
	*p = append(*p, fmt.Errorf("%s: %s", path, fmt.Sprintf(format, args...)))
}

var portName = regexp.MustCompile(`^[A-Za-z0-9_.-]+$`)

// maxPause is the longest pause a PAUSE frame carries.
const maxPause = 65535 * time.Microsecond

// Validate checks every field and returns all problems found, joined.
// It is every check that starting the switch makes on its configuration:
// ParseConfig, Open and trimswitch --check all call it, so a file that
// passes the check does not fail at start-up for its contents.
func (c *Config) Validate() error {
	var p problems
	if _, err := cli.ParseLevel(c.LogLevel); err != nil {
		p.add("log_level", "%v", err)
	}
	if c.Metrics != "" {
		if err := cli.CheckHostPort(c.Metrics); err != nil {
			p.add("metrics", "%v", err)
		}
	}
	if c.MaxDatagram < 0 || c.MaxDatagram > 65535 {
		p.add("max_datagram", "%v: want at most 65535 bytes", c.MaxDatagram)
	}
	if c.Batch < 0 || c.Batch > udpio.MaxBatchSize {
		p.add("batch", "%d: want 0 (the default) to %d datagrams", c.Batch, udpio.MaxBatchSize)
	}
	if c.SocketBuffer < 0 || c.SocketBuffer > math.MaxInt32 {
		p.add("socket_buffer", "%v: want 0 (the default) to %d bytes", c.SocketBuffer, math.MaxInt32)
	}
	c.Classification.validate(&p)
	c.Defaults.validate(&p, "defaults")
	for i := range c.PFC {
		c.PFC[i].validate(&p, fmt.Sprintf("pfc[%d]", i))
	}
	c.validatePFCPriorities(&p)
	c.validatePorts(&p)
	c.validateRoutes(&p)
	c.validateCapture(&p)
	if len(p) == 0 {
		// What the engine checks beyond the file's own rules.
		fc := c.Core()
		if err := fc.Validate(); err != nil {
			p = append(p, err)
		}
	}
	if len(p) == 0 {
		return nil
	}
	return &ConfigError{Problems: p}
}

func (cl *Classification) validate(p *problems) {
	control := map[uint8]bool{}
	for i, d := range cl.ControlDSCPs {
		checkDSCP(p, fmt.Sprintf("classification.control_dscps[%d]", i), d)
		control[d] = true
	}
	for i, d := range cl.DataDSCPs {
		path := fmt.Sprintf("classification.data_dscps[%d]", i)
		checkDSCP(p, path, d)
		if control[d] || (cl.ControlDSCPs == nil && (d == 46 || d == 48)) {
			p.add(path, "DSCP %d is also a control DSCP", d)
		}
	}
	for d, prio := range cl.Priorities {
		path := fmt.Sprintf("classification.priorities.%d", d)
		checkDSCP(p, path, d)
		if prio >= switchcore.NumPriorities {
			p.add(path, "priority %d: want 0 to %d", prio, switchcore.NumPriorities-1)
		}
	}
}

func checkDSCP(p *problems, path string, d uint8) {
	if d > 63 {
		p.add(path, "DSCP %d: want 0 to 63", d)
	}
}

// validate checks the fields s sets; required fields are checked on the
// effective settings of each port.
func (s *PortSettings) validate(p *problems, path string) {
	if s.DataQueue != nil && *s.DataQueue <= 0 {
		p.add(path+".data_queue", "must be positive")
	}
	if e := s.ECN; e != nil && e.enabled() {
		if e.KMax < e.KMin {
			p.add(path+".ecn", "kmax %v is below kmin %v", e.KMax, e.KMin)
		}
		if !(e.PMax > 0 && e.PMax <= 1) {
			p.add(path+".ecn.pmax", "%v: want a probability in (0, 1]", e.PMax)
		}
	}
	if f := s.Faults; f != nil {
		if !(f.Loss >= 0 && f.Loss <= 1) {
			p.add(path+".faults.loss", "%v: want a probability in [0, 1]", f.Loss)
		}
		if f.DownUntil < f.DownFrom {
			p.add(path+".faults", "down_until %v is before down_from %v", f.DownUntil, f.DownFrom)
		}
	}
}

// requireSettings checks that a port's effective settings are complete.
func requireSettings(p *problems, path string, s PortSettings) {
	if s.Rate == nil {
		p.add(path+".rate", "missing (set it here or in defaults; 0 means unshaped)")
	}
	if s.DataQueue == nil {
		p.add(path+".data_queue", "missing (set it here or in defaults)")
	}
}

func (f *PFC) validate(p *problems, path string) {
	if len(f.Priorities) == 0 {
		p.add(path+".priorities", "missing")
	}
	for i, prio := range f.Priorities {
		if prio >= switchcore.NumPriorities {
			p.add(fmt.Sprintf("%s.priorities[%d]", path, i), "priority %d: want 0 to %d", prio, switchcore.NumPriorities-1)
		}
	}
	if f.XOff <= 0 {
		p.add(path+".xoff", "must be positive")
	}
	if f.XOn > f.XOff {
		p.add(path+".xon", "%v is above xoff %v", f.XOn, f.XOff)
	}
	if f.PauseTime.Std() > maxPause {
		p.add(path+".pause_time", "%v: a PAUSE frame carries at most %v", f.PauseTime, maxPause)
	}
}

func (c *Config) validatePFCPriorities(p *problems) {
	seen := map[uint8]bool{}
	for i := range c.PFC {
		for j, prio := range c.PFC[i].Priorities {
			if seen[prio] {
				p.add(fmt.Sprintf("pfc[%d].priorities[%d]", i, j), "priority %d is configured twice", prio)
			}
			seen[prio] = true
		}
	}
}

func (c *Config) validatePorts(p *problems) {
	if len(c.Ports) == 0 {
		p.add("ports", "missing: a switch needs at least one port")
	}
	if len(c.Ports) >= int(switchcore.NoPort) {
		p.add("ports", "%d ports: at most %d", len(c.Ports), int(switchcore.NoPort)-1)
	}
	names := map[string]int{}
	locals := map[netip.AddrPort]int{}
	for i := range c.Ports {
		path := fmt.Sprintf("ports[%d]", i)
		port := &c.Ports[i]
		switch {
		case port.Name == "":
			p.add(path+".name", "missing")
		case !portName.MatchString(port.Name):
			p.add(path+".name", "%q: use letters, digits, '_', '.' and '-'", port.Name)
		default:
			if j, dup := names[port.Name]; dup {
				p.add(path+".name", "%q is also the name of ports[%d]", port.Name, j)
			}
			names[port.Name] = i
		}
		if ap, ok := checkAddr(p, path+".local", port.Local, true); ok {
			if j, dup := locals[ap]; dup && ap.Port() != 0 {
				p.add(path+".local", "%v is also the address of ports[%d]", ap, j)
			}
			locals[ap] = i
		}
		checkAddr(p, path+".neighbor", port.Neighbor, false)
		port.PortSettings.validate(p, path)
		requireSettings(p, path, c.Effective(i))
	}
}

// checkAddr parses an IPv4 host:port; a local address may have port 0
// (any free port), a neighbour may not.
func checkAddr(p *problems, path, s string, local bool) (netip.AddrPort, bool) {
	if s == "" {
		p.add(path, "missing")
		return netip.AddrPort{}, false
	}
	ap, err := netip.ParseAddrPort(s)
	switch {
	case err != nil:
		p.add(path, "%q: want an IPv4 address and port, like 127.0.0.1:4793", s)
	case !ap.Addr().Is4():
		p.add(path, "%q: not an IPv4 address", s)
	case ap.Port() == 0 && !local:
		p.add(path, "%q: port 0", s)
	default:
		return ap, true
	}
	return netip.AddrPort{}, false
}

func (c *Config) validateRoutes(p *problems) {
	seen := map[uint16]int{}
	for i, r := range c.Routes {
		path := fmt.Sprintf("routes[%d]", i)
		if len(r.Dst) == 0 {
			p.add(path+".dst", "missing")
		}
		for j, dst := range r.Dst {
			if k, dup := seen[dst]; dup {
				p.add(fmt.Sprintf("%s.dst[%d]", path, j), "host %d is also routed by routes[%d]", dst, k)
			}
			seen[dst] = i
		}
		c.checkPortNames(p, path+".ports", r.Ports, true)
	}
	c.checkPortNames(p, "default_route", c.DefaultRoute, false)
}

func (c *Config) checkPortNames(p *problems, path string, names []string, required bool) {
	if required && len(names) == 0 {
		p.add(path, "missing")
	}
	for i, n := range names {
		if _, ok := c.PortIndex(n); !ok {
			p.add(fmt.Sprintf("%s[%d]", path, i), "no port is named %q", n)
		}
	}
}

func (c *Config) validateCapture(p *problems) {
	if c.Capture.File == "" && len(c.Capture.Ports) > 0 {
		p.add("capture.file", "missing (capture.ports is set)")
	}
	c.checkPortNames(p, "capture.ports", c.Capture.Ports, false)
}
