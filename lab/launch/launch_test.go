package launch

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func sh(name, script string) Spec {
	return Spec{Name: name, Path: "/bin/sh", Args: []string{"-c", script}}
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

// Stop ends every child, and none is left behind.
func TestStopLeavesNoChildren(t *testing.T) {
	dir := t.TempDir()
	ready := filepath.Join(dir, "ready")
	a := sh("a", "touch "+ready+"; exec sleep 60")
	a.Ready = FileExists(ready)
	g, err := Start(context.Background(), []Spec{a, sh("b", "exec sleep 60")}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	pids := g.Pids()
	if err := g.Stop(5 * time.Second); err != nil {
		t.Fatalf("a clean stop reported %v", err)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Fatalf("pid %d still alive after Stop", pid)
		}
	}
}

// A child that dies is reported by name with its last words, and Stop
// does not report it twice.
func TestDeathIsReported(t *testing.T) {
	g, err := Start(context.Background(), []Spec{sh("doomed", "echo bad config >&2; sleep 0.2; exit 3"), sh("ok", "exec sleep 60")}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop(5 * time.Second)
	select {
	case err := <-g.Died():
		if !errors.Is(err, ErrDied) || !strings.Contains(err.Error(), "doomed") || !strings.Contains(err.Error(), "bad config") {
			t.Fatalf("report %q: want ErrDied naming the child and its output", err)
		}
	case <-time.After(2 * time.Minute): // a hang guard: the child exits at once
		t.Fatal("death not reported")
	}
	if err := g.Stop(5 * time.Second); err != nil {
		t.Fatalf("Stop after a reported death: %v", err)
	}
}

// A child that never becomes ready fails Start with its name, and the
// children already started are stopped.
func TestNotReadyStopsTheRest(t *testing.T) {
	first := sh("first", "exec sleep 60")
	never := sh("never", "exec sleep 60")
	never.Ready = FileExists(filepath.Join(t.TempDir(), "no-such-file"))
	_, err := Start(context.Background(), []Spec{first, never}, 300*time.Millisecond)
	if !errors.Is(err, ErrNotReady) || !strings.Contains(err.Error(), "never") {
		t.Fatalf("Start = %v, want ErrNotReady naming the child", err)
	}
	// Both children are gone: no process of ours still runs sleep 60.
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		st, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if strings.Contains(string(b), "sleep\x0060") && strings.Contains(string(st), " "+itoa(os.Getpid())+" ") {
			t.Fatalf("an orphan is still running: pid %s", e.Name())
		}
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}

// A missing binary is a clear error.
func TestMissingBinary(t *testing.T) {
	_, err := Start(context.Background(), []Spec{{Name: "ghost", Path: "/nonexistent/forgived"}}, time.Second)
	if err == nil || !strings.Contains(err.Error(), "ghost") {
		t.Fatalf("Start = %v, want an error naming the process", err)
	}
}

// Binaries finds commands in an explicit directory and refuses a missing
// one.
func TestBinariesInDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "forgived"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	m, err := Binaries(context.Background(), dir, "forgived")
	if err != nil || m["forgived"] != filepath.Join(dir, "forgived") {
		t.Fatalf("Binaries = %v, %v", m, err)
	}
	if _, err := Binaries(context.Background(), dir, "trimswitch"); !errors.Is(err, ErrNoBinary) {
		t.Fatalf("missing binary: %v, want ErrNoBinary", err)
	}
}

// A child with a namespace starts through the helper as `HELPER
// netns-exec NAME -- PATH ARGS...`; the helper's exec keeps the pid the
// group watches.
func TestNetnsSpecGoesThroughTheHelper(t *testing.T) {
	dir := t.TempDir()
	seen, ready := filepath.Join(dir, "seen"), filepath.Join(dir, "ready")
	helper := filepath.Join(dir, "helper")
	script := "#!/bin/sh\necho \"$*\" > " + seen + "\n[ \"$1\" = netns-exec ] && [ \"$3\" = -- ] || exit 9\nshift 3\nexec \"$@\"\n"
	if err := os.WriteFile(helper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	// The pid file appears whole (mv), so readiness never sees it empty.
	s := sh("inside", "echo $$ > "+ready+".tmp; mv "+ready+".tmp "+ready+"; exec sleep 60")
	s.Netns, s.NetnsExec, s.Ready = "fgv-x-host1", helper, FileExists(ready)
	g, err := Start(context.Background(), []Spec{s}, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Stop(5 * time.Second)
	b, err := os.ReadFile(seen)
	if err != nil {
		t.Fatal(err)
	}
	if want := "netns-exec fgv-x-host1 -- /bin/sh -c echo $$ > " + ready + ".tmp; mv " + ready + ".tmp " + ready + "; exec sleep 60"; strings.TrimSpace(string(b)) != want {
		t.Errorf("helper ran with %q, want %q", b, want)
	}
	pid, _ := os.ReadFile(ready)
	if strings.TrimSpace(string(pid)) != strconv.Itoa(g.Pids()[0]) {
		t.Errorf("the child runs as pid %s, the group watches %d", pid, g.Pids()[0])
	}
}

func TestNetnsSpecNeedsAHelper(t *testing.T) {
	s := sh("inside", "exit 0")
	s.Netns = "fgv-x-host1"
	if _, err := Start(context.Background(), []Spec{s}, time.Second); err == nil || !strings.Contains(err.Error(), "inside") {
		t.Errorf("Start = %v, want an error naming the child", err)
	}
}
