package netns

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"syscall"

	vns "github.com/vishvananda/netns"
)

// onThread runs fn on a new goroutine locked to its OS thread and puts
// the thread back into its original namespace afterwards. If that fails
// the goroutine exits still locked, and the runtime discards the thread
// rather than let another goroutine run in the wrong namespace.
func onThread(fn func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := vns.Get()
		if err != nil {
			runtime.UnlockOSThread()
			done <- fmt.Errorf("netns: the thread's namespace: %w", err)
			return
		}
		defer orig.Close()
		ferr := fn()
		if err := vns.Set(orig); err != nil {
			done <- errors.Join(ferr, fmt.Errorf("netns: back to the original namespace: %w", err))
			return // still locked: the thread ends with this goroutine
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

// open returns a handle to a named namespace; the caller closes it.
func open(name string) (vns.NsHandle, error) {
	if err := checkPrefix(name); err != nil {
		return vns.None(), err
	}
	h, err := vns.GetFromName(name)
	if err != nil {
		return vns.None(), fmt.Errorf("netns: open %s: %w", name, err)
	}
	return h, nil
}

// Do runs fn inside the named namespace. Sockets fn opens stay in that
// namespace for their whole life.
func Do(name string, fn func() error) error {
	h, err := open(name)
	if err != nil {
		return err
	}
	defer h.Close()
	return onThread(func() error {
		if err := vns.Set(h); err != nil {
			return fmt.Errorf("netns: enter %s: %w", name, err)
		}
		return fn()
	})
}

// Dial connects from inside the named namespace, as net.Dialer does.
func Dial(ctx context.Context, name, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := Do(name, func() error {
		var err error
		conn, err = (&net.Dialer{}).DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// HTTPClient returns a client whose connections are made inside the
// named namespace: how the lab reads the metrics a switch serves on its
// namespace's loopback. It keeps no idle connection, which would hold
// the namespace alive after its teardown.
func HTTPClient(name string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return Dial(ctx, name, network, addr)
		},
	}}
}

// Exec replaces the calling process with argv run inside the named
// namespace (argv[0] is looked up on PATH); it returns only on failure.
// The process keeps its pid, so whoever started it (and its parent-death
// signal) still owns it.
func Exec(name string, argv []string) error {
	if len(argv) == 0 {
		return errors.New("netns: exec: no command")
	}
	path, err := exec.LookPath(argv[0])
	if err != nil {
		return fmt.Errorf("netns: exec: %w", err)
	}
	h, err := open(name)
	if err != nil {
		return err
	}
	// The namespace is the thread's: stay on this thread until execve
	// makes it the whole process.
	runtime.LockOSThread()
	if err := vns.Set(h); err != nil {
		return fmt.Errorf("netns: enter %s: %w", name, err)
	}
	h.Close()
	return fmt.Errorf("netns: exec %s in %s: %w", path, name, syscall.Exec(path, argv, os.Environ()))
}
