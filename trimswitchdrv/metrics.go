package trimswitchdrv

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/forgive-emu/forgive/switchcore"
)

// The collector snapshots the engine's counters under its lock at each
// scrape, so every series of one scrape describes the same instant, and
// the per-packet path counts nothing twice.

const ns = "trimswitch"

// Labels of the class dimension: data priorities "0".."7", then "header"
// (the strict-priority queue of control packets and trimmed headers).
var classLabels = func() [switchcore.NumClasses]string {
	var l [switchcore.NumClasses]string
	for c := range switchcore.NumPriorities {
		l[c] = strconv.Itoa(c)
	}
	l[switchcore.ClassHeader] = "header"
	return l
}()

// Drop reasons decided at ingress, and at an egress queue.
var (
	rxDropReasons    = []switchcore.DropReason{switchcore.DropMalformed, switchcore.DropNoRoute, switchcore.DropHeadroom, switchcore.DropSourceGuard}
	queueDropReasons = []switchcore.DropReason{switchcore.DropHeaderOverflow, switchcore.DropDataFull,
		switchcore.DropFaultLoss, switchcore.DropLinkDown, switchcore.DropWatchdog}
)

func desc(name, help string, labels ...string) *prometheus.Desc {
	return prometheus.NewDesc(prometheus.BuildFQName(ns, "", name), help, labels, nil)
}

type collector struct {
	d *Driver

	received, receivedBytes, sent, sentBytes *prometheus.Desc
	rxDropped, rxDroppedBytes                *prometheus.Desc
	invalid, sendErrors, socketDrops         *prometheus.Desc
	enqueued, enqueuedBytes                  *prometheus.Desc
	dequeued, dequeuedBytes                  *prometheus.Desc
	marked, markedBytes                      *prometheus.Desc
	trimmed, trimmedBytes                    *prometheus.Desc
	dropped, droppedBytes                    *prometheus.Desc
	occupancy, maxOccupancy                  *prometheus.Desc
	paused, pauseFrames, pausesSent          *prometheus.Desc
	watchdog, engineTime                     *prometheus.Desc
}

func newCollector(d *Driver) *collector {
	pc := []string{"port", "class"}
	return &collector{
		d:              d,
		received:       desc("received_packets_total", "Packets that arrived on a port (valid wire packets).", "port"),
		receivedBytes:  desc("received_bytes_total", "Bytes of the packets that arrived on a port.", "port"),
		sent:           desc("sent_packets_total", "Packets sent out of a port.", "port"),
		sentBytes:      desc("sent_bytes_total", "Bytes of the packets sent out of a port.", "port"),
		rxDropped:      desc("rx_dropped_packets_total", "Packets dropped before reaching an egress queue.", "port", "reason"),
		rxDroppedBytes: desc("rx_dropped_bytes_total", "Bytes of the packets dropped before reaching an egress queue.", "port", "reason"),
		invalid:        desc("invalid_datagrams_total", "Datagrams that were not valid wire packets, dropped on arrival.", "port", "reason"),
		sendErrors:     desc("send_errors_total", "Packets the kernel refused to send.", "port"),
		socketDrops:    desc("socket_drops_total", "Datagrams the kernel dropped at the port's socket, its receive buffer full, before the switch read them.", "port"),
		enqueued:       desc("enqueued_packets_total", "Packets that joined an egress queue.", pc...),
		enqueuedBytes:  desc("enqueued_bytes_total", "Bytes of the packets that joined an egress queue.", pc...),
		dequeued:       desc("dequeued_packets_total", "Packets that left an egress queue onto the link.", pc...),
		dequeuedBytes:  desc("dequeued_bytes_total", "Bytes of the packets that left an egress queue.", pc...),
		marked:         desc("marked_packets_total", "Data packets marked ECN CE at dequeue.", pc...),
		markedBytes:    desc("marked_bytes_total", "Bytes of the data packets marked ECN CE.", pc...),
		trimmed:        desc("trimmed_packets_total", "Data packets cut to their header.", pc...),
		trimmedBytes:   desc("trimmed_payload_bytes_total", "Payload bytes removed by trimming.", pc...),
		dropped:        desc("dropped_packets_total", "Packets dropped at or after an egress queue.", "port", "class", "reason"),
		droppedBytes:   desc("dropped_bytes_total", "Bytes of the packets dropped at or after an egress queue.", "port", "class", "reason"),
		occupancy:      desc("queue_occupancy_bytes", "Bytes queued now in a port's data queues (shared) or its strict-priority header queue.", "port", "queue"),
		maxOccupancy:   desc("queue_max_occupancy_bytes", "Highest occupancy a packet of the class found after joining its queue.", pc...),
		paused:         desc("paused_seconds_total", "Time a priority's departures on a port were paused by the neighbour.", "port", "priority"),
		pauseFrames:    desc("pause_frames_received_total", "PAUSE frames received from the neighbour.", "port"),
		pausesSent:     desc("pause_frames_sent_total", "PAUSE (and RESUME) frames sent to the neighbour.", "port", "priority", "kind"),
		watchdog:       desc("pfc_watchdog_fires_total", "Times the PFC watchdog cleared a paused data queue.", "port", "priority"),
		engineTime:     desc("engine_time_seconds", "The engine's clock: time since the switch started."),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	prometheus.DescribeByCollect(c, ch)
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.d.Snapshot()
	counter := func(d *prometheus.Desc, v uint64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v), labels...)
	}
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(c.engineTime, s.Fabric.Now.Seconds())
	for i := range s.Ports {
		ps, fs := &s.Ports[i], &s.Fabric.Ports[i]
		port := ps.Name
		counter(c.received, fs.Received.Packets, port)
		counter(c.receivedBytes, fs.Received.Bytes, port)
		counter(c.sent, fs.Sent.Packets, port)
		counter(c.sentBytes, fs.Sent.Bytes, port)
		for _, r := range rxDropReasons {
			counter(c.rxDropped, fs.RxDrops[r].Packets, port, r.String())
			counter(c.rxDroppedBytes, fs.RxDrops[r].Bytes, port, r.String())
		}
		for r := range NumInvalidReasons {
			counter(c.invalid, ps.Invalid[r], port, r.String())
		}
		counter(c.sendErrors, ps.SendErrors, port)
		counter(c.socketDrops, ps.SocketDrops, port)
		gauge(c.occupancy, float64(ps.DataQueued), port, "data")
		gauge(c.occupancy, float64(ps.HeaderQueued), port, "header")
		c.collectClasses(counter, gauge, port, fs)
		c.collectPFC(ch, counter, port, fs)
	}
}

