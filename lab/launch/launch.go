package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Errors.
var (
	ErrNotReady = errors.New("launch: process not ready")
	ErrDied     = errors.New("launch: process died")
)

// Spec describes one child process.
type Spec struct {
	Name  string   // for errors and logs: "leaf0", "host3"
	Path  string   // the binary
	Args  []string // its arguments
	Dir   string   // working directory; empty: the caller's
	Ready func(ctx context.Context) error
	// Log receives the child's stdout and stderr; the last lines are kept
	// for error messages either way.
	Log io.Writer
	// Netns, when set, is the network namespace the child runs in. It is
	// started as `NetnsExec netns-exec NAME -- PATH ARGS...`: forgivectl's
	// helper enters the namespace and execs the binary, which keeps the
	// pid, so stopping, killing and the parent-death signal work as for
	// any child.
	Netns     string
	NetnsExec string // the forgivectl binary; required with Netns
}

// NetnsExecCommand is forgivectl's subcommand that runs a command inside
// a named network namespace.
const NetnsExecCommand = "netns-exec"

// command is the program and arguments that start s.
func (s Spec) command() (string, []string, error) {
	if s.Netns == "" {
		return s.Path, s.Args, nil
	}
	if s.NetnsExec == "" {
		return "", nil, fmt.Errorf("launch: %s: a namespace (%s) but no netns-exec helper", s.Name, s.Netns)
	}
	args := append([]string{NetnsExecCommand, s.Netns, "--", s.Path}, s.Args...)
	return s.NetnsExec, args, nil
}

// Group is a set of running children.
type Group struct {
	mu    sync.Mutex
	procs []*proc
	died  chan error
	once  sync.Once
	stop  bool
}

type proc struct {
	spec Spec
	cmd  *exec.Cmd
	tail *tailBuffer
	done chan struct{}
	err  error
	// died: it exited before Stop, and Died reported it.
	died bool
}

// Start starts every spec in order, each after the previous one is ready.
// If any fails to start or to become ready within readyTimeout, the ones
// already started are stopped and the error names the process.
func Start(ctx context.Context, specs []Spec, readyTimeout time.Duration) (*Group, error) {
	g := &Group{died: make(chan error, 1)}
	for _, s := range specs {
		if err := g.start(s); err != nil {
			_ = g.Stop(5 * time.Second)
			return nil, err
		}
	}
	for _, p := range g.procs {
		if err := g.waitReady(ctx, p, readyTimeout); err != nil {
			_ = g.Stop(5 * time.Second)
			return nil, err
		}
	}
	return g, nil
}

func (g *Group) start(s Spec) error {
	tail := &tailBuffer{max: 4096}
	var out io.Writer = tail
	if s.Log != nil {
		out = io.MultiWriter(tail, s.Log)
	}
	path, args, err := s.command()
	if err != nil {
		return err
	}
	cmd := exec.Command(path, args...)
	cmd.Dir = s.Dir
	cmd.Stdout, cmd.Stderr = out, out
	// The kernel kills the child if this process dies first: no orphans
	// even after a crash or SIGKILL of the launcher.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("launch: start %s (%s): %w", s.Name, path, err)
	}
	p := &proc{spec: s, cmd: cmd, tail: tail, done: make(chan struct{})}
	g.mu.Lock()
	g.procs = append(g.procs, p)
	g.mu.Unlock()
	go g.watch(p)
	return nil
}

// watch waits for a child and reports an exit nobody asked for.
func (g *Group) watch(p *proc) {
	err := p.cmd.Wait()
	g.mu.Lock()
	stopping := g.stop
	p.err, p.died = err, !stopping
	g.mu.Unlock()
	close(p.done)
	if stopping {
		return
	}
	report := fmt.Errorf("%w: %s (pid %d) exited: %v%s", ErrDied, p.spec.Name, p.cmd.Process.Pid, err, p.tail.lastLines(5))
	select {
	case g.died <- report:
	default:
	}
}

func (g *Group) waitReady(ctx context.Context, p *proc, timeout time.Duration) error {
	if p.spec.Ready == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last error
	for {
		select {
		case <-p.done:
			return fmt.Errorf("%w: %s exited before it was ready: %v%s", ErrNotReady, p.spec.Name, p.err, p.tail.lastLines(5))
		default:
		}
		if last = p.spec.Ready(ctx); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: %s after %v: %v%s", ErrNotReady, p.spec.Name, timeout, last, p.tail.lastLines(5))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Add starts one more child and waits until it is ready, for instance to
// restart a process that was killed.
func (g *Group) Add(ctx context.Context, s Spec, readyTimeout time.Duration) error {
	if err := g.start(s); err != nil {
		return err
	}
	g.mu.Lock()
	p := g.procs[len(g.procs)-1]
	g.mu.Unlock()
	return g.waitReady(ctx, p, readyTimeout)
}

// Died delivers the first unexpected exit of a child.
func (g *Group) Died() <-chan error { return g.died }

// Pids returns the process ids of the children.
func (g *Group) Pids() []int {
	g.mu.Lock()
	defer g.mu.Unlock()
	pids := make([]int, len(g.procs))
	for i, p := range g.procs {
		pids[i] = p.cmd.Process.Pid
	}
	return pids
}

// Kill sends SIGKILL to the named child (for fault tests).
func (g *Group) Kill(name string) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, p := range g.procs {
		select {
		case <-p.done:
			continue // an earlier incarnation
		default:
		}
		if p.spec.Name == name {
			return p.cmd.Process.Kill()
		}
	}
	return fmt.Errorf("launch: no process %q", name)
}

// Stop sends SIGTERM to every child in reverse start order, waits up to
// timeout for them to exit, and kills the rest. It returns the exits that
// were not clean.
func (g *Group) Stop(timeout time.Duration) error {
	var errs []error
	g.once.Do(func() {
		g.mu.Lock()
		g.stop = true
		procs := g.procs
		g.mu.Unlock()
		for i := len(procs) - 1; i >= 0; i-- {
			_ = procs[i].cmd.Process.Signal(syscall.SIGTERM)
		}
		deadline := time.After(timeout)
		for _, p := range procs {
			select {
			case <-p.done:
			case <-deadline:
				_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
				<-p.done
				errs = append(errs, fmt.Errorf("launch: %s did not stop within %v and was killed", p.spec.Name, timeout))
				continue
			}
			if p.err != nil && !p.died && !isSignalExit(p.err) {
				errs = append(errs, fmt.Errorf("launch: %s: %v%s", p.spec.Name, p.err, p.tail.lastLines(5)))
			}
		}
	})
	return errors.Join(errs...)
}

// isSignalExit reports an exit caused by the SIGTERM Stop sent.
func isSignalExit(err error) bool {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() && ws.Signal() == syscall.SIGTERM {
			return true
		}
	}
	return false
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, b...)
	if len(t.buf) > t.max {
		t.buf = t.buf[len(t.buf)-t.max:]
	}
	return len(b), nil
}

func (t *tailBuffer) lastLines(n int) string {
	t.mu.Lock()
	defer t.mu.Unlock()
	lines := strings.Split(strings.TrimRight(string(bytes.ToValidUTF8(t.buf, nil)), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return ""
	}
	return "\n    " + strings.Join(lines, "\n    ")
}

// FileExists is a readiness check for a file such as a unix socket.
func FileExists(path string) func(context.Context) error {
	return func(context.Context) error {
		_, err := os.Stat(path)
		return err
	}
}
