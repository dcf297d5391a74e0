package netns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/forgive-emu/forgive/lab/topo"
	"github.com/forgive-emu/forgive/profiles"
	"github.com/forgive-emu/forgive/topologies"
)

// The test binary doubles as the program Exec starts: with this variable
// set it enters the named namespace and execs readlink there.
const execEnv = "FGV_NETNS_TEST_EXEC"

func TestMain(m *testing.M) {
	if name := os.Getenv(execEnv); name != "" {
		err := Exec(name, []string{"readlink", "/proc/self/ns/net"})
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	code := m.Run()
	// Whatever a failed test left behind goes too.
	if os.Geteuid() == 0 {
		if _, err := Cleanup(ProcessPrefix()); err != nil {
			fmt.Fprintln(os.Stderr, "cleanup:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("network namespaces need root: run the tests as root (CI does) to create namespaces and veths")
	}
}

// starLayout places a 2-host star in namespaces under a fresh run id and
// removes whatever is left of it when the test ends, passed or failed.
func starLayout(t *testing.T) *topo.Plan {
	t.Helper()
	tp, err := topo.OpenTopology(topologies.Files, "star-8")
	if err != nil {
		t.Fatal(err)
	}
	prof, err := topo.OpenProfile(profiles.Files, topo.DefaultProfile)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := topo.Place(tp, prof, topo.PlaceOptions{Ranks: 2, Dir: t.TempDir(), Network: topo.Namespaces,
		RunID: NewRunID(), Host: topo.DefaultHostPolicy()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { assertGone(t, plan.Netns.Prefix) })
	return plan
}

// assertGone removes what is left of a run and fails if anything was.
func assertGone(t *testing.T, prefix string) {
	t.Helper()
	r, err := Cleanup(prefix)
	if err != nil || !r.Empty() {
		t.Errorf("left behind under %s: %+v (%v)", prefix, r, err)
	}
}

// Create makes every namespace with its veths up, addressed, aliased and
// routed as the layout says; a datagram crosses a veth between two
// namespaces; Destroy leaves nothing.
func TestCreateWiresTheLayout(t *testing.T) {
	needRoot(t)
	plan := starLayout(t)
	l := plan.Netns
	f, err := Create(l)
	if err != nil {
		t.Fatal(err)
	}
	got, err := List(l.Prefix)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, ns := range got {
		names = append(names, ns.Name)
	}
	if !slices.Equal(names, sortedCopy(l.Namespaces)) {
		t.Fatalf("namespaces %v, want %v", names, l.Namespaces)
	}
	ends := map[string]Link{}
	for _, ns := range got {
		for _, link := range ns.Links {
			ends[ns.Name+" "+link.Name] = link
		}
	}
	for _, v := range l.Links {
		for _, e := range []topo.VethEnd{v.A, v.B} {
			link, ok := ends[e.Netns+" "+e.Name]
			if !ok || !link.Up || link.Alias != e.Label || link.MTU != l.MTU || !slices.Equal(link.Addrs, []string{e.Addr.String()}) {
				t.Errorf("%s in %s: %+v, want up, alias %q, MTU %d, address %s", e.Name, e.Netns, link, e.Label, l.MTU, e.Addr)
			}
		}
	}
	if links, _ := RootLinks(l.Prefix); len(links) != 0 {
		t.Errorf("veth ends in the caller's namespace: %v", links)
	}

	host := plan.Hosts[0]
	checkDefaultRoute(t, host.Netns, host.SwitchAddr)
	// host1's NIC address to its switch port's, across the veth.
	port := plan.Switches[0].Ports[0]
	msg := sendAcross(t, host.Netns, plan.Switches[0].Netns, host.Listen, port.Local)
	if msg != "hello from "+host.Netns {
		t.Errorf("received %q", msg)
	}

	if err := f.Destroy(); err != nil {
		t.Fatal(err)
	}
	if left, err := Names(l.Prefix); err != nil || len(left) != 0 {
		t.Errorf("after Destroy: namespaces %v (%v)", left, err)
	}
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// checkDefaultRoute: "hosts get a default route via their switch port".
func checkDefaultRoute(t *testing.T, ns, switchAddr string) {
	t.Helper()
	err := withHandle(ns, func(h *netlink.Handle) error {
		routes, err := h.RouteList(nil, unix.AF_INET)
		if err != nil {
			return err
		}
		for _, r := range routes {
			if r.Dst == nil || r.Dst.IP.IsUnspecified() {
				if r.Gw.String()+":4793" == switchAddr {
					return nil
				}
				return fmt.Errorf("default route via %v, want %s", r.Gw, switchAddr)
			}
		}
		return fmt.Errorf("no default route among %v", routes)
	})
	if err != nil {
		t.Errorf("%s: %v", ns, err)
	}
}

// sendAcross sends one UDP datagram from an address in one namespace to
// an address in another and returns what arrived.
func sendAcross(t *testing.T, fromNS, toNS, from, to string) string {
	t.Helper()
	var rx *net.UDPConn
	if err := Do(toNS, func() error {
		var err error
		rx, err = net.ListenUDP("udp4", net.UDPAddrFromAddrPort(mustAddrPort(t, to)))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	err := Do(fromNS, func() error {
		tx, err := net.DialUDP("udp4", net.UDPAddrFromAddrPort(mustAddrPort(t, from)), net.UDPAddrFromAddrPort(mustAddrPort(t, to)))
		if err != nil {
			return err
		}
		defer tx.Close()
		_, err = tx.Write([]byte("hello from " + fromNS))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = rx.SetReadDeadline(time.Now().Add(5 * time.Second))
	buf := make([]byte, 100)
	n, err := rx.Read(buf)
	if err != nil {
		t.Fatalf("nothing crossed the veth: %v", err)
	}
	return string(buf[:n])
}

func mustAddrPort(t *testing.T, s string) netip.AddrPort {
	t.Helper()
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		t.Fatal(err)
	}
	return ap
}

// A crashed run leaves namespaces with a process inside, a veth end in
// the caller's namespace, and a mount point it never mounted. Cleanup of
// its prefix removes all of it and kills the process; other runs'
// namespaces stay.
func TestCleanupRemovesWhatACrashedRunLeft(t *testing.T) {
	needRoot(t)
	prefix := topo.RunPrefix(NewRunID())
	other := topo.RunPrefix(NewRunID())
	t.Cleanup(func() { _, _ = Cleanup(prefix); _, _ = Cleanup(other) })
	for _, name := range []string{prefix + "leaf1", prefix + "host1", other + "host1"} {
		if err := newNamed(name); err != nil {
			t.Fatal(err)
		}
	}
	// A veth with one end still in the caller's namespace: the crash hit
	// between creating a pair and moving it.
	ns, err := open(prefix + "leaf1")
	if err != nil {
		t.Fatal(err)
	}
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: prefix + "0a"}, PeerName: prefix + "0b", PeerNamespace: netlink.NsFd(ns)}
	err = netlink.LinkAdd(veth)
	ns.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(Dir, prefix+"spine1"), nil, 0o444); err != nil {
		t.Fatal(err)
	}
	// A daemon of the crashed run, still running in host1's namespace.
	sleeper := exec.Command("sleep", "60")
	if err := Do(prefix+"host1", sleeper.Start); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- sleeper.Wait() }()
	if pids, err := Pids(prefix + "host1"); err != nil || !slices.Equal(pids, []int{sleeper.Process.Pid}) {
		t.Fatalf("processes in host1: %v (%v), want [%d]", pids, err, sleeper.Process.Pid)
	}

	r, err := Cleanup(prefix)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{prefix + "host1", prefix + "leaf1", prefix + "spine1"}; !slices.Equal(r.Namespaces, want) {
		t.Errorf("removed namespaces %v, want %v", r.Namespaces, want)
	}
	if !slices.Equal(r.Links, []string{prefix + "0a"}) || !slices.Equal(r.Pids, []int{sleeper.Process.Pid}) {
		t.Errorf("removed links %v pids %v", r.Links, r.Pids)
	}
	select {
	case err := <-waited:
		if !strings.Contains(fmt.Sprint(err), "killed") {
			t.Errorf("the leftover process ended with %v, want killed", err)
		}
	case <-time.After(2 * time.Minute): // a hang guard: the kill is already sent
		t.Fatal("the leftover process still runs")
	}
	if left, _ := Names(prefix); len(left) != 0 {
		t.Errorf("namespaces left: %v", left)
	}
	if left, _ := RootLinks(prefix); len(left) != 0 {
		t.Errorf("links left: %v", left)
	}
	if left, _ := Names(other); !slices.Equal(left, []string{other + "host1"}) {
		t.Errorf("another run's namespaces: %v, want untouched", left)
	}
}

// Create clears a reused run id's leftovers before it builds.
func TestCreateClearsItsPrefixFirst(t *testing.T) {
	needRoot(t)
	plan := starLayout(t)
	if err := newNamed(plan.Netns.Prefix + "stale"); err != nil {
		t.Fatal(err)
	}
	f, err := Create(plan.Netns)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Destroy()
	names, _ := Names(plan.Netns.Prefix)
	if slices.Contains(names, plan.Netns.Prefix+"stale") || len(names) != len(plan.Netns.Namespaces) {
		t.Errorf("namespaces %v", names)
	}
}

// A layout the kernel refuses leaves nothing behind.
func TestCreateFailureLeavesNothing(t *testing.T) {
	needRoot(t)
	plan := starLayout(t)
	bad := *plan.Netns
	bad.Links = slices.Clone(bad.Links)
	bad.Links[1].A.Name = bad.Links[0].A.Name // a name taken twice in one namespace
	if _, err := Create(&bad); err == nil {
		t.Fatal("Create accepted two interfaces of one name in one namespace")
	}
	if left, _ := Names(bad.Prefix); len(left) != 0 {
		t.Errorf("namespaces left after a failed Create: %v", left)
	}
}

// Exec replaces the process with the command, inside the namespace.
func TestExecRunsInsideTheNamespace(t *testing.T) {
	needRoot(t)
	plan := starLayout(t)
	f, err := Create(plan.Netns)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Destroy()
	name := plan.Hosts[0].Netns
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(Dir, name), &st); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), execEnv+"="+name)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if want := "net:[" + strconv.FormatUint(st.Ino, 10) + "]"; strings.TrimSpace(string(out)) != want {
		t.Errorf("the command ran in %s, want %s", out, want)
	}
}

// HTTPClient reaches a server on a namespace's own loopback, which the
// caller's loopback does not see.
func TestHTTPClientDialsInsideTheNamespace(t *testing.T) {
	needRoot(t)
	plan := starLayout(t)
	f, err := Create(plan.Netns)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Destroy()
	name := plan.Switches[0].Netns
	var ln net.Listener
	if err := Do(name, func() error {
		var err error
		ln, err = net.Listen("tcp4", "127.0.0.1:0")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "inside") })}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/"
	resp, err := HTTPClient(name).Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "inside" {
		t.Errorf("body %q", body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req); err == nil {
		resp.Body.Close()
		t.Error("the caller's loopback reached a server inside the namespace")
	}
}