type emit func(d *prometheus.Desc, v uint64, labels ...string)

func (c *collector) collectClasses(counter emit, gauge func(*prometheus.Desc, float64, ...string), port string, fs *switchcore.PortStats) {
	for cl := range fs.Classes {
		cs := &fs.Classes[cl]
		class := classLabels[cl]
		counter(c.enqueued, cs.Enqueued.Packets, port, class)
		counter(c.enqueuedBytes, cs.Enqueued.Bytes, port, class)
		counter(c.dequeued, cs.Dequeued.Packets, port, class)
		counter(c.dequeuedBytes, cs.Dequeued.Bytes, port, class)
		counter(c.marked, cs.Marked.Packets, port, class)
		counter(c.markedBytes, cs.Marked.Bytes, port, class)
		counter(c.trimmed, cs.Trimmed.Packets, port, class)
		counter(c.trimmedBytes, cs.Trimmed.Bytes, port, class)
		for _, r := range queueDropReasons {
			counter(c.dropped, cs.Drops[r].Packets, port, class, r.String())
			counter(c.droppedBytes, cs.Drops[r].Bytes, port, class, r.String())
		}
		gauge(c.maxOccupancy, float64(cs.MaxOccupancy), port, class)
	}
}

func (c *collector) collectPFC(ch chan<- prometheus.Metric, counter emit, port string, fs *switchcore.PortStats) {
	counter(c.pauseFrames, fs.PauseFrames.Packets, port)
	for prio := range switchcore.NumPriorities {
		p := classLabels[prio]
		ch <- prometheus.MustNewConstMetric(c.paused, prometheus.CounterValue, fs.Paused[prio].Seconds(), port, p)
		counter(c.pausesSent, fs.PausesSent[prio], port, p, "pause")
		counter(c.pausesSent, fs.ResumesSent[prio], port, p, "resume")
		counter(c.watchdog, fs.WatchdogFires[prio], port, p)
	}
}

// queueCollector exposes the queue occupancy gauges alone, for /queues:
// a sampler that wants only them (the lab's queue plot, every 20 ms) is
// spared the snapshot of every counter, the Go and process collectors and
// the compression that a /metrics scrape costs the switch.
type queueCollector struct {
	d         *Driver
	occupancy *prometheus.Desc
}

// Describe implements prometheus.Collector.
func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.occupancy }

// Collect implements prometheus.Collector.
func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	type occ struct{ data, header int }
	d := c.d
	qs := make([]occ, len(d.ports))
	d.mu.Lock()
	for i, p := range d.ports {
		qs[i].data, qs[i].header = d.sw.Occupancy(p.id)
	}
	d.mu.Unlock()
	for i, p := range d.ports {
		ch <- prometheus.MustNewConstMetric(c.occupancy, prometheus.GaugeValue, float64(qs[i].data), p.name, "data")
		ch <- prometheus.MustNewConstMetric(c.occupancy, prometheus.GaugeValue, float64(qs[i].header), p.name, "header")
	}
}

// metricsServer serves /metrics, /queues, /healthz and /ready.
type metricsServer struct {
	addr string
	srv  *http.Server
	done chan struct{}
}

func serveMetrics(addr string, d *Driver) (*metricsServer, error) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(d), collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	queues := prometheus.NewRegistry()
	queues.MustRegister(&queueCollector{d: d, occupancy: newCollector(d).occupancy})
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	mux.Handle("/queues", promhttp.HandlerFor(queues, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError, DisableCompression: true}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/ready", func(w http.ResponseWriter, _ *http.Request) {
		if !d.Ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("trimswitchdrv: metrics: %w", err)
	}
	m := &metricsServer{
		addr: ln.Addr().String(),
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		done: make(chan struct{}),
	}
	go func() {
		defer close(m.done)
		_ = m.srv.Serve(ln)
	}()
	return m, nil
}

func (m *metricsServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := m.srv.Shutdown(ctx)
	<-m.done
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("trimswitchdrv: metrics: %w", err)
	}
	return nil
}
