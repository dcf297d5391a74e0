package netns

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/forgive-emu/forgive/lab/topo"
)

// Removed is what a cleanup found and removed.
type Removed struct {
	Namespaces []string
	Links      []string // veths in the caller's namespace (a run interrupted mid-way)
	Pids       []int    // processes killed
}

// Empty reports whether there was nothing to remove.
func (r Removed) Empty() bool { return len(r.Namespaces)+len(r.Links)+len(r.Pids) == 0 }

// killWait bounds the wait for killed processes to leave a namespace.
const killWait = 5 * time.Second

// Cleanup removes every namespace and veth whose name starts with prefix,
// which must start with "fgv-" ("fgv-" alone removes every run's): it
// kills the processes inside each namespace, deletes its veths, and
// unmounts it. Matching veths left in the caller's namespace go too. It goes on past errors and returns them all.
func Cleanup(prefix string) (Removed, error) {
	var r Removed
	if err := checkPrefix(prefix); err != nil {
		return r, err
	}
	names, err := Names(prefix)
	if err != nil {
		return r, err
	}
	var errs []error
	for _, name := range names {
		pids, err := killIn(name)
		r.Pids = append(r.Pids, pids...)
		errs = append(errs, err)
	}
	// Root links first: deleting a namespace's end takes its peer along.
	links, err := deleteRootLinks(prefix)
	r.Links = links
	errs = append(errs, err)
	for _, name := range names {
		if err := deleteLinksIn(name, prefix); err != nil {
			errs = append(errs, err)
		}
		if err := deleteNamed(name); err != nil {
			errs = append(errs, err)
			continue
		}
		r.Namespaces = append(r.Namespaces, name)
	}
	return r, errors.Join(errs...)
}

// Names lists the namespaces under Dir whose names start with prefix.
func Names(prefix string) ([]string, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	var names []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), prefix) {
			names = append(names, e.Name())
		}
	}
	return names, nil
}

// deleteNamed unmounts and removes a namespace's mount point. A point
// that was never mounted (a crash between the two steps of a creation)
// is just removed.
func deleteNamed(name string) error {
	path := filepath.Join(Dir, name)
	if err := unix.Unmount(path, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
		return fmt.Errorf("netns: unmount %s: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("netns: %w", err)
	}
	return nil
}

// deleteLinksIn deletes the veths of the run inside a namespace. Deleting
// one end deletes its peer, wherever that is, so a missing end is fine.
func deleteLinksIn(name, prefix string) error {
	if !mounted(name) {
		return nil
	}
	return withHandle(name, func(h *netlink.Handle) error {
		links, err := h.LinkList()
		if err != nil {
			return fmt.Errorf("netns: links of %s: %w", name, err)
		}
		var errs []error
		for _, l := range links {
			if !strings.HasPrefix(l.Attrs().Name, prefix) {
				continue
			}
			var nf netlink.LinkNotFoundError
			if err := h.LinkDel(l); err != nil && !errors.As(err, &nf) && !errors.Is(err, unix.ENODEV) {
				errs = append(errs, fmt.Errorf("netns: delete %s in %s: %w", l.Attrs().Name, name, err))
			}
		}
		return errors.Join(errs...)
	})
}

// deleteRootLinks deletes the caller's own links that match prefix.
func deleteRootLinks(prefix string) ([]string, error) {
	names, err := RootLinks(prefix)
	if err != nil {
		return nil, err
	}
	var gone []string
	var errs []error
	for _, n := range names {
		l, err := netlink.LinkByName(n)
		if err == nil {
			err = netlink.LinkDel(l)
		}
		var nf netlink.LinkNotFoundError
		if err != nil && !errors.As(err, &nf) && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, fmt.Errorf("netns: delete %s: %w", n, err))
			continue
		}
		gone = append(gone, n)
	}
	return gone, errors.Join(errs...)
}

