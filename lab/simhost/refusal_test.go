package simhost

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/forgive-emu/forgive/forgivedrv"
	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/nic"
)

// driver is the host API as a test drives it: the in-process host API, or a
// client of a real forgived over its unix socket.
type driver interface {
	register(size int) (hostapi.RegionID, error)
	deregister(r hostapi.RegionID) error
	CreateFlow(ctx context.Context, spec hostapi.FlowSpec) error
	DestroyFlow(ctx context.Context, flow hostapi.FlowID) error
	PostSend(ctx context.Context, req hostapi.SendReq) error
	PostRecv(ctx context.Context, req hostapi.RecvReq) error
	BeginStep(ctx context.Context, req hostapi.StepReq) error
	EndStep(ctx context.Context, step uint64) error
	Steps(ctx context.Context, limit int) ([]hostapi.StepRecord, error)
	Counters(ctx context.Context) (hostapi.Counters, error)
}

// clientDriver drives a Client.
type clientDriver struct {
	*Client
	mem map[hostapi.RegionID]interface{ Close() error }
}

func (d *clientDriver) register(size int) (hostapi.RegionID, error) {
	m, err := d.RegisterMemory(ctx, size)
	if err != nil {
		return 0, err
	}
	d.mem[m.ID()] = m
	return m.ID(), nil
}

func (d *clientDriver) deregister(r hostapi.RegionID) error {
	m, ok := d.mem[r]
	if !ok {
		return fmt.Errorf("test: no region %d", r)
	}
	return m.Close()
}

// daemonDriver drives forgived through hostapi.Client.
type daemonDriver struct {
	*hostapi.Client
	mem map[hostapi.RegionID]*hostapi.Region
}

func (d *daemonDriver) register(size int) (hostapi.RegionID, error) {
	m, err := d.RegisterMemory(ctx, size)
	if err != nil {
		return 0, err
	}
	d.mem[m.ID()] = m
	return m.ID(), nil
}

func (d *daemonDriver) deregister(r hostapi.RegionID) error {
	m, ok := d.mem[r]
	if !ok {
		return fmt.Errorf("test: no region %d", r)
	}
	return m.Close()
}

// The client library refuses some requests before they reach a daemon (a
// flow without a class cannot be encoded, a region is closed only once),
// so the table has no case for them: TestPortRefusesWhatTheClientCannotSend
// holds the host API's answer to them.

// The host both drivers serve: host 3 at 1 Gb/s.
const testHost = 3

func newPortDriver(t *testing.T) driver {
	e, err := nic.New(nic.DefaultConfig(testHost, 1e9))
	if err != nil {
		t.Fatal(err)
	}
	return &clientDriver{Client: New(e, 0, &fakeClock{}), mem: map[hostapi.RegionID]interface{ Close() error }{}}
}

// newDaemonDriver starts a forgived on loopback addresses of its own and
// connects a client to it; both end with the test.
func newDaemonDriver(t *testing.T) driver {
	dir := t.TempDir()
	sock := filepath.Join(dir, "d.sock")
	net := fmt.Sprintf("127.%d.251.", 100+os.Getpid()%100)
	cfg, err := forgivedrv.ParseConfig(fmt.Appendf(nil, "host: %d\nlisten: %s1:4793\nswitch: %s2:4793\nsocket: %s\nline_rate: 1Gbps\n",
		testHost, net, net, sock))
	if err != nil {
		t.Fatal(err)
	}
	d, err := forgivedrv.New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(runCtx) }()
	c, err := hostapi.Dial(sock)
	if err != nil {
		cancel()
		<-ran
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Close()
		cancel()
		select {
		case err := <-ran:
			if err != nil {
				t.Errorf("forgived: %v", err)
			}
		case <-time.After(time.Minute):
			t.Error("forgived did not stop")
		}
	})
	return &daemonDriver{Client: c, mem: map[hostapi.RegionID]*hostapi.Region{}}
}

// refusalCase sets up what it needs on a fresh host, then makes the
// request that must be refused.
type refusalCase struct {
	name  string
	want  error
	setup func(t *testing.T, d driver) // state before the refused request
	req   func(d driver) error
}

// gradient is the flow every case opens first (setupFlow), to peer 4.
var gradient = hostapi.FlowSpec{Flow: 7, Peer: 4, Class: hostapi.ClassGradient}

// region is the id of the 4096-byte region setupFlow registers: the
// engine's first.
const region hostapi.RegionID = 1

func setupFlow(t *testing.T, d driver) {
	t.Helper()
	r, err := d.register(4096)
	if err != nil || r != region {
		t.Fatalf("register: region %d, %v", r, err)
	}
	if err := d.CreateFlow(ctx, gradient); err != nil {
		t.Fatal(err)
	}
}

