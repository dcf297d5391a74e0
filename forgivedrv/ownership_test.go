package forgivedrv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
)

// childSquatEnv makes the test binary (TestMain) a client of the socket it
// names that tries to take flow 1 to peer 2 before anyone else: the
// flow-id squat.
const childSquatEnv = "FORGIVE_HOSTD_TEST_CHILD_SQUAT"

// Exit codes of the squatting child.
const (
	squatTook     = 0 // it created flow 1
	squatReserved = 4 // refused: flow_reserved
	squatOther    = 5 // anything else
)

// childSquat creates flow 1 to peer 2 and exits squatTook if it may; then
// it waits for its parent to close stdin, holding the flow.
func childSquat(sock string) int {
	c, err := hostapi.Dial(sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return squatOther
	}
	defer c.Close()
	err = c.CreateFlow(context.Background(), hostapi.FlowSpec{Flow: 1, Peer: 2, Class: hostapi.ClassOther})
	switch {
	case err == nil:
		fmt.Println("took flow 1")
		_, _ = os.Stdin.Read(make([]byte, 1)) // hold it until the parent is done
		return squatTook
	case errors.Is(err, hostapi.ErrFlowReserved):
		fmt.Fprintln(os.Stderr, err)
		return squatReserved
	}
	fmt.Fprintln(os.Stderr, err)
	return squatOther
}

// nobodyBinary copies the test binary where uid 65534 can run it.
func nobodyBinary(t *testing.T) (dir, bin string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "forgive-owner")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	exe, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	bin = filepath.Join(dir, "client")
	if err := os.WriteFile(bin, exe, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, bin
}

// "With a second uid admitted (allowed_uids [0, 65534], socket 0666), uid
// 65534 created flow 1 to peer 2 first; root's receive got flow_exists
// and uid 65534 received root's whole file." Flow ids are the host's on
// the wire: whoever holds flow 1 receives what peer 2 sends on it. With
// the ids reserved for root's job (jobs:), the squatter, a real client of
// another uid on the real socket, is refused by name and counted, and
// root's job creates flow 1 and receives on it. The same daemon without
// the reservation lets the squat through, as it must: the test can fail.
func TestFlowSquatOfAnotherUIDRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root: the squatter runs as uid 65534")
	}
	dir, bin := nobodyBinary(t)
	admit := "allowed_uids: [65534]\nsocket_mode: \"0666\"\n"
	squat := func(sock string) (code int, release func()) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cmd := exec.CommandContext(ctx, bin, "-test.run=^$")
		cmd.Env = append(os.Environ(), childSquatEnv+"="+sock)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		line := make([]byte, 64)
		n, _ := out.Read(line) // "took flow 1", or nothing when it exits
		release = func() {
			stdin.Close()
			_ = cmd.Wait()
			cancel()
		}
		if n > 0 {
			return squatTook, release
		}
		release()
		return cmd.ProcessState.ExitCode(), func() {}
	}
	ctx := context.Background()
	spec := hostapi.FlowSpec{Flow: 1, Peer: 2, Class: hostapi.ClassOther}

	// Without a reservation, first come holds the id: the attack works.
	sub := filepath.Join(dir, "open")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	_, sock, logs := runDaemon(t, sub, admit)
	code, release := squat(sock)
	root, err := hostapi.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	rootErr := root.CreateFlow(ctx, spec)
	root.Close()
	release()
	if code != squatTook || !errors.Is(rootErr, hostapi.ErrFlowExists) {
		t.Fatalf("without jobs: the squatter exited %d and root's create_flow gave %v; want the squat to work (0, flow_exists)", code, rootErr)
	}
	waitFor(t, func() bool { return logs.FilterMessage("ready").Len() == 1 })
	if logs.FilterMessage(SharedFlowIDsWarning).Len() != 1 {
		t.Errorf("a daemon admitting uid 65534 without jobs did not warn %q", SharedFlowIDsWarning)
	}

	// With flow ids 1 to 999 reserved for root's job "train".
	sub = filepath.Join(dir, "reserved")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	d, sock, logs := runDaemon(t, sub, admit+"jobs: [{name: train, uids: [0], first_flow: 1, last_flow: 999}]\n")
	code, release = squat(sock)
	defer release()
	waitFor(t, func() bool { return logs.FilterMessage("ready").Len() == 1 })
	if logs.FilterMessage(SharedFlowIDsWarning).Len() != 0 {
		t.Errorf("a daemon with jobs warned %q", SharedFlowIDsWarning)
	}
	if code != squatReserved {
		t.Fatalf("the uid-65534 squatter exited %d, want %d (refused: flow_reserved)", code, squatReserved)
	}
	if n := serverStats(t, d).RefusedNotOwner; n != 1 {
		t.Errorf("refused_not_owner = %d, want the squat counted once", n)
	}
	train, err := hostapi.DialJob(ctx, sock, "train")
	if err != nil {
		t.Fatal(err)
	}
	defer train.Close()
	if err := train.CreateFlow(ctx, spec); err != nil {
		t.Fatalf("root's job train cannot create its reserved flow 1: %v", err)
	}
	r, err := train.RegisterMemory(ctx, 4096)
	if err != nil {
		t.Fatal(err)
	}
	if err := train.PostRecv(ctx, hostapi.RecvReq{Flow: 1, Region: r.ID(), Length: 4096, WRID: 1}); err != nil {
		t.Fatalf("root's receive on flow 1: %v", err)
	}
	// Root's other jobs, and its default one, are refused the ids too.
	other, err := hostapi.DialJob(ctx, sock, "eval")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	if err := other.CreateFlow(ctx, hostapi.FlowSpec{Flow: 2, Peer: 2, Class: hostapi.ClassOther}); !errors.Is(err, hostapi.ErrFlowReserved) {
		t.Errorf("root's job eval creating reserved flow 2: %v, want flow_reserved", err)
	}
	if err := train.CreateFlow(ctx, hostapi.FlowSpec{Flow: 1000, Peer: 2, Class: hostapi.ClassOther}); !errors.Is(err, hostapi.ErrFlowReserved) {
		t.Errorf("job train creating flow 1000, outside its ids: %v, want flow_reserved", err)
	}
}