// RootLinks lists the links of the caller's namespace whose names start
// with prefix.
func RootLinks(prefix string) ([]string, error) {
	if err := checkPrefix(prefix); err != nil {
		return nil, err
	}
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("netns: links: %w", err)
	}
	var names []string
	for _, l := range links {
		if strings.HasPrefix(l.Attrs().Name, prefix) {
			names = append(names, l.Attrs().Name)
		}
	}
	return names, nil
}

// mounted reports whether Dir/name holds a namespace (and not the empty
// file of a creation that crashed before its mount).
func mounted(name string) bool {
	var st unix.Statfs_t
	return unix.Statfs(filepath.Join(Dir, name), &st) == nil && st.Type == unix.NSFS_MAGIC
}

// Pids lists the processes whose network namespace is the named one.
func Pids(name string) ([]int, error) {
	if !mounted(name) {
		return nil, nil
	}
	var st unix.Stat_t
	if err := unix.Stat(filepath.Join(Dir, name), &st); err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	want := "net:[" + strconv.FormatUint(st.Ino, 10) + "]"
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("netns: %w", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		// A process that exits meanwhile, or a zombie, has no link.
		if link, err := os.Readlink("/proc/" + e.Name() + "/ns/net"); err == nil && link == want {
			pids = append(pids, pid)
		}
	}
	sort.Ints(pids)
	return pids, nil
}

// killIn sends SIGKILL to every process in the namespace and waits, up
// to killWait, until none is left.
func killIn(name string) ([]int, error) {
	pids, err := Pids(name)
	if err != nil || len(pids) == 0 {
		return nil, err
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(killWait)
	for time.Now().Before(deadline) {
		left, err := Pids(name)
		if err != nil || len(left) == 0 {
			return pids, err
		}
		time.Sleep(10 * time.Millisecond)
	}
	left, _ := Pids(name)
	return pids, fmt.Errorf("netns: processes %v still in %s %v after SIGKILL", left, name, killWait)
}

// CleanupStale removes the runs whose creating process is gone: a run id
// made by NewRunID names its process, and a process that died without
// its teardown (SIGKILL, a crash) left its namespaces behind. Runs of
// live processes and ids an operator chose are left alone.
func CleanupStale() (Removed, error) {
	var all Removed
	names, err := Names(topo.NamePrefix)
	if err != nil {
		return all, err
	}
	seen := map[string]bool{}
	var errs []error
	for _, name := range names {
		run := RunOf(name)
		if run == "" || seen[run] {
			continue
		}
		seen[run] = true
		if pid, ok := ownerPid(run); !ok || pid == os.Getpid() || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		r, err := Cleanup(run)
		all.Namespaces = append(all.Namespaces, r.Namespaces...)
		all.Links = append(all.Links, r.Links...)
		all.Pids = append(all.Pids, r.Pids...)
		errs = append(errs, err)
	}
	return all, errors.Join(errs...)
}

// ownerPid reads the pid out of a run prefix that NewRunID made.
func ownerPid(run string) (int, bool) {
	id := strings.TrimSuffix(strings.TrimPrefix(run, topo.NamePrefix), "-")
	if len(id) != pidWidth+1 || id[0] < '0' || id[0] > '9' {
		return 0, false
	}
	pid, err := strconv.ParseInt(id[:pidWidth], 36, 64)
	return int(pid), err == nil && pid > 0
}

// CheckNoneLeft removes whatever this process's fabrics left behind and
// reports it as an error: a test binary calls it after its tests, so a
// namespace test that failed midway fails the run instead of leaking. It
// does nothing without root, where no fabric could have been made.
func CheckNoneLeft() error {
	if os.Geteuid() != 0 {
		return nil
	}
	r, err := Cleanup(ProcessPrefix())
	if err != nil {
		return fmt.Errorf("netns: cleaning up: %w", err)
	}
	if !r.Empty() {
		return fmt.Errorf("netns: left behind and now removed: %+v", r)
	}
	return nil
}