// setupOpenStep opens step 1 without classifying it, after setupFlow.
func setupOpenStep(t *testing.T, d driver) {
	t.Helper()
	setupFlow(t, d)
	if err := d.BeginStep(ctx, hostapi.StepReq{Step: 1, ExpectedGradientBytes: 4096}); err != nil {
		t.Fatal(err)
	}
}

var refusals = []refusalCase{
	{"flow 0", hostapi.ErrBadRequest, setupFlow, func(d driver) error {
		return d.CreateFlow(ctx, hostapi.FlowSpec{Flow: 0, Peer: 4, Class: hostapi.ClassGradient})
	}},
	{"subflows without subflow entropy", hostapi.ErrBadRequest, setupFlow, func(d driver) error {
		return d.CreateFlow(ctx, hostapi.FlowSpec{Flow: 8, Peer: 4, Class: hostapi.ClassTensor, Subflows: 3})
	}},
	{"subflows with a path per message", hostapi.ErrBadRequest, setupFlow, func(d driver) error {
		return d.CreateFlow(ctx, hostapi.FlowSpec{Flow: 8, Peer: 4, Class: hostapi.ClassGradient, Entropy: hostapi.EntropyMessage, Subflows: 4})
	}},
	{"duplicate flow", hostapi.ErrFlowExists, setupFlow, func(d driver) error {
		return d.CreateFlow(ctx, hostapi.FlowSpec{Flow: 7, Peer: 5, Class: hostapi.ClassGradient})
	}},
	{"flow to itself", hostapi.ErrBackend, setupFlow, func(d driver) error {
		return d.CreateFlow(ctx, hostapi.FlowSpec{Flow: 9, Peer: testHost, Class: hostapi.ClassGradient})
	}},
	{"MaxFlows", hostapi.ErrLimitExceeded, func(t *testing.T, d driver) {
		setupFlow(t, d)
		for f := range hostapi.DefaultLimits.MaxFlows - 1 {
			if err := d.CreateFlow(ctx, hostapi.FlowSpec{Flow: hostapi.FlowID(100 + f), Peer: 4, Class: hostapi.ClassOther}); err != nil {
				t.Fatalf("flow %d of the limit: %v", f+2, err)
			}
		}
	}, func(d driver) error {
		return d.CreateFlow(ctx, hostapi.FlowSpec{Flow: 99, Peer: 4, Class: hostapi.ClassOther})
	}},
	{"unknown flow", hostapi.ErrNoSuchFlow, setupFlow, func(d driver) error {
		return d.PostSend(ctx, hostapi.SendReq{Flow: 99, Region: region, Length: 10, WRID: 1})
	}},
	{"unknown region", hostapi.ErrNoSuchRegion, setupFlow, func(d driver) error {
		return d.PostSend(ctx, hostapi.SendReq{Flow: 7, Region: region + 1, Length: 10, WRID: 1})
	}},
	{"region 0", hostapi.ErrBadRequest, setupFlow, func(d driver) error {
		return d.PostRecv(ctx, hostapi.RecvReq{Flow: 7, Region: 0, Length: 10, WRID: 1})
	}},
	{"out of bounds", hostapi.ErrOutOfBounds, setupFlow, func(d driver) error {
		return d.PostRecv(ctx, hostapi.RecvReq{Flow: 7, Region: region, Offset: 4000, Length: 100, WRID: 1})
	}},
	{"offset overflows", hostapi.ErrOutOfBounds, setupFlow, func(d driver) error {
		return d.PostSend(ctx, hostapi.SendReq{Flow: 7, Region: region, Offset: ^uint64(0), Length: 2, WRID: 1})
	}},
	{"length overflows", hostapi.ErrOutOfBounds, setupFlow, func(d driver) error {
		return d.PostSend(ctx, hostapi.SendReq{Flow: 7, Region: region, Offset: 1, Length: ^uint64(0), WRID: 1})
	}},
	{"zero length", hostapi.ErrBadRequest, setupFlow, func(d driver) error {
		return d.PostSend(ctx, hostapi.SendReq{Flow: 7, Region: region, Length: 0, WRID: 1})
	}},
	{"MaxOutstanding", hostapi.ErrLimitExceeded, func(t *testing.T, d driver) {
		setupFlow(t, d)
		for i := range hostapi.DefaultLimits.MaxOutstanding {
			if err := d.PostRecv(ctx, hostapi.RecvReq{Flow: 7, Region: region, Length: 64, WRID: uint64(i + 1)}); err != nil {
				t.Fatalf("work request %d of the limit: %v", i+1, err)
			}
		}
	}, func(d driver) error {
		return d.PostSend(ctx, hostapi.SendReq{Flow: 7, Region: region, Length: 64, WRID: 1 << 20})
	}},
	{"MaxRegions", hostapi.ErrLimitExceeded, func(t *testing.T, d driver) {
		setupFlow(t, d)
		for i := range hostapi.DefaultLimits.MaxRegions - 1 {
			if _, err := d.register(64); err != nil {
				t.Fatalf("region %d of the limit: %v", i+2, err)
			}
		}
	}, func(d driver) error { _, err := d.register(64); return err }},
	{"MaxRegisteredBytes", hostapi.ErrLimitExceeded, setupFlow, func(d driver) error {
		// 4096 bytes registered: the limit less 4095 still fits, the
		// limit less 4095 plus one does not.
		_, err := d.register(int(hostapi.DefaultLimits.MaxRegisteredBytes) - 4095)
		return err
	}},
	{"deregister a region with posted work", hostapi.ErrBackend, func(t *testing.T, d driver) {
		setupFlow(t, d)
		if err := d.PostRecv(ctx, hostapi.RecvReq{Flow: 7, Region: region, Length: 64, WRID: 1}); err != nil {
			t.Fatal(err)
		}
	}, func(d driver) error { return d.deregister(region) }},
	{"destroy unknown flow", hostapi.ErrNoSuchFlow, setupFlow, func(d driver) error { return d.DestroyFlow(ctx, 99) }},
	{"destroy a destroyed flow", hostapi.ErrNoSuchFlow, setupFlow, func(d driver) error {
		if err := d.DestroyFlow(ctx, 7); err != nil {
			return fmt.Errorf("first destroy: %w", err)
		}
		return d.DestroyFlow(ctx, 7)
	}},
	{"critical and norms", hostapi.ErrBadRequest, setupFlow, func(d driver) error {
		return d.BeginStep(ctx, hostapi.StepReq{Step: 1, Critical: new(bool), Norms: []float64{1}})
	}},
	{"lr_decay without norms", hostapi.ErrBadRequest, setupFlow, func(d driver) error {
		return d.BeginStep(ctx, hostapi.StepReq{Step: 1, LRDecay: true, ExpectedGradientBytes: 4096})
	}},
	{"step opened twice", hostapi.ErrBackend, setupOpenStep, func(d driver) error {
		return d.BeginStep(ctx, hostapi.StepReq{Step: 1, ExpectedGradientBytes: 4096})
	}},
	{"classified with other expected bytes", hostapi.ErrBackend, setupOpenStep, func(d driver) error {
		return d.BeginStep(ctx, hostapi.StepReq{Step: 1, Critical: new(bool), ExpectedGradientBytes: 4097})
	}},
	{"classified twice", hostapi.ErrBackend, func(t *testing.T, d driver) {
		setupOpenStep(t, d)
		if err := d.BeginStep(ctx, hostapi.StepReq{Step: 1, Norms: []float64{1, 2}}); err != nil {
			t.Fatal(err)
		}
	}, func(d driver) error {
		return d.BeginStep(ctx, hostapi.StepReq{Step: 1, Critical: new(bool)})
	}},
	{"phase without a step", hostapi.ErrBadRequest, setupFlow, func(d driver) error {
		return d.PostRecv(ctx, hostapi.RecvReq{Flow: 7, Region: region, Length: 64, Phase: hostapi.PhaseGather, WRID: 1})
	}},
	{"phase on a tensor flow", hostapi.ErrBadRequest, func(t *testing.T, d driver) {
		setupFlow(t, d)
		if err := d.CreateFlow(ctx, hostapi.FlowSpec{Flow: 8, Peer: 4, Class: hostapi.ClassTensor}); err != nil {
			t.Fatal(err)
		}
	}, func(d driver) error {
		return d.PostRecv(ctx, hostapi.RecvReq{Flow: 8, Region: region, Length: 64, Step: 1, Phase: hostapi.PhaseReduce, WRID: 1})
	}},
	{"expected bytes past the ledger", hostapi.ErrBackend, setupFlow, func(d driver) error {
		return d.BeginStep(ctx, hostapi.StepReq{Step: 1, Critical: new(bool), ExpectedGradientBytes: 1 << 62})
	}},
	{"EndStep never begun", hostapi.ErrNoSuchStep, setupFlow, func(d driver) error { return d.EndStep(ctx, 5) }},
	{"EndStep of another step", hostapi.ErrNoSuchStep, func(t *testing.T, d driver) {
		setupFlow(t, d)
		if err := d.BeginStep(ctx, hostapi.StepReq{Step: 1, Critical: new(bool), ExpectedGradientBytes: 4096}); err != nil {
			t.Fatal(err)
		}
	}, func(d driver) error { return d.EndStep(ctx, 2) }},
	{"steps limit below 0", hostapi.ErrBadRequest, setupFlow, func(d driver) error { _, err := d.Steps(ctx, -1); return err }},
	{"steps limit past the most", hostapi.ErrBadRequest, setupFlow, func(d driver) error {
		_, err := d.Steps(ctx, hostapi.MaxStepRecords+1)
		return err
	}},
}

