package forgivedrv

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/tss"
)

// backToBack is two sealing daemons cabled to each other, each the other's
// "switch" (a host takes datagrams only from its switch address), with
// real UDP sockets on loopback, as forgived runs them.
type backToBack struct {
	t    *testing.T
	dir  string
	net  string
	key  string
	stop [3]func() // by host
	c    [3]*hostapi.Client
}

func newBackToBack(t *testing.T) *backToBack {
	t.Helper()
	k := &backToBack{t: t, dir: t.TempDir(), net: fmt.Sprintf("127.%d.253.", 100+os.Getpid()%100),
		key: writeKey(t, tss.FormatKeyFile(testKey), 0o600)}
	k.start(1)
	k.start(2)
	return k
}

// start runs host h's daemon (again, after stop), with the start file
// next to its socket, and connects a client.
func (k *backToBack) start(h int) {
	t := k.t
	t.Helper()
	sock := filepath.Join(k.dir, fmt.Sprintf("h%d.sock", h))
	cfg, err := ParseConfig([]byte(fmt.Sprintf(`host: %d
listen: %s%d:4793
switch: %s%d:4793
socket: %s
line_rate: 100Mbps
fail_after: 5s
security: {domains: [{id: 7, key_file: %s}]}
`, h, k.net, h, k.net, 3-h, sock, k.key)))
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(cfg, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	c, err := hostapi.Dial(sock)
	if err != nil {
		cancel()
		<-ran
		t.Fatal(err)
	}
	k.c[h] = c
	k.stop[h] = func() {
		c.Close()
		cancel()
		if err := <-ran; err != nil {
			t.Errorf("host %d: %v", h, err)
		}
	}
	t.Cleanup(func() {
		if k.stop[h] != nil {
			k.stop[h]()
			k.stop[h] = nil
		}
	})
}

func (k *backToBack) restart(h int) {
	k.stop[h]()
	k.stop[h] = nil
	k.start(h)
}

// message moves one 64 KiB message from host 1 to host 2 on flow id,
// creating the flow at both ends, and reports whether both completed
// byte-exact before the flows' fail_after.
func (k *backToBack) message(id hostapi.FlowID) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c1, c2 := k.c[1], k.c[2]
	for _, e := range []struct {
		c    *hostapi.Client
		peer hostapi.HostID
	}{{c1, 2}, {c2, 1}} {
		if err := e.c.CreateFlow(ctx, hostapi.FlowSpec{Flow: id, Peer: e.peer, Class: hostapi.ClassTensor}); err != nil {
			return err
		}
	}
	src, err := c1.RegisterMemory(ctx, 64<<10)
	if err != nil {
		return err
	}
	dst, err := c2.RegisterMemory(ctx, 64<<10)
	if err != nil {
		return err
	}
	for i := range src.Bytes() {
		src.Bytes()[i] = byte(i*7 + int(id))
	}
	if err := c2.PostRecv(ctx, hostapi.RecvReq{Flow: id, Region: dst.ID(), Length: 64 << 10, WRID: 1}); err != nil {
		return err
	}
	if err := c1.PostSend(ctx, hostapi.SendReq{Flow: id, Region: src.ID(), Length: 64 << 10, WRID: 2}); err != nil {
		return err
	}
	for _, c := range []*hostapi.Client{c1, c2} {
		comp, err := c.Poll(ctx)
		if err != nil {
			return err
		}
		if comp.Status != hostapi.StatusOK {
			return fmt.Errorf("completion %+v", comp)
		}
	}
	if !bytes.Equal(src.Bytes(), dst.Bytes()) {
		return fmt.Errorf("flow %d: the received bytes differ from the sent", id)
	}
	return nil
}

func (k *backToBack) host(h int) map[string]uint64 {
	k.t.Helper()
	ct, err := k.c[h].Counters(context.Background())
	if err != nil {
		k.t.Fatal(err)
	}
	return ct.Host.Map()
}

