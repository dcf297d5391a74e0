package fabric

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/forgive-emu/forgive/lab/launch"
	"github.com/forgive-emu/forgive/lab/netns"
	"github.com/forgive-emu/forgive/lab/topo"
)

// Config is one fabric to place and start.
type Config struct {
	Topology *topo.Topology
	Profile  *topo.Profile
	// Place says where: loopback or namespaces, the run id or /24, the
	// hosts' policy, the seed. With an empty Dir the fabric makes a
	// temporary one and removes it when it stops.
	Place topo.PlaceOptions
	// Bins maps "forgived" and "trimswitch", and for a netns placement
	// "forgivectl" (whose netns-exec starts each daemon in its
	// namespace), to their paths.
	Bins map[string]string
	Logs io.Writer // the children's output; nil: kept for errors only
	// Seal makes every forgived seal its packets for one security domain,
	// with a fresh key written into the fabric's directory
	// (WriteKey) before any daemon starts.
	Seal bool
}

// readyTimeout bounds the start of each process.
const readyTimeout = 30 * time.Second

// Fabric is a placed fabric whose processes run: every trimswitch and
// forgived, in their namespaces when the placement has them.
type Fabric struct {
	Plan *topo.Plan

	dir     string
	ownDir  bool
	net     *netns.Wiring // nil on loopback
	group   *launch.Group
	mu      sync.Mutex
	clients map[string]*http.Client // by namespace
}

// Start places c.Topology, creates its namespaces and veths when
// the placement asks for them, writes every configuration and starts
// every process, each once the previous is ready. On failure everything
// it made is gone when it returns.
func Start(ctx context.Context, c Config) (f *Fabric, err error) {
	f = &Fabric{dir: c.Place.Dir, clients: map[string]*http.Client{}}
	if f.dir == "" {
		if f.dir, err = os.MkdirTemp("", "forgive-lab-"); err != nil {
			return nil, err
		}
		f.ownDir, c.Place.Dir = true, f.dir
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, f.Stop())
			f = nil
		}
	}()
	if c.Seal {
		if c.Place.KeyFile, err = WriteKey(f.dir); err != nil {
			return f, err
		}
	}
	if f.Plan, err = topo.Place(c.Topology, c.Profile, c.Place); err != nil {
		return f, err
	}
	paths, err := f.Plan.Write(f.dir)
	if err != nil {
		return f, err
	}
	if f.Plan.Netns != nil {
		if f.net, err = netns.Create(f.Plan.Netns); err != nil {
			return f, err
		}
	}
	specs, err := f.specs(c, paths)
	if err != nil {
		return f, err
	}
	f.group, err = launch.Start(ctx, specs, readyTimeout)
	return f, err
}

// specs lists the fabric's processes: switches first, then hosts.
func (f *Fabric) specs(c Config, paths map[string]string) ([]launch.Spec, error) {
	helper := ""
	if f.Plan.Netns != nil {
		if helper = c.Bins["forgivectl"]; helper == "" {
			return nil, errors.New("fabric: a netns placement needs forgivectl's netns-exec helper")
		}
	}
	var specs []launch.Spec
	for _, sw := range f.Plan.Switches {
		ready := launch.HTTPReady("http://" + sw.MetricsAddr + "/ready")
		if sw.Netns != "" {
			ready = launch.HTTPReadyVia(f.client(sw.Netns), "http://"+sw.MetricsAddr+"/ready")
		}
		specs = append(specs, launch.Spec{Name: sw.Name, Path: c.Bins["trimswitch"],
			Args: []string{"--config", paths[sw.Name]}, Log: c.Logs, Netns: sw.Netns, NetnsExec: helper, Ready: ready})
	}
	for _, h := range f.Plan.Hosts {
		specs = append(specs, launch.Spec{Name: h.Name, Path: c.Bins["forgived"],
			Args: []string{"--config", paths[h.Name]}, Log: c.Logs, Netns: h.Netns, NetnsExec: helper,
			Ready: launch.HostAPIReady(h.Socket)})
	}
	return specs, nil
}