// Every refusal forgived makes, the in-process host API makes with the same
// code and message, from the same state, and neither changes what the
// client holds: one table, two drivers, so the simulator's workload meets
// the daemon's host API.
func TestRefusalsMatchTheDaemon(t *testing.T) {
	drivers := []struct {
		name string
		new  func(*testing.T) driver
	}{{"simhost", newPortDriver}, {"forgived", newDaemonDriver}}
	for _, c := range refusals {
		t.Run(c.name, func(t *testing.T) {
			var errs []error
			var held []hostapi.ClientCounters
			for _, drv := range drivers {
				d := drv.new(t)
				c.setup(t, d)
				before, err := d.Counters(ctx)
				if err != nil {
					t.Fatal(err)
				}
				err = c.req(d)
				if !errors.Is(err, c.want) {
					t.Errorf("%s: %v, want %v", drv.name, err, c.want)
				}
				after, cerr := d.Counters(ctx)
				if cerr != nil {
					t.Fatal(cerr)
				}
				if b, a := holds(before.Client), holds(after.Client); b != a && c.name != "destroy a destroyed flow" {
					t.Errorf("%s: the refused request changed what the client holds: %+v, then %+v", drv.name, b, a)
				}
				errs = append(errs, err)
				held = append(held, holds(after.Client))
			}
			if m0, m1 := message(errs[0]), message(errs[1]); m0 != m1 {
				t.Errorf("the drivers differ:\n %s: %s\n %s: %s", drivers[0].name, m0, drivers[1].name, m1)
			}
			if held[0] != held[1] {
				t.Errorf("the drivers hold differently after the case: %s %+v, %s %+v", drivers[0].name, held[0], drivers[1].name, held[1])
			}
		})
	}
}

