package forgivedrv

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/nic"
)

// cabled starts two daemons, hosts 1 and 2, cabled to each other (each
// one's switch is the other's listen address), with engines each, and
// returns their clients.
func cabled(t *testing.T, net string, engines int, extra string) (c1, c2 *hostapi.Client, d1, d2 *Daemon) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var ran []chan error
	t.Cleanup(func() {
		cancel()
		for _, r := range ran {
			if err := <-r; err != nil {
				t.Errorf("daemon: %v", err)
			}
		}
	})
	var ds [3]*Daemon
	var cs [3]*hostapi.Client
	for h := 1; h <= 2; h++ {
		sock := filepath.Join(dir, fmt.Sprintf("h%d.sock", h))
		cfg, err := ParseConfig(fmt.Appendf(nil, `host: %d
listen: %s%d:4793
switch: %s%d:4793
socket: %s
line_rate: 2Gbps
cc: none
engines: %d
reliability: {window: 256KiB, rto_low: 5ms, rto_high: 20ms}
forgive: {enabled: true, p_low: 0.1, p_high: 0.01}
fail_after: 20s
%s`, h, net, h, net, 3-h, sock, engines, extra))
		if err != nil {
			t.Fatal(err)
		}
		d, err := New(cfg, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		r := make(chan error, 1)
		go func() { r <- d.Run(ctx) }()
		ran = append(ran, r)
		c, err := hostapi.Dial(sock)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		ds[h], cs[h] = d, c
	}
	return cs[1], cs[2], ds[1], ds[2]
}

// gradientTransfer moves one step's gradients from host 1 to host 2 over
// flows, one message of size bytes each, and returns what arrived and
// host 2's record of the step.
func gradientTransfer(t *testing.T, c1, c2 *hostapi.Client, flows []hostapi.FlowID, size int) (sent, got []byte, rec hostapi.StepRecord) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, f := range flows {
		for _, e := range []struct {
			c    *hostapi.Client
			peer hostapi.HostID
		}{{c1, 2}, {c2, 1}} {
			if err := e.c.CreateFlow(ctx, hostapi.FlowSpec{Flow: f, Peer: e.peer, Class: hostapi.ClassGradient}); err != nil {
				t.Fatal(err)
			}
		}
	}
	total := size * len(flows)
	src, err := c1.RegisterMemory(ctx, total)
	if err != nil {
		t.Fatal(err)
	}
	dst, err := c2.RegisterMemory(ctx, total)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for i := range src.Bytes() {
		src.Bytes()[i] = byte(rng.Uint32())
	}
	critical := false
	if err := c2.BeginStep(ctx, hostapi.StepReq{Step: 1, Critical: &critical, ExpectedGradientBytes: uint64(total)}); err != nil {
		t.Fatal(err)
	}
	for i, f := range flows {
		if err := c2.PostRecv(ctx, hostapi.RecvReq{Flow: f, Region: dst.ID(), Offset: uint64(i * size), Length: uint64(size), WRID: uint64(i), Step: 1}); err != nil {
			t.Fatal(err)
		}
	}
	for i, f := range flows {
		if err := c1.PostSend(ctx, hostapi.SendReq{Flow: f, Region: src.ID(), Offset: uint64(i * size), Length: uint64(size), WRID: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []*hostapi.Client{c2, c1} {
		for range flows {
			comp, err := c.Poll(ctx)
			if err != nil || comp.Status != hostapi.StatusOK {
				t.Fatalf("completion %+v, %v", comp, err)
			}
		}
	}
	if err := c2.EndStep(ctx, 1); err != nil {
		t.Fatal(err)
	}
	recs, err := c2.Steps(ctx, 0)
	if err != nil || len(recs) != 1 {
		t.Fatalf("steps %+v, %v", recs, err)
	}
	return bytes.Clone(src.Bytes()), bytes.Clone(dst.Bytes()), recs[0]
}

// What a flow sees does not change with the engines: the same transfer,
// over flows that two engines share between them, delivers the same bytes
// and the same step record (one ledger for the host: the step's received
// bytes are every flow's, on every engine), and the FORGIVE invariants
// hold.
func TestEnginesSameTransfer(t *testing.T) {
	flows := []hostapi.FlowID{1, 2, 3, 4, 5, 6}
	on := map[int]int{}
	for _, f := range flows {
		on[Steer(1, uint32(f), 2)]++ // host 2's flows' engines (peer 1)
	}
	if on[0] == 0 || on[1] == 0 {
		t.Fatalf("flows %v all on one of two engines: %v", flows, on)
	}
	const size = 96 << 10
	var recs []hostapi.StepRecord
	for i, n := range []int{1, 2} {
		net := fmt.Sprintf("127.%d.%d.", 100+os.Getpid()%100, 240+i)
		c1, c2, _, d2 := cabled(t, net, n, "")
		if st, err := c1.Status(context.Background()); err != nil || (n > 1 && st.Backend["engines"] != "2") {
			t.Fatalf("status %+v, %v", st, err)
		}
		sent, got, rec := gradientTransfer(t, c1, c2, flows, size)
		if !bytes.Equal(sent, got) {
			t.Fatalf("engines %d: the bytes received differ from those sent", n)
		}
		total := int64(size * len(flows))
		if rec.Received != total || rec.Expected != total || rec.Forgiven > rec.Budget ||
			float64(rec.Forgiven) > rec.P/(1-rec.P)*float64(rec.Received) || !rec.InvariantHeld {
			t.Fatalf("engines %d: step %+v: want %d received of %d expected, the invariants held", n, rec, total, total)
		}
		ct, err := c2.Counters(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var recv uint64
		for _, f := range ct.Flows {
			recv += f.Values.RecvBytes
		}
		if len(ct.Flows) != len(flows) || recv != uint64(total) {
			t.Fatalf("engines %d: %d flows' counters, %d bytes received, want %d and %d", n, len(ct.Flows), recv, len(flows), total)
		}
		if ct.Host.Completions < uint64(len(flows)) || ct.Host.LostCompletions != 0 {
			t.Fatalf("engines %d: host counters %+v", n, ct.Host)
		}
		if n > 1 {
			// Both engines of the receiver carried data: the flows were
			// spread, and each found its engine.
			for i, s := range d2.grp.shards {
				var st nic.Stats
				var reps []nic.FlowReport
				_ = s.do(func(time.Duration) error {
					st = s.eng.Stats()
					for _, key := range s.eng.Flows() {
						r, _ := s.eng.Flow(key)
						reps = append(reps, r)
					}
					return nil
				})
				if st.RxPackets == 0 || st.Malformed != 0 || len(reps) != on[i] {
					t.Errorf("engine %d of host 2: %d flows, want %d; %+v", i, len(reps), on[i], st)
				}
				for _, r := range reps {
					if Steer(r.Key.Peer, r.Key.ID, n) != i || r.Stats.RecvBytes != size {
						t.Errorf("engine %d of host 2: flow %v received %d bytes", i, r.Key, r.Stats.RecvBytes)
					}
				}
			}
		}
		recs = append(recs, rec)
	}
	a, b := recs[0], recs[1]
	if a.Expected != b.Expected || a.Budget != b.Budget || a.Received != b.Received || a.P != b.P ||
		a.Critical != b.Critical || a.Forgiven != b.Forgiven {
		t.Errorf("step record over 1 engine %+v, over 2 %+v", a, b)
	}
}
