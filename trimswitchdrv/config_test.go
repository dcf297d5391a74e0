package trimswitchdrv

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/switchcore"
)

const fullConfig = `
name: leaf1
seed: 42
metrics: 127.0.0.1:0
log_level: debug
max_datagram: 4KiB
batch: 32
socket_buffer: 2MiB
capture:
  file: /tmp/x.pcap
  ports: [up1]
classification:
  data_dscps: [0, 24]
  control_dscps: [46, 48, 11]
  priorities: {24: 3, 26: 3}
defaults:
  rate: 400Gbps
  delay: 2us
  overhead: 42
  data_queue: 4MiB
  header_queue: 8MiB
  ecn: {kmin: 800KB, kmax: 3MiB, pmax: 0.2}
  trim: ndp
  trimmed_dscp: 11
pfc:
  - priorities: [3]
    xoff: 512KiB
    xon: 256KiB
    headroom: 64KiB
    pause_time: 100us
    watchdog: 200ms
    watchdog_recovery: 1s
    watchdog_window: 4s
  - priorities: [5]
    xoff: 100KB
    no_watchdog: true
ports:
  - name: host1
    local: 127.0.0.1:14793
    neighbor: 127.0.0.2:4793
    rate: 100Gbps
    trim: "off"
    trimmed_dscp: keep
  - name: up1
    local: 127.0.0.1:24793
    neighbor: 127.0.0.3:4793
    ecn: {enabled: false}
    faults: {loss: 0.01, down_from: 1s, down_until: 2s, jitter: 1us}
  - name: up2
    local: 127.0.0.1:34793
    neighbor: 127.0.0.4:4793
    rate: 0
routes:
  - dst: [1]
    ports: [host1]
  - dst: [2, 3]
    ports: [up1, up2]
default_route: [up1]
`

// Every field of the file reaches the engine's configuration: defaults,
// overrides, the ECMP group, the default route and PFC per priority.
func TestFullConfigTranslates(t *testing.T) {
	cfg := parse(t, fullConfig)
	fc := cfg.Core()
	if err := fc.Validate(); err != nil {
		t.Fatal(err)
	}
	host1, up1, up2 := fc.Ports[0], fc.Ports[1], fc.Ports[2]
	wantHost1 := switchcore.PortConfig{
		Rate: 100e9, Delay: 2 * time.Microsecond, Overhead: 42, DataCap: 4 << 20, HeaderCap: 8 << 20,
		ECN:  switchcore.ECNConfig{Enabled: true, KMin: 800e3, KMax: 3 << 20, PMax: 0.2},
		Trim: switchcore.TrimOff,
	}
	if host1 != wantHost1 {
		t.Errorf("host1 = %+v\nwant    %+v", host1, wantHost1)
	}
	if up1.ECN.Enabled || up1.Trim != switchcore.TrimNDP || !up1.RemarkTrimmed || up1.TrimmedDSCP != 11 {
		t.Errorf("up1 = %+v: want ECN off, ndp, remark to 11", up1)
	}
	wantFault := switchcore.FaultConfig{Loss: 0.01, DownStart: time.Second, DownEnd: 2 * time.Second, Jitter: time.Microsecond}
	if up1.Fault != wantFault {
		t.Errorf("up1 faults = %+v, want %+v", up1.Fault, wantFault)
	}
	if up1.Rate != 400e9 || up2.Rate != UnshapedRate {
		t.Errorf("rates %d, %d: want the default 400G and unshaped", up1.Rate, up2.Rate)
	}
	if got := fc.Routes[2]; len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("route to host 2 = %v, want ports 1 and 2 (ECMP)", got)
	}
	if len(fc.DefaultRoute) != 1 || fc.DefaultRoute[0] != 1 {
		t.Errorf("default route = %v", fc.DefaultRoute)
	}
	wantPFC := switchcore.PFCConfig{Enabled: true, XOff: 512 << 10, XOn: 256 << 10, Headroom: 64 << 10,
		PauseTime: 100 * time.Microsecond, WatchdogLimit: 200 * time.Millisecond, WatchdogRecovery: time.Second,
		WatchdogWindow: 4 * time.Second}
	if fc.PFC[3] != wantPFC {
		t.Errorf("PFC[3] = %+v, want %+v", fc.PFC[3], wantPFC)
	}
	if !fc.PFC[5].Enabled || fc.PFC[5].WatchdogLimit >= 0 || fc.PFC[0].Enabled {
		t.Errorf("PFC[5] = %+v (want watchdog off), PFC[0] = %+v (want off)", fc.PFC[5], fc.PFC[0])
	}
	if fc.Classes.Priority[26] != 3 || len(fc.Classes.Control) != 3 || fc.Seed != 42 {
		t.Errorf("classes %+v seed %d", fc.Classes, fc.Seed)
	}
	if cfg.MaxDatagramBytes() != 4096 || cfg.Batch != 32 || cfg.SocketBuffer != 2<<20 {
		t.Errorf("socket settings %v %d %v", cfg.MaxDatagram, cfg.Batch, cfg.SocketBuffer)
	}
}