// holds is what a client holds, of its counters.
func holds(c hostapi.ClientCounters) hostapi.ClientCounters {
	return hostapi.ClientCounters{Regions: c.Regions, RegisteredBytes: c.RegisteredBytes, Flows: c.Flows, Outstanding: c.Outstanding}
}

// message is an error as the client sees it: its code and message.
func message(err error) string {
	var e *hostapi.Error
	if errors.As(err, &e) {
		return fmt.Sprintf("%s: %s", e.Code, e.Message)
	}
	return fmt.Sprint(err)
}

// A step opened before its classification and classified later reads the
// same through both drivers: unclassified and critical (P_low) at first,
// then classified with its expected bytes kept; a receive of a gradient
// flow may declare its phase.
func TestStepOpenedThenClassifiedMatchesTheDaemon(t *testing.T) {
	var got [][]hostapi.StepRecord
	for _, newDriver := range []func(*testing.T) driver{newPortDriver, newDaemonDriver} {
		d := newDriver(t)
		setupOpenStep(t, d)
		open, err := d.Steps(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(open) != 1 || open[0].Classified || !open[0].Critical || open[0].P != 0.005 || open[0].Budget != 20 {
			t.Fatalf("open step: %+v", open)
		}
		for _, ph := range []hostapi.Phase{hostapi.PhaseReduce, hostapi.PhaseGather, hostapi.PhaseGatherOwner} {
			if err := d.PostRecv(ctx, hostapi.RecvReq{Flow: 7, Region: region, Length: 64, Step: 1, Phase: ph, WRID: uint64(ph)}); err != nil {
				t.Fatalf("post_recv with phase %v: %v", ph, err)
			}
		}
		if err := d.BeginStep(ctx, hostapi.StepReq{Step: 1, Critical: new(bool)}); err != nil {
			t.Fatal(err)
		}
		recs, err := d.Steps(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		if len(recs) != 1 || !recs[0].Classified || recs[0].Critical || recs[0].Expected != 4096 || recs[0].Budget != 409 || recs[0].UnbudgetedBytes != 0 {
			t.Fatalf("classified step: %+v", recs)
		}
		c, err := d.Counters(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c.Host.UnbudgetedBytes != 0 {
			t.Fatalf("unbudgeted bytes %d with no traffic", c.Host.UnbudgetedBytes)
		}
		got = append(got, recs)
	}
	if got[0][0] != got[1][0] {
		t.Fatalf("the drivers differ:\n simhost:  %+v\n forgived: %+v", got[0][0], got[1][0])
	}
}