// "begin_step is host-wide, so any admitted client can open or classify
// another job's step." Two jobs on one daemon, each a real client on the
// real socket: job b's begin_step of the number job a opened unclassified
// opens b's own step and leaves a's unclassified; b cannot end a's step
// (no_such_step, counted); each job's steps list only its own. Each job's
// ledger refuses its own step again as before.
func TestStepTakeoverOfAnotherJobRefused(t *testing.T) {
	d, sock, _ := runDaemon(t, t.TempDir(), fmt.Sprintf("metrics: 127.%d.251.1:0\n", 100+os.Getpid()%100))
	ctx := context.Background()
	a, err := hostapi.DialJob(ctx, sock, "a")
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := hostapi.DialJob(ctx, sock, "b")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := a.BeginStep(ctx, hostapi.StepReq{Step: 5, ExpectedGradientBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	if err := a.BeginStep(ctx, hostapi.StepReq{Step: 6, ExpectedGradientBytes: 1 << 20}); err != nil {
		t.Fatal(err)
	}
	nonCritical := false
	if err := b.BeginStep(ctx, hostapi.StepReq{Step: 5, Critical: &nonCritical, ExpectedGradientBytes: 1 << 20}); err != nil {
		t.Fatalf("job b's own step 5: %v", err)
	}
	if err := b.EndStep(ctx, 6); !errors.Is(err, hostapi.ErrNoSuchStep) {
		t.Errorf("job b ending job a's step 6: %v, want no_such_step", err)
	}
	if n := serverStats(t, d).RefusedNotOwner; n != 1 {
		t.Errorf("refused_not_owner = %d, want b's end_step counted", n)
	}
	steps := func(c *hostapi.Client) map[uint64]hostapi.StepRecord {
		recs, err := c.Steps(ctx, 0)
		if err != nil {
			t.Fatal(err)
		}
		m := map[uint64]hostapi.StepRecord{}
		for _, r := range recs {
			m[r.Step] = r
		}
		return m
	}
	as, bs := steps(a), steps(b)
	if r := as[5]; len(as) != 2 || r.Classified || !r.Critical || !as[6].Open {
		t.Errorf("job a's steps %+v: want 5 and 6 open, 5 still unclassified (critical until a classifies it)", as)
	}
	if r := bs[5]; len(bs) != 1 || !r.Classified || r.Critical {
		t.Errorf("job b's steps %+v: want only its own step 5, non-critical", bs)
	}
	// The metrics name each job's steps.
	waitFor(t, func() bool { return d.MetricsAddr() != "" })
	code, body := httpGet(t, "http://"+d.MetricsAddr()+"/metrics")
	for _, want := range []string{`job="a",step="5",uid="0"} 0.005`, `job="a",step="6",uid="0"} 0.005`, `job="b",step="5",uid="0"} 0.1`} {
		if code != 200 || !strings.Contains(body, `forgived_step{field="p",host="",`+want) {
			t.Errorf("/metrics (%d) has no forgived_step{field=\"p\",...%s", code, want)
		}
	}
	if strings.Contains(body, `job="b",step="6"`) {
		t.Error("/metrics lists a step 6 of job b, which job b never began")
	}
	if err := a.BeginStep(ctx, hostapi.StepReq{Step: 5, Critical: &nonCritical, ExpectedGradientBytes: 1 << 20}); err != nil {
		t.Errorf("job a classifying its own step 5: %v", err)
	}
	if err := a.EndStep(ctx, 6); err != nil {
		t.Errorf("job a ending its own step 6: %v", err)
	}
}

// "On Kubernetes every pod runs as uid 1000, so ... the 32-clients-per-uid
// limit is shared by all of them." The limit is per job once a client
// said hello: job a's clients at max_clients_per_job do not keep job b's,
// of the same uid, out.
func TestClientLimitPerJob(t *testing.T) {
	d, sock, _ := runDaemon(t, t.TempDir(), "max_clients_per_job: 2\nmax_clients_per_uid: 2\n")
	ctx := context.Background()
	for _, job := range []string{"a", "a", "b", "b", ""} {
		c, err := hostapi.DialJob(ctx, sock, job)
		if err != nil {
			t.Fatalf("a client of job %q: %v", job, err)
		}
		defer c.Close()
	}
	if _, err := hostapi.DialJob(ctx, sock, "a"); !errors.Is(err, hostapi.ErrLimitExceeded) {
		t.Errorf("a third client of job a: %v, want limit_exceeded", err)
	}
	waitFor(t, func() bool { return serverStats(t, d).Clients == 5 }) // the refused one is closing
	if st := serverStats(t, d); st.RefusedPerJob != 1 || st.RefusedPerUID != 0 || st.Clients != 5 {
		t.Errorf("server stats %+v: want 5 clients, 1 per-job refusal, none per uid", st)
	}
}

// The jobs section is checked as start-up checks it: a name a hello could
// declare, at least one uid, a range of ids, no two ranges overlapping.
func TestJobsConfigChecked(t *testing.T) {
	for _, c := range []struct{ name, jobs, want string }{
		{"no name", "[{uids: [0], first_flow: 1, last_flow: 2}]", "jobs[0].name"},
		{"a name with a space", "[{name: \"a b\", uids: [0], first_flow: 1, last_flow: 2}]", "jobs[0].name"},
		{"no uids", "[{name: a, first_flow: 1, last_flow: 2}]", "jobs[0].uids"},
		{"flow 0", "[{name: a, uids: [0], first_flow: 0, last_flow: 2}]", "first_flow 0"},
		{"inverted", "[{name: a, uids: [0], first_flow: 5, last_flow: 2}]", "first_flow 5, last_flow 2"},
		{"overlapping", "[{name: a, uids: [0], first_flow: 1, last_flow: 10}, {name: b, uids: [0], first_flow: 10, last_flow: 20}]", "jobs[1]"},
		{"unknown field", "[{name: a, uids: [0], first: 1, last_flow: 2}]", "first"},
	} {
		_, err := ParseConfig([]byte(minimal + "jobs: " + c.jobs + "\n"))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrConfig naming %q", c.name, err, c.want)
		}
	}
	if _, err := ParseConfig([]byte(minimal + "jobs: [{name: a, uids: [0], first_flow: 1, last_flow: 10}, {name: a/eval, uids: [0, 1000], first_flow: 11, last_flow: 20}]\n")); err != nil {
		t.Errorf("two good jobs: %v", err)
	}
}
