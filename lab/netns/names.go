package netns

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/forgive-emu/forgive/lab/topo"
)

// Sentinel errors.
var (
	// ErrPrefix: a name or prefix outside topo.NamePrefix, which this
	// package refuses to touch.
	ErrPrefix = errors.New("netns: not a fabric name")
	// ErrNeedRoot: creating namespaces takes CAP_SYS_ADMIN and
	// CAP_NET_ADMIN.
	ErrNeedRoot = errors.New("netns: network namespaces need root")
)

// NeedRoot returns ErrNeedRoot, explained, unless the process runs as
// root.
func NeedRoot() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("%w: run as root (CI does), or use the loopback placement", ErrNeedRoot)
	}
	return nil
}

// pidWidth is the base-36 width of any Linux pid (at most 2^22).
const pidWidth = 5

var runCount atomic.Uint32

// NewRunID returns an id for a run of this process: its pid in five
// base-36 digits and a one-digit counter, so runs of concurrent processes
// never collide, ProcessPrefix finds every run of this process, and a
// veth name stays within 15 bytes. The counter wraps after 36 runs; runs
// of one process follow each other, and Create clears a reused id first.
func NewRunID() string {
	n := runCount.Add(1) - 1
	return pidID() + strconv.FormatUint(uint64(n%36), 36)
}

// ProcessPrefix is the name prefix of every run this process creates.
func ProcessPrefix() string { return topo.NamePrefix + pidID() }

func pidID() string {
	id := strconv.FormatInt(int64(os.Getpid()), 36)
	return strings.Repeat("0", max(0, pidWidth-len(id))) + id
}

// DerivedRunID is a stable id for a fabric an operator names, so that
// `forgivectl topo down FILE` finds what `topo up FILE` made: "t" and five
// base-36 digits of a hash of the name. A pid-based id starts with a
// digit, so the two kinds never meet.
func DerivedRunID(name string) string {
	h := fnv.New32a()
	h.Write([]byte(name))
	id := strconv.FormatUint(uint64(h.Sum32()%(36*36*36*36*36)), 36)
	return "t" + strings.Repeat("0", pidWidth-len(id)) + id
}

// checkPrefix accepts topo.NamePrefix and anything longer that starts
// with it.
func checkPrefix(prefix string) error {
	if !strings.HasPrefix(prefix, topo.NamePrefix) {
		return fmt.Errorf("%w: %q does not start with %q", ErrPrefix, prefix, topo.NamePrefix)
	}
	return nil
}
