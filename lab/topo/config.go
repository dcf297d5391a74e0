package topo

import (
	"bytes"
	"fmt"

	"go.yaml.in/yaml/v3"

	"github.com/forgive-emu/forgive/internal/units"
)

// The structures below are the subsets of trimswitch's (docs/trimswitch.md)
// and forgived's (docs/forgived.md) configuration files that a plan
// writes. They mirror the daemons' field names; the tests parse every
// generated file with switchd.ParseConfig and hostd.ParseConfig, so a
// renamed field fails there rather than at run time.

type switchFile struct {
	Name         string      `yaml:"name"`
	Seed         uint64      `yaml:"seed"`
	Metrics      string      `yaml:"metrics"`
	LogLevel     string      `yaml:"log_level"`
	MaxDatagram  units.Size  `yaml:"max_datagram,omitempty"`
	Capture      *capture    `yaml:"capture,omitempty"`
	Defaults     portFile    `yaml:"defaults"`
	PFC          []pfcFile   `yaml:"pfc,omitempty"`
	Ports        []portFile  `yaml:"ports"`
	Routes       []routeFile `yaml:"routes"`
	DefaultRoute []string    `yaml:"default_route,flow,omitempty"`
}

type capture struct {
	File string `yaml:"file"`
}

type portFile struct {
	Name      string          `yaml:"name,omitempty"`
	Local     string          `yaml:"local,omitempty"`
	Neighbor  string          `yaml:"neighbor,omitempty"`
	Rate      *units.Rate     `yaml:"rate,omitempty"`
	Delay     *units.Duration `yaml:"delay,omitempty"`
	Overhead  *units.Size     `yaml:"overhead,omitempty"`
	DataQueue *units.Size     `yaml:"data_queue,omitempty"`
	ECN       *ecnFile        `yaml:"ecn,omitempty"`
	Trim      TrimMode        `yaml:"trim,omitempty"`
	Faults    *faultFile      `yaml:"faults,omitempty"`
}

type ecnFile struct {
	Enabled *bool      `yaml:"enabled,omitempty"`
	KMin    units.Size `yaml:"kmin"`
	KMax    units.Size `yaml:"kmax"`
	PMax    float64    `yaml:"pmax"`
}

type faultFile struct {
	Loss      float64        `yaml:"loss,omitempty"`
	DownFrom  units.Duration `yaml:"down_from,omitempty"`
	DownUntil units.Duration `yaml:"down_until,omitempty"`
	Jitter    units.Duration `yaml:"jitter,omitempty"`
}

type pfcFile struct {
	Priorities []uint8    `yaml:"priorities,flow"`
	XOff       units.Size `yaml:"xoff"`
	XOn        units.Size `yaml:"xon"`
	Headroom   units.Size `yaml:"headroom,omitempty"`
}

type routeFile struct {
	Dst   []uint16 `yaml:"dst,flow"`
	Ports []string `yaml:"ports,flow"`
}

type hostFile struct {
	Host        uint16          `yaml:"host"`
	Name        string          `yaml:"name"`
	Listen      string          `yaml:"listen"`
	Switch      string          `yaml:"switch"`
	Socket      string          `yaml:"socket"`
	Metrics     string          `yaml:"metrics"`
	LogLevel    string          `yaml:"log_level"`
	LineRate    units.Rate      `yaml:"line_rate"`
	MTU         int             `yaml:"mtu"`
	FailAfter   units.Duration  `yaml:"fail_after"`
	Seed        uint64          `yaml:"seed"`
	CC          string          `yaml:"cc"`
	DCQCN       dcqcnFile       `yaml:"dcqcn"`
	CNPInterval units.Duration  `yaml:"cnp_interval"`
	Reliability reliabilityFile `yaml:"reliability"`
	Forgive     forgiveFile     `yaml:"forgive"`
}

type dcqcnFile struct {
	G           float64        `yaml:"g"`
	AlphaTimer  units.Duration `yaml:"alpha_timer"`
	RateTimer   units.Duration `yaml:"rate_timer"`
	ByteCounter units.Size     `yaml:"byte_counter"`
	F           int            `yaml:"f"`
	RAI         units.Rate     `yaml:"rai"`
	RHAI        units.Rate     `yaml:"rhai"`
	MinRate     units.Rate     `yaml:"min_rate"`
}

type reliabilityFile struct {
	Mode     string         `yaml:"mode"`
	Window   units.Size     `yaml:"window"`
	RTOLow   units.Duration `yaml:"rto_low"`
	RTOHigh  units.Duration `yaml:"rto_high"`
	AckEvery units.Size     `yaml:"ack_every"`
	AckDelay units.Duration `yaml:"ack_delay"`
}

type forgiveFile struct {
	Enabled     bool    `yaml:"enabled"`
	PLow        float64 `yaml:"p_low"`
	PHigh       float64 `yaml:"p_high"`
	P           float64 `yaml:"p"`
	NoVesting   bool    `yaml:"no_vesting"`
	NoExemption bool    `yaml:"no_exemption"`
}

// marshal writes v as YAML under a comment saying where it came from.
func marshal(header string, v any) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# %s\n", header)
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		// Only an unsupported Go type fails, which is a bug here.
		panic("topo: marshal: " + err.Error())
	}
	_ = enc.Close()
	return b.Bytes()
}