// A bad file names the field at fault, for every kind of mistake.
func TestBadConfigNamesTheField(t *testing.T) {
	cases := []struct {
		name, from, to, want string
	}{
		{"unit", "rate: 100Gbps", "rate: 10Gbs", `ports[0].rate: "10Gbs": unknown unit`},
		{"unknown key", "    rate: 0\n", "    rate: 0\n    colour: red\n", "ports[2].colour: unknown field"},
		{"type", "seed: 42", "seed: many", "seed: cannot unmarshal !!str `many`"},
		{"trim mode", "trim: ndp", "trim: tail", `defaults.trim: "tail": unknown trim mode`},
		{"remark", "trimmed_dscp: 11", "trimmed_dscp: 64", `defaults.trimmed_dscp: "64": want "keep" or a DSCP below 64`},
		{"duration", "delay: 2us", "delay: 2", `defaults.delay: "2": invalid number`},
		{"flow map", "{kmin: 800KB,", "{kmin: 800XB,", `defaults.ecn.kmin: "800XB": unknown unit`},
		{"missing rate", "  rate: 400Gbps\n", "", "ports[1].rate: missing"},
		{"pmax", "pmax: 0.2", "pmax: 1.5", "defaults.ecn.pmax: 1.5: want a probability in (0, 1]"},
		{"kmax", "kmax: 3MiB", "kmax: 3KB", "defaults.ecn: kmax 3KB is below kmin 800KB"},
		{"route port", "ports: [up1, up2]", "ports: [up1, up9]", `routes[1].ports[1]: no port is named "up9"`},
		{"duplicate dst", "dst: [2, 3]", "dst: [2, 1]", "routes[1].dst[1]: host 1 is also routed by routes[0]"},
		{"duplicate name", "name: up2", "name: up1", `ports[2].name: "up1" is also the name of ports[1]`},
		{"address", "neighbor: 127.0.0.3:4793", "neighbor: somewhere", `ports[1].neighbor: "somewhere": want an IPv4 address`},
		{"priority", "{24: 3, 26: 3}", "{24: 3, 26: 9}", "classification.priorities.26: priority 9"},
		{"data is control", "data_dscps: [0, 24]", "data_dscps: [0, 46]", "classification.data_dscps[1]: DSCP 46 is also a control DSCP"},
		{"pfc twice", "priorities: [5]", "priorities: [3]", "pfc[1].priorities[0]: priority 3 is configured twice"},
		{"xon", "xon: 256KiB", "xon: 1MiB", "pfc[0].xon: 1MiB is above xoff 512KiB"},
		{"capture port", "ports: [up1]\nclass", "ports: [up7]\nclass", `capture.ports[0]: no port is named "up7"`},
		{"log level", "log_level: debug", "log_level: loud", `log_level: "loud"`},
		{"fractional seed", "seed: 42", "seed: 1.5", `seed: "1.5": want an integer`},
		{"batch", "batch: 32", "batch: 5000", "batch: 5000: want 0 (the default) to 1024 datagrams"},
		{"socket buffer", "socket_buffer: 2MiB", "socket_buffer: -1", "socket_buffer: "},
		{"metrics", "metrics: 127.0.0.1:0", "metrics: 'bad addr'", `metrics: "bad addr": want host:port`},
		{"metrics port", "metrics: 127.0.0.1:0", "metrics: localhost:web", `metrics: "localhost:web": want host:port`},
		{"down window", "down_from: 1s, down_until: 2s", "down_from: 3s, down_until: 2s", "ports[1].faults: down_until 2s is before down_from 3s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			doc := strings.Replace(fullConfig, c.from, c.to, 1)
			if doc == fullConfig {
				t.Fatalf("test bug: %q not in the config", c.from)
			}
			_, err := ParseConfig([]byte(doc))
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v does not match ErrConfig", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %q\ndoes not contain %q", err, c.want)
			}
		})
	}
}

func TestUnknownUnitUnwrapsToTheUnitsSentinel(t *testing.T) {
	_, err := ParseConfig([]byte(strings.Replace(fullConfig, "rate: 100Gbps", "rate: 10Gbs", 1)))
	if !errors.Is(err, units.ErrUnit) {
		t.Fatalf("%v does not match units.ErrUnit", err)
	}
}

func TestSeveralUnknownKeysAreAllReported(t *testing.T) {
	doc := strings.Replace(fullConfig, "seed: 42", "seed: 42\nspeed: 1\nsweet: 2", 1)
	_, err := ParseConfig([]byte(doc))
	var ce *ConfigError
	if !errors.As(err, &ce) || len(ce.Problems) != 2 {
		t.Fatalf("got %v, want two problems", err)
	}
	if !strings.Contains(err.Error(), "speed: unknown field") || !strings.Contains(err.Error(), "sweet: unknown field") {
		t.Fatalf("got %v", err)
	}
}

func TestEmptyAndMissingFiles(t *testing.T) {
	if _, err := ParseConfig(nil); !errors.Is(err, ErrConfig) {
		t.Errorf("empty document: %v", err)
	}
	if _, err := ParseConfig([]byte("name: x\n")); err == nil || !strings.Contains(err.Error(), "ports: missing") {
		t.Errorf("no ports: %v", err)
	}
	if _, err := LoadConfig(filepath.Join(t.TempDir(), "none.yaml")); !errors.Is(err, os.ErrNotExist) || !errors.Is(err, ErrConfig) {
		t.Errorf("missing file: %v", err)
	}
}

// The example shipped with the command is valid.
func TestExampleConfigIsValid(t *testing.T) {
	cfg, err := LoadConfig("../cmd/trimswitch/testdata/two-port.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.Ports) != 2 || cfg.Effective(1).Rate.String() != "500Mbps" {
		t.Fatalf("example: %d ports, port 1 rate %v", len(cfg.Ports), cfg.Effective(1).Rate)
	}
}
