package lab

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/lab/fabric"
	"github.com/forgive-emu/forgive/lab/netns"
	"github.com/forgive-emu/forgive/lab/topo"
)

// The namespace tests' fabric: 2 leaves x 2 hosts, 2 spines, 2:1 (each
// leaf's two 100 Mb/s hosts share two 50 Mb/s uplinks).
const (
	netnsTopology = "leaf-spine-2x4-2spines"
	netnsRanks    = 4
)

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root: run the tests as root (CI does) to place the fabric in namespaces")
	}
	if testing.Short() {
		t.Skip("starts a fabric of 8 processes in namespaces; skipped with -short")
	}
}

var (
	binOnce sync.Once
	binDir  string
	binErr  error
)

// testBinaries builds the three commands into a directory of this test
// binary's own, so no other build sharing the user cache can swap them
// mid-run.
func testBinaries(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "forgive-lab-bin-"); binErr != nil {
			return
		}
		cmd := exec.Command("go", "build", "-o", binDir+"/", "./cmd/forgived", "./cmd/trimswitch", "./cmd/forgivectl")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binDir
}

// assertRunGone fails unless nothing of a run remains: no namespace, no
// veth in the test's namespace, none of its processes (a pid that now
// runs something that does not name the run's directory was reused). It
// removes what it finds, so a failed test leaves nothing either.
func assertRunGone(t *testing.T, prefix, dir string, pids []int) {
	t.Helper()
	if names, _ := netns.Names(prefix); len(names) != 0 {
		t.Errorf("namespaces left of %s: %v", prefix, names)
	}
	if links, _ := netns.RootLinks(prefix); len(links) != 0 {
		t.Errorf("veths left of %s: %v", prefix, links)
	}
	for _, pid := range pids {
		if b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline"); err == nil && bytes.Contains(b, []byte(dir)) {
			t.Errorf("process %d of %s still runs: %s", pid, prefix, bytes.ReplaceAll(b, []byte{0}, []byte{' '}))
		}
	}
	if r, err := netns.Cleanup(prefix); err != nil || !r.Empty() {
		t.Errorf("cleanup of %s found %+v (%v)", prefix, r, err)
	}
}

// One run's view of the fabric, read just before it stopped.
type netnsRun struct {
	policy      string
	prefix, dir string
	namespaces  int
	pids        []int
	spineSent   map[string]float64 // packets each spine sent
	uplinkTrims float64            // data packets trimmed on the leaves' uplinks
}