// client is the HTTP client that reaches a process's metrics: one that
// dials inside its namespace, or the default on loopback.
func (f *Fabric) client(ns string) *http.Client {
	if ns == "" {
		return http.DefaultClient
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	c, ok := f.clients[ns]
	if !ok {
		c = netns.HTTPClient(ns)
		f.clients[ns] = c
	}
	return c
}

// Dir is the directory of the configurations and host sockets.
func (f *Fabric) Dir() string { return f.dir }

// Died delivers the first unexpected exit of a process.
func (f *Fabric) Died() <-chan error { return f.group.Died() }

// Pids are the fabric's processes, switches first.
func (f *Fabric) Pids() []int { return f.group.Pids() }

// SetLinkUp cuts (false) or restores a cable of a netns placement by the
// label of one end: "host3" is host 3's own end, "leaf1/h3" the switch's.
func (f *Fabric) SetLinkUp(label string, up bool) error {
	if f.net == nil {
		return errors.New("fabric: only a netns placement has cables to cut")
	}
	return f.net.SetLinkUp(label, up)
}

// metrics reads a switch's Prometheus exposition.
func (f *Fabric) metrics(ctx context.Context, name string) (map[string]*dto.MetricFamily, error) {
	for _, sw := range f.Plan.Switches {
		if sw.Name == name {
			return scrape(ctx, f.client(sw.Netns), "http://"+sw.MetricsAddr+"/metrics")
		}
	}
	return nil, fmt.Errorf("fabric: no switch %q", name)
}

// QueueBytes is a port's data-queue occupancy now: its gauge, read
// from the switch's /queues, which serves the occupancy gauges alone: the
// recorder samples it every 20 ms, and a whole /metrics scrape that often
// took a quarter of the bottleneck leaf's CPU at 1 Gb/s.
func (f *Fabric) QueueBytes(ctx context.Context, name, port string) (float64, error) {
	for _, sw := range f.Plan.Switches {
		if sw.Name == name {
			fams, err := scrape(ctx, f.client(sw.Netns), "http://"+sw.MetricsAddr+"/queues")
			if err != nil {
				return 0, err
			}
			return sum(fams, "trimswitch_queue_occupancy_bytes", map[string]string{"port": port, "queue": "data"}), nil
		}
	}
	return 0, fmt.Errorf("fabric: no switch %q", name)
}

// TrimmedBytes is every switch's trimmed payload so far, by the role of
// the port that trimmed it (a leaf's host port, its uplink, a spine's
// downlink).
func (f *Fabric) TrimmedBytes(ctx context.Context) (map[topo.Role]int64, error) {
	byRole := map[topo.Role]int64{}
	for _, sw := range f.Plan.Switches {
		fams, err := f.metrics(ctx, sw.Name)
		if err != nil {
			return byRole, err
		}
		for _, p := range sw.Ports {
			byRole[p.Role] += int64(sum(fams, "trimswitch_trimmed_payload_bytes_total", map[string]string{"port": p.Name}))
		}
	}
	return byRole, nil
}

// SwitchCounter sums a switch's samples of one metric whose labels
// include every pair in labels: SwitchCounter(ctx, "spine1",
// "trimswitch_sent_packets_total", nil).
func (f *Fabric) SwitchCounter(ctx context.Context, name, metric string, labels map[string]string) (float64, error) {
	fams, err := f.metrics(ctx, name)
	if err != nil {
		return 0, err
	}
	return sum(fams, metric, labels), nil
}

// Stop stops every process, removes the namespaces and veths (killing
// anything still inside), and the directory it made. It returns what
// did not go cleanly; it is safe to call more than once.
func (f *Fabric) Stop() error {
	var errs []error
	if f.group != nil {
		errs = append(errs, f.group.Stop(10*time.Second))
	}
	f.mu.Lock()
	for _, c := range f.clients {
		c.CloseIdleConnections()
	}
	f.mu.Unlock()
	if f.net != nil {
		if err := f.net.Destroy(); err != nil {
			errs = append(errs, fmt.Errorf("removing the namespaces: %w", err))
		}
	}
	if f.ownDir {
		errs = append(errs, os.RemoveAll(f.dir))
	}
	return errors.Join(errs...)
}
