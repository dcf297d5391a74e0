package forgivedrv

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/hostapi/nicapi"
	"github.com/forgive-emu/forgive/nic"
)

// collector exports the daemon's counters to Prometheus, read on the
// loops at scrape time (snapshot).
type collector struct {
	d        *Daemon
	hostDesc *prometheus.Desc
	flowDesc *prometheus.Desc
	stepDesc *prometheus.Desc
}

func newCollector(d *Daemon) *collector {
	host := prometheus.Labels{"host": d.cfg.Name}
	return &collector{
		d:        d,
		hostDesc: prometheus.NewDesc("forgived_host", "Host-wide NIC counters, by counter name.", []string{"counter"}, host),
		flowDesc: prometheus.NewDesc("forgived_flow", "Per-flow NIC counters, by flow, traffic class and counter name.", []string{"peer", "flow", "class", "counter"}, host),
		stepDesc: prometheus.NewDesc("forgived_step", "FORGIVE step ledger, by job (its uid and name), step and field.", []string{"uid", "job", "step", "field"}, host),
	}
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.hostDesc
	ch <- c.flowDesc
	ch <- c.stepDesc
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	host, flows, steps, err := c.d.snapshot()
	if err != nil {
		return
	}
	host.Each(func(k string, v uint64) {
		ch <- prometheus.MustNewConstMetric(c.hostDesc, prometheus.CounterValue, float64(v), k)
	})
	for _, r := range flows {
		peer, flow, class := itoa(uint64(r.Key.Peer)), itoa(uint64(r.Key.ID)), r.Spec.Class.String()
		nicapi.FlowCounters(r).Each(func(k string, v uint64) {
			ch <- prometheus.MustNewConstMetric(c.flowDesc, prometheus.UntypedValue, float64(v), peer, flow, class, k)
		})
	}
	for _, js := range steps {
		uid, job := itoa(uint64(js.Job.UID)), js.Job.Name
		for _, r := range js.Steps {
			step := itoa(uint64(r.Step))
			for k, v := range map[string]float64{"p": r.P, "expected": float64(r.Expected), "budget": float64(r.Budget),
				"received": float64(r.Received), "forgiven": float64(r.Forgiven), "outstanding": float64(r.Outstanding),
				"invariant_held": float64(b2u(r.InvariantHeld))} {
				ch <- prometheus.MustNewConstMetric(c.stepDesc, prometheus.GaugeValue, v, uid, job, step, k)
			}
		}
	}
}

// snapshot reads what /metrics exports on the loops: the host's counters,
// every flow's report (in each engine's order, engine by engine) and the
// recent steps of every job's ledger.
func (d *Daemon) snapshot() (host hostapi.HostStats, flows []nic.FlowReport, steps []nicapi.JobSteps, err error) {
	read := func(e *nic.Engine) {
		for _, key := range e.Flows() {
			r, _ := e.Flow(key)
			flows = append(flows, r)
		}
	}
	if g := d.grp; g != nil {
		err = groupBackend{g}.with(func() error {
			host = HostCounters(engines{g}.Stats(), g.loopStats())
			for _, s := range g.shards {
				if err := s.do(func(time.Duration) error { read(s.eng); return nil }); err != nil {
					return err
				}
			}
			steps = g.host.AllSteps()
			return nil
		})
		return host, flows, steps, err
	}
	err = d.Engine(func(e *nic.Engine, l LoopStats) {
		host = HostCounters(e.Stats(), l)
		read(e)
		steps = d.h.AllSteps()
	})
	return host, flows, steps, err
}

func itoa(v uint64) string {
	if v == 0 {
		return "0"
	}
	var b [20]byte
	i := len(b)
	for v > 0 {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
	}
	return string(b[i:])
}

// serveMetrics serves /metrics (Prometheus), /healthz and /ready on addr until
// ctx ends. It returns the bound address.
func (d *Daemon) serveMetrics(ctx context.Context, addr string) (string, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(d))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("/ready", d.serveReady)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("forgivedrv: metrics listen %s: %w", addr, err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	return ln.Addr().String(), nil
}

// serveReady answers /ready: 200 while the daemon forwards, 503 before
// and while it stops.
func (d *Daemon) serveReady(w http.ResponseWriter, _ *http.Request) {
	if !d.Ready() {
		http.Error(w, "not ready", http.StatusServiceUnavailable)
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