// Attack (issue 39, item 5): "a host whose wall clock stepped back is
// refused as a replay by every peer until they restart (the start epoch
// is wall-clock nanoseconds)". Two sealing daemons move a message; host 1
// restarts with its wall clock reading 2 s before its first start, and
// moves another. Host 2
// takes host 1's new start (a second sender start, nothing refused as a
// replay), since the new epoch is one past the last start's, which host 1
// kept in its start file. Then host 1 restarts once more with the start
// file removed and its clock still behind: host 2 refuses every packet of
// that start as a replay, the limit docs/security.md states.
func TestClockSteppedBackStartAccepted(t *testing.T) {
	t.Cleanup(func() { wallClock = time.Now })
	k := newBackToBack(t)
	if err := k.message(1); err != nil {
		t.Fatalf("before the restart: %v", err)
	}
	file := filepath.Join(k.dir, "h1.sock.start")
	first, err := readStart(file)
	if err != nil || first == 0 {
		t.Fatalf("host 1's start file after its first start: %d, %v", first, err)
	}
	// The clock reads 2 s before host 1's first start, however long the
	// test took so far: a step back of 2 s and more.
	behind := time.Unix(0, int64(first)).Add(-2 * time.Second)
	wallClock = func() time.Time { return behind }
	k.restart(1)
	second, err := readStart(file)
	if err != nil || second <= first {
		t.Fatalf("host 1's start epoch %d after a restart 2 s behind (first %d, %v): want a later one", second, first, err)
	}
	if err := k.message(2); err != nil {
		t.Errorf("after host 1 restarted with its clock 2 s behind: %v", err)
	}
	h2 := k.host(2)
	t.Logf("host 1's starts %d, then %d (its clock at %d); host 2: %d sender starts, %d refused as replayed, %d opened",
		first, second, behind.UnixNano(), h2["sender_starts"], h2["refused_replayed"], h2["opened"])
	if h2["sender_starts"] != 2 || h2["refused_replayed"] != 0 {
		t.Errorf("host 2 heard %d sender starts and refused %d packets as replayed; want host 1's 2 starts, none refused",
			h2["sender_starts"], h2["refused_replayed"])
	}

	// Without the start file the clock alone names the start: 2 s before
	// the first start, it is earlier than the start host 2 holds.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	k.restart(1)
	if err := k.message(3); err == nil {
		t.Error("without the start file, host 1's start 2 s behind moved a message; want it refused as a replay")
	}
	h2 = k.host(2)
	if h2["refused_replayed"] == 0 || h2["sender_starts"] != 2 {
		t.Errorf("without the start file, host 2 refused %d packets as replayed, heard %d sender starts; want host 1's third start refused",
			h2["refused_replayed"], h2["sender_starts"])
	}
}

// The start file's checks: a later epoch than both the clock and the
// file's, a file another user could write or a link refused by name, and
// garbage refused rather than taken for a first start.
func TestNextStart(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "h.start")
	now := time.Unix(100, 0)
	e1, err := nextStart(path, now)
	if err != nil || e1 != uint64(now.UnixNano()) {
		t.Fatalf("first start: %d, %v; want the clock's %d", e1, err, now.UnixNano())
	}
	if e2, err := nextStart(path, now.Add(-2*time.Second)); err != nil || e2 != e1+1 {
		t.Fatalf("a start 2 s behind: %d, %v; want %d", e2, err, e1+1)
	}
	if e3, err := nextStart(path, now.Add(time.Second)); err != nil || e3 != uint64(now.Add(time.Second).UnixNano()) {
		t.Fatalf("a start with the clock ahead: %d, %v; want the clock's", e3, err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("start file: %v, %v; want mode 0600", fi, err)
	}
	if err := os.Chmod(path, 0o620); err != nil {
		t.Fatal(err)
	}
	if _, err := nextStart(path, now); err == nil || !strings.Contains(err.Error(), "lets group or others write") {
		t.Errorf("a group-writable start file: %v", err)
	}
	link := filepath.Join(dir, "link.start")
	if err := os.Symlink(path, link); err != nil {
		t.Fatal(err)
	}
	if _, err := nextStart(link, now); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Errorf("a linked start file: %v", err)
	}
	bad := filepath.Join(dir, "bad.start")
	if err := os.WriteFile(bad, []byte("yesterday\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := nextStart(bad, now); err == nil || !strings.Contains(err.Error(), "not a start epoch") {
		t.Errorf("a start file holding garbage: %v", err)
	}
	if err := os.WriteFile(bad, []byte(fmt.Sprintln(^uint64(0))), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := nextStart(bad, now); err == nil || !strings.Contains(err.Error(), "no later start") {
		t.Errorf("a start file at the last epoch: %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 3 {
		t.Errorf("the directory holds %d entries, want the 3 files (no temporary left)", len(ents))
	}
}

// Prepare (forgived --check) refuses a start file start-up would refuse,
// by its field, and writes none.
func TestPrepareChecksTheStartFile(t *testing.T) {
	dir := t.TempDir()
	key := writeKey(t, tss.FormatKeyFile(testKey), 0o600)
	start := filepath.Join(dir, "h.start")
	doc := fmt.Sprintf("host: 1\nlisten: 127.0.0.1:0\nswitch: 127.0.0.1:1\nsocket: %s\nline_rate: 100Mbps\nsecurity: {domains: [{id: 7, key_file: %s}], start_file: %s}\n",
		filepath.Join(dir, "d.sock"), key, start)
	cfg, err := ParseConfig([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(cfg); err != nil {
		t.Fatalf("no start file yet: %v", err)
	}
	if _, err := os.Stat(start); !os.IsNotExist(err) {
		t.Errorf("Prepare wrote the start file: %v", err)
	}
	if err := os.WriteFile(start, []byte("yesterday\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Prepare(cfg); err == nil || !strings.Contains(err.Error(), "security.start_file") || !strings.Contains(err.Error(), "not a start epoch") {
		t.Errorf("a start file holding garbage: %v, want a refusal naming security.start_file", err)
	}
}
