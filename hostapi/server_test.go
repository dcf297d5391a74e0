package hostapi_test

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/forgive-emu/forgive/hostapi"
)

// TestSocketFileMode: the socket is created for owner and group only.
func TestSocketFileMode(t *testing.T) {
	h := newHarness(t, hostapi.ServerConfig{})
	fi, err := os.Stat(h.path)
	must(t, err)
	if fi.Mode().Type() != fs.ModeSocket || fi.Mode().Perm() != hostapi.SocketMode {
		t.Errorf("socket file mode %v, want socket with %o", fi.Mode(), hostapi.SocketMode)
	}
}

// TestDisallowedUIDIsRefused: the server checks SO_PEERCRED against the
// allowed ids. The test cannot change its uid, so it configures lists
// that exclude it and takes another uid for the daemon's; root and the
// daemon's uid are always admitted, so as root the client is admitted
// (forgivedrv's TestNonRootClientThroughSocketGroup refuses a uid-65534
// client from a child process).
func TestDisallowedUIDIsRefused(t *testing.T) {
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	h := newHarness(t, hostapi.ServerConfig{AllowedUIDs: []uint32{uid + 1}, AllowedGIDs: []uint32{gid + 1}})
	h.srv.SetDaemonUIDForTest(uid + 2)
	c, err := hostapi.Dial(h.path)
	if uid == 0 {
		if err != nil {
			t.Fatalf("root, not in allowed_uids: %v, want admitted", err)
		}
		c.Close()
		return
	}
	if !errors.Is(err, hostapi.ErrPermissionDenied) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("Dial with uid %d not allowed: %v, want permission_denied", uid, err)
	}
	if st := h.srv.Stats(); st.Clients != 0 {
		t.Errorf("refused client holds a session: %+v", st)
	}
	if got := h.be.callsOf(1); got != 0 || h.be.isGone(1) {
		t.Errorf("backend heard of a refused client: %d calls", got)
	}
}

// TestDaemonUIDAlwaysAdmitted: lists that name neither the client's uid
// nor its gid still admit the daemon's own uid.
func TestDaemonUIDAlwaysAdmitted(t *testing.T) {
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	h := newHarness(t, hostapi.ServerConfig{AllowedUIDs: []uint32{uid + 1}, AllowedGIDs: []uint32{gid + 1}})
	c := h.dial()
	if _, err := c.Status(context.Background()); err != nil {
		t.Errorf("the daemon's uid %d, not in the lists: %v, want admitted", uid, err)
	}
}

// TestAllowedByGroup: a listed primary gid admits a peer whose uid is not
// listed (nor the daemon's, nor root, which are always admitted: the test
// checks the group only when not root).
func TestAllowedByGroup(t *testing.T) {
	uid, gid := uint32(os.Getuid()), uint32(os.Getgid())
	h := newHarness(t, hostapi.ServerConfig{AllowedUIDs: []uint32{uid + 1}, AllowedGIDs: []uint32{gid}})
	h.srv.SetDaemonUIDForTest(uid + 2)
	c := h.dial()
	if _, err := c.Status(context.Background()); err != nil {
		t.Errorf("client admitted by gid cannot call: %v", err)
	}
}