// "Bring up a 2-leaf, 2-spine fabric with 4 hosts in namespaces, run a
// short lab (3 steps, policies trim-nocc and forgive), and check: traffic
// crossed both spines (switch counters), the fabric trimmed, the
// invariants held, non-gradient bytes were
// exact, and after teardown no namespace, veth or process of the run
// remains."
func TestNetnsLeafSpineLab(t *testing.T) {
	needRoot(t)
	var runs []*netnsRun
	inspect := func(ctx context.Context, policy string, _ uint64, f *fabric.Fabric) error {
		r := &netnsRun{policy: policy, prefix: f.Plan.Netns.Prefix, dir: f.Dir(), pids: f.Pids(), spineSent: map[string]float64{}}
		runs = append(runs, r)
		t.Cleanup(func() { assertRunGone(t, r.prefix, r.dir, r.pids) }) // also when the test fails below
		names, err := netns.Names(r.prefix)
		if err != nil {
			return err
		}
		r.namespaces = len(names)
		for _, sw := range []string{"spine1", "spine2"} {
			if r.spineSent[sw], err = f.SwitchCounter(ctx, sw, "trimswitch_sent_packets_total", nil); err != nil {
				return err
			}
		}
		for _, leaf := range []string{"leaf1", "leaf2"} {
			for _, up := range []string{"up1", "up2"} {
				n, err := f.SwitchCounter(ctx, leaf, "trimswitch_trimmed_packets_total", map[string]string{"port": up})
				if err != nil {
					return err
				}
				r.uplinkTrims += n
			}
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a hang guard, not a deadline on the machine's speed
	defer cancel()
	start := time.Now()
	// Spraying gives every packet its own entropy, so ECMP spreads every
	// flow over both spines; 1 MiB gradients a step fill the 2:1 uplinks.
	// trim-nocc sends at line rate whatever the machine's load, so the
	// uplinks trim however slowly the daemons run (under DCQCN a loaded
	// machine's senders could slow below the uplinks' rate and trim
	// nothing: seen at 2 to 10 trimmed packets in a run).
	f, err := Run(ctx, Options{Topology: netnsTopology, Ranks: netnsRanks, Steps: 3, Policies: []string{"trim-nocc", "forgive"},
		Placement: "netns", BinDir: testBinaries(t), Inspect: inspect,
		Workload: WorkloadOptions{GradientBytes: 1 << 20, Critical: []int{1}, Entropy: "spray"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("two runs in namespaces in %v", time.Since(start).Round(time.Millisecond))
	if len(f.Runs) != 2 || len(runs) != 2 {
		t.Fatalf("%d runs, %d inspected", len(f.Runs), len(runs))
	}
	trimmed := 0.0
	for i, r := range runs {
		res := f.Runs[i]
		t.Logf("%s: %d namespaces, spines sent %v packets, %v packets trimmed on the uplinks, trimmed %.2f%%",
			r.policy, r.namespaces, r.spineSent, r.uplinkTrims, 100*res.TrimmedBytesFrac)
		if r.namespaces != 8 {
			t.Errorf("%s: %d namespaces while it ran, want 8 (4 switches, 4 hosts)", r.policy, r.namespaces)
		}
		for sw, n := range r.spineSent {
			if n == 0 {
				t.Errorf("%s: %s sent nothing: traffic did not cross both spines", r.policy, sw)
			}
		}
		if !res.BudgetInvariantHeld || !res.NonGradientBytesExact || !res.GradientSumsExact {
			t.Errorf("%s: invariant %v, non-gradient exact %v, sums exact %v", r.policy, res.BudgetInvariantHeld, res.NonGradientBytesExact, res.GradientSumsExact)
		}
		trimmed += r.uplinkTrims
	}
	// Four ranks put two hosts on each leaf, so the leaves' uplinks carry
	// no more than their hosts send and trim only when spraying
	// unbalances them (0 to 21 packets seen); the incast of the ring and
	// the tensor pairs on the hosts' downlinks trims in every run without
	// congestion control. What must hold: the fabric in namespaces trims.
	t.Logf("%v packets trimmed on the uplinks in all", trimmed)
	if f.Runs[0].Policy == "trim-nocc" && f.Runs[0].TrimmedBytesFrac == 0 {
		t.Error("trim-nocc: nothing was trimmed anywhere in the fabric")
	}
	for _, r := range runs {
		assertRunGone(t, r.prefix, r.dir, r.pids)
	}
}

// A run that fails midway (here its inspection) still stops its
// processes and removes its namespaces and veths.
func TestNetnsFailedRunLeavesNothing(t *testing.T) {
	needRoot(t)
	var prefix, dir string
	var pids []int
	boom := errors.New("the test fails midway")
	_, err := Run(context.Background(), Options{Topology: netnsTopology, Ranks: netnsRanks, Steps: 1, Policies: []string{"dcqcn"},
		Placement: "netns", BinDir: testBinaries(t),
		Workload: WorkloadOptions{GradientBytes: 64 << 10},
		Inspect: func(_ context.Context, _ string, _ uint64, f *fabric.Fabric) error {
			prefix, dir, pids = f.Plan.Netns.Prefix, f.Dir(), f.Pids()
			return boom
		}})
	if !errors.Is(err, boom) {
		t.Fatalf("Run = %v, want the inspection's failure", err)
	}
	assertRunGone(t, prefix, dir, pids)
}

// A fabric whose daemon cannot start leaves nothing either.
func TestNetnsFailedStartLeavesNothing(t *testing.T) {
	needRoot(t)
	bins := testBinaries(t)
	dir := t.TempDir()
	for _, name := range []string{"trimswitch", "forgivectl"} {
		if err := os.Symlink(filepath.Join(bins, name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "forgived"), []byte("#!/bin/sh\necho cannot start >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	_, err := Run(context.Background(), Options{Topology: netnsTopology, Ranks: netnsRanks, Steps: 1, Policies: []string{"dcqcn"},
		Placement: "netns", BinDir: dir})
	if err == nil || !strings.Contains(err.Error(), "host1") {
		t.Fatalf("Run = %v, want host1's failure to start", err)
	}
	assertRunGone(t, netns.ProcessPrefix(), "", nil)
}

// "A host whose veth goes down mid-transfer: its flows fail with a clear
// error, the rest of the fabric keeps working."
func TestNetnsHostLinkDownMidTransfer(t *testing.T) {
	needRoot(t)
	tp, err := topo.FindTopology(netnsTopology)
	if err != nil {
		t.Fatal(err)
	}
	prof, err := topo.FindProfile(topo.DefaultProfile)
	if err != nil {
		t.Fatal(err)
	}
	bins := testBinaries(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	fab, err := fabric.Start(ctx, fabric.Config{Topology: tp, Profile: prof, Bins: map[string]string{
		"forgived": bins + "/forgived", "trimswitch": bins + "/trimswitch", "forgivectl": bins + "/forgivectl"},
		Place: topo.PlaceOptions{Ranks: netnsRanks, Network: topo.Namespaces, RunID: netns.NewRunID(), Seed: 1, Host: topo.DefaultHostPolicy()}})
	if err != nil {
		t.Fatal(err)
	}
	prefix, dir, pids := fab.Plan.Netns.Prefix, fab.Dir(), fab.Pids()
	t.Cleanup(func() {
		if err := fab.Stop(); err != nil {
			t.Errorf("stopping the fabric: %v", err)
		}
		assertRunGone(t, prefix, dir, pids)
	})
	c := map[int]*hostapi.Client{}
	for id := 1; id <= netnsRanks; id++ {
		cl, err := hostapi.DialContext(ctx, fab.Plan.Host(id-1).Socket)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cl.Close() })
		c[id] = cl
	}
	// host1 (leaf1) sends 8 MiB to host2 (leaf2): over a second at 50 Mb/s
	// uplinks. Once it is under way, host1's cable goes down.
	post(ctx, t, c[1], c[2], 1, 2, 41, 8<<20)
	time.Sleep(300 * time.Millisecond)
	if err := fab.SetLinkUp("host1", false); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	// host3 (leaf1) to host4 (leaf2) crosses the same leaves and spines.
	x := post(ctx, t, c[3], c[4], 3, 4, 42, 1<<20)
	if comp := awaitKind(ctx, t, c[4], hostapi.KindRecv); comp.Status != hostapi.StatusOK || !bytes.Equal(x.dst, x.src) {
		t.Fatalf("host3 -> host4 after host1's cable went down: %+v", comp)
	}
	comp := awaitKind(ctx, t, c[1], hostapi.KindSend)
	if comp.Status != hostapi.StatusError || !strings.Contains(comp.Err, "unreachable") {
		t.Fatalf("host1's send over its cut cable completed with %+v, want an error saying the peer is unreachable", comp)
	}
	t.Logf("host1's send failed %v after its cable went down: %s", time.Since(cut).Round(time.Millisecond), comp.Err)
	select {
	case died := <-fab.Died():
		t.Fatalf("a daemon died: %v", died)
	default:
	}
}

type message struct{ src, dst []byte }

// post opens flow id from host a to host b and posts one message of
// random bytes.
func post(ctx context.Context, t *testing.T, ca, cb *hostapi.Client, a, b hostapi.HostID, id hostapi.FlowID, size int) message {
	t.Helper()
	for _, e := range []struct {
		c    *hostapi.Client
		peer hostapi.HostID
	}{{ca, b}, {cb, a}} {
		if err := e.c.CreateFlow(ctx, hostapi.FlowSpec{Flow: id, Peer: e.peer, Class: hostapi.ClassOther}); err != nil {
			t.Fatal(err)
		}
	}
	sr, err := ca.RegisterMemory(ctx, size)
	if err != nil {
		t.Fatal(err)
	}
	rr, err := cb.RegisterMemory(ctx, size)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(uint64(id), 1))
	for i := range sr.Bytes() {
		sr.Bytes()[i] = byte(r.Uint32())
	}
	if err := cb.PostRecv(ctx, hostapi.RecvReq{Flow: id, Region: rr.ID(), Length: uint64(size), WRID: uint64(id)}); err != nil {
		t.Fatal(err)
	}
	if err := ca.PostSend(ctx, hostapi.SendReq{Flow: id, Region: sr.ID(), Length: uint64(size), WRID: uint64(id)}); err != nil {
		t.Fatal(err)
	}
	return message{src: sr.Bytes(), dst: rr.Bytes()}
}

// awaitKind polls c until a completion of kind k arrives (or ctx ends).
func awaitKind(ctx context.Context, t *testing.T, c *hostapi.Client, k hostapi.Kind) hostapi.Completion {
	t.Helper()
	for i := 0; i < 100; i++ {
		comp, err := c.Poll(ctx)
		if err != nil {
			t.Fatalf("no %v completion: %v", k, err)
		}
		if comp.Kind == k {
			return comp
		}
	}
	t.Fatalf("no %v completion among 100", k)
	return hostapi.Completion{}
}

// An unknown placement is refused before anything starts.
func TestUnknownPlacementIsBadInput(t *testing.T) {
	_, err := Run(context.Background(), Options{Placement: "bridge", BinDir: "/nonexistent"})
	if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), `--placement "bridge"`) {
		t.Errorf("Run = %v, want ErrInput naming the placement", err)
	}
}