// SetLinkUp cuts and restores a cable by its label.
func TestSetLinkUpByLabel(t *testing.T) {
	needRoot(t)
	plan := starLayout(t)
	f, err := Create(plan.Netns)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Destroy()
	state := func() bool {
		got, err := List(plan.Hosts[0].Netns)
		if err != nil || len(got) != 1 || len(got[0].Links) != 1 {
			t.Fatalf("%+v %v", got, err)
		}
		return got[0].Links[0].Up
	}
	if err := f.SetLinkUp("host1", false); err != nil || state() {
		t.Fatalf("down: %v, up %v", err, state())
	}
	if err := f.SetLinkUp("host1", true); err != nil || !state() {
		t.Fatalf("up: %v, up %v", err, state())
	}
	if err := f.SetLinkUp("host9", false); err == nil {
		t.Error("an unknown label was accepted")
	}
}

// The names every run gets: "fgv-" + pid in base 36 + a counter, unique
// in a process, within ProcessPrefix, and short enough for a veth.
func TestRunIDs(t *testing.T) {
	a, b := NewRunID(), NewRunID()
	if a == b || len(a) != topo.MaxRunIDLen || !strings.HasPrefix(topo.RunPrefix(a), ProcessPrefix()) {
		t.Errorf("ids %q %q, process prefix %q", a, b, ProcessPrefix())
	}
	d := DerivedRunID("leaf-spine-2x4")
	if d != DerivedRunID("leaf-spine-2x4") || d == DerivedRunID("star-8") || len(d) != topo.MaxRunIDLen || d[0] != 't' {
		t.Errorf("derived id %q", d)
	}
	if RunOf("fgv-abc123-leaf1") != "fgv-abc123-" || RunOf("eth0") != "" || RunOf("fgv-x") != "" {
		t.Error("RunOf")
	}
}