// TestStaleSocketIsReplaced: a socket file left by a crashed daemon (no
// listener behind it) is removed and recreated.
func TestStaleSocketIsReplaced(t *testing.T) {
	path := socketPath(t)
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_SEQPACKET, 0)
	must(t, err)
	must(t, unix.Bind(fd, &unix.SockaddrUnix{Name: path}))
	must(t, unix.Close(fd)) // the file stays; nothing listens
	if fi, err := os.Stat(path); err != nil || fi.Mode().Type() != fs.ModeSocket {
		t.Fatalf("stale socket not in place: %v", err)
	}

	srv, err := hostapi.Listen(path, hostapi.ServerConfig{}, newCoreBackend(t, hostapi.Limits{}), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("Listen over a stale socket: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx) }()
	c, err := hostapi.Dial(path)
	if err != nil {
		t.Fatalf("Dial the recreated socket: %v", err)
	}
	c.Close()
	cancel()
	must(t, <-served)
}

// TestLiveDaemonIsDetected: a second daemon on the same path fails with a
// clear error and leaves the first one serving.
func TestLiveDaemonIsDetected(t *testing.T) {
	h := newHarness(t, hostapi.ServerConfig{})
	srv, err := hostapi.Listen(h.path, hostapi.ServerConfig{}, newCoreBackend(t, hostapi.Limits{}), slog.New(slog.DiscardHandler))
	if !errors.Is(err, hostapi.ErrDaemonRunning) {
		if srv != nil {
			srv.Close()
		}
		t.Fatalf("second Listen: %v, want ErrDaemonRunning", err)
	}
	c := h.dial()
	if _, err := c.Status(context.Background()); err != nil {
		t.Errorf("first daemon stopped serving: %v", err)
	}
}

// TestNonSocketPathIsLeftAlone: Listen never removes a file that is not a
// socket.
func TestNonSocketPathIsLeftAlone(t *testing.T) {
	path := socketPath(t)
	must(t, os.WriteFile(path, []byte("not a socket"), 0o600))
	if srv, err := hostapi.Listen(path, hostapi.ServerConfig{}, newCoreBackend(t, hostapi.Limits{}), slog.New(slog.DiscardHandler)); !errors.Is(err, hostapi.ErrNotSocket) {
		if srv != nil {
			srv.Close()
		}
		t.Fatalf("Listen on a regular file: %v, want ErrNotSocket", err)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "not a socket" {
		t.Errorf("file changed: %q, %v", b, err)
	}
}

// TestShutdownReleasesClientsAndRemovesSocket: Close disconnects clients
// (the backend told of each) and removes the socket file; a client's next
// call fails with ErrConnLost.
func TestShutdownReleasesClientsAndRemovesSocket(t *testing.T) {
	path := socketPath(t)
	be := newCoreBackend(t, hostapi.Limits{})
	srv, err := hostapi.Listen(path, hostapi.ServerConfig{}, be, slog.New(slog.DiscardHandler))
	must(t, err)
	be.serve(srv)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background()) }()

	c, err := hostapi.Dial(path)
	must(t, err)
	defer c.Close()
	r, err := c.RegisterMemory(context.Background(), 4096)
	must(t, err)

	must(t, srv.Close())
	must(t, <-served)
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("socket file after Close: %v", err)
	}
	if !be.isGone(c.Info().Client) {
		t.Errorf("backend not told the client is gone")
	}
	if _, err := c.Status(context.Background()); !errors.Is(err, hostapi.ErrConnLost) {
		t.Errorf("call after shutdown: %v, want ErrConnLost", err)
	}
	if _, err := c.Poll(context.Background()); !errors.Is(err, hostapi.ErrConnLost) {
		t.Errorf("Poll after shutdown: %v, want ErrConnLost", err)
	}
	r.Bytes()[0] = 1 // the client's own mapping outlives the daemon's
	must(t, c.Close())
	if err := c.PostSend(context.Background(), hostapi.SendReq{}); !errors.Is(err, hostapi.ErrClosed) {
		t.Errorf("call after Close: %v", err)
	}
}

// TestCallHonoursContext: a call whose context ends returns at once.
func TestCallHonoursContext(t *testing.T) {
	h := newHarness(t, hostapi.ServerConfig{})
	c := h.dial()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := c.Poll(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Poll with a cancelled context: %v", err)
	}
	if _, ok := c.TryPoll(); ok {
		t.Errorf("TryPoll found a completion nobody made")
	}
	if err := c.CreateFlow(ctx, hostapi.FlowSpec{Flow: 1, Class: hostapi.ClassOther}); !errors.Is(err, context.Canceled) {
		t.Errorf("CreateFlow with a cancelled context: %v", err)
	}
	if calls := h.be.callsOf(c.Info().Client); calls != 0 {
		t.Errorf("a call whose context had ended was sent: %d calls", calls)
	}
}

// TestDisconnect: the daemon can drop a client; the client learns it at
// its next call and the backend releases it.
func TestDisconnect(t *testing.T) {
	h := newHarness(t, hostapi.ServerConfig{})
	c := h.dial()
	id := c.Info().Client
	released := h.srv.ReleasedForTest(id)
	if !h.srv.Disconnect(id, "operator request") {
		t.Fatalf("Disconnect(%d) found no client", id)
	}
	<-released
	if !h.be.isGone(id) {
		t.Errorf("backend not told the client is gone")
	}
	if _, err := c.Status(context.Background()); !errors.Is(err, hostapi.ErrConnLost) {
		t.Errorf("call after Disconnect: %v, want ErrConnLost", err)
	}
	if h.srv.Disconnect(id, "again") {
		t.Errorf("Disconnect of a gone client reported success")
	}
}

// TestBadCompletionIsRefused: a completion the client could not decode is
// returned to the backend as an error, and the client stays connected.
func TestBadCompletionIsRefused(t *testing.T) {
	h := newHarness(t, hostapi.ServerConfig{})
	c := h.dial()
	id := c.Info().Client
	for _, comp := range []hostapi.Completion{
		{WRID: 1, Status: hostapi.StatusOK},
		{WRID: 2, Kind: hostapi.KindRecv},
		{WRID: 3, Kind: 9, Status: hostapi.StatusOK},
	} {
		if err := h.srv.Complete(id, comp); !errors.Is(err, hostapi.ErrBadCompletion) {
			t.Errorf("Complete(%+v) = %v, want ErrBadCompletion", comp, err)
		}
	}
	must(t, h.srv.Complete(id, hostapi.Completion{WRID: 4, Kind: hostapi.KindSend, Status: hostapi.StatusError, Err: "link down"}))
	if comp := poll(t, c); comp.WRID != 4 || comp.Err != "link down" {
		t.Errorf("completion %+v, want wr 4 with its error", comp)
	}
}