// Nothing outside the fabric's names is touched.
func TestRefusesNamesOutsideThePrefix(t *testing.T) {
	if _, err := Cleanup("docker"); !errors.Is(err, ErrPrefix) {
		t.Errorf("Cleanup(docker) = %v", err)
	}
	if err := Do("default", func() error { return nil }); !errors.Is(err, ErrPrefix) {
		t.Errorf("Do(default) = %v", err)
	}
	if _, err := Create(&topo.NetnsLayout{Prefix: topo.NamePrefix}); err == nil {
		t.Error("Create with the bare prefix was accepted")
	}
}

// The namespaces of a process that died without its teardown go with
// CleanupStale; a live process's stay.
func TestCleanupStaleRemovesDeadProcessesRuns(t *testing.T) {
	needRoot(t)
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	pid := strconv.FormatInt(int64(dead.Process.Pid), 36)
	deadRun := topo.RunPrefix(strings.Repeat("0", pidWidth-len(pid)) + pid + "0")
	liveRun := topo.RunPrefix(NewRunID())
	t.Cleanup(func() { _, _ = Cleanup(deadRun); _, _ = Cleanup(liveRun) })
	for _, name := range []string{deadRun + "leaf1", liveRun + "leaf1"} {
		if err := newNamed(name); err != nil {
			t.Fatal(err)
		}
	}
	r, err := CleanupStale()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(r.Namespaces, deadRun+"leaf1") || slices.Contains(r.Namespaces, liveRun+"leaf1") {
		t.Errorf("removed %v: want %sleaf1 and not %sleaf1", r.Namespaces, deadRun, liveRun)
	}
	if left, _ := Names(liveRun); len(left) != 1 {
		t.Errorf("the live run's namespaces: %v", left)
	}
}
