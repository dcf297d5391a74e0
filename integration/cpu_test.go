package integration

import (
	"errors"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestMachineBusyCountsThisProcess checks the benchmarks' CPU meter
// against the kernel's account of this process: while the test burns CPU
// for a while, the machine's busy time grows by about at least what the
// process used, whatever else runs (other processes only add to it), and
// all the time counted is about every core's for the test's wall time.
func TestMachineBusyCountsThisProcess(t *testing.T) {
	own := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	outer0 := time.Now()
	m0, err := machineCPU()
	if err != nil {
		t.Fatal(err)
	}
	o0, inner0 := own(), time.Now()
	x := uint64(1)
	for own()-o0 < 300*time.Millisecond {
		for range 100000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	used, inner := own()-o0, time.Since(inner0)
	m1, err := machineCPU()
	if err != nil {
		t.Fatal(err)
	}
	outer := time.Since(outer0)
	// The kernel's counts lag by a few ticks (a core idle without ticks
	// is counted when it wakes), so the bounds are a factor of two: what
	// they catch is a wrong field or unit, a factor of ten or more;
	// TestParseCPULineSortsTheFields places each field exactly.
	d := m1.minus(m0)
	if d.busy < used/2 {
		t.Fatalf("the machine's busy time grew %v while this process used %v (x %d)", d.busy, used, x)
	}
	// All the time counted is every core's between the two reads: no more
	// than the span around them, no less than the span between them. The
	// cores are those /proc/stat counts (its cpuN lines), not those this
	// process may run on: under an affinity mask (taskset -c 0) Go's
	// NumCPU is the mask's, while the first line sums every core.
	n, err := statCores()
	if err != nil {
		t.Fatal(err)
	}
	cores := time.Duration(n)
	if d.busy+d.steal > d.all || d.all > 2*outer*cores || d.all < inner*cores/2 {
		t.Fatalf("between %v and %v on %d cores the machine counted %v busy, %v stolen, %v in all", inner, outer, cores, d.busy, d.steal, d.all)
	}
}

// The fields of /proc/stat's line fall where proc(5) puts them: busy is
// user, nice, system, irq and softirq; idle and iowait are neither busy nor
// stolen; guest time (the last two fields) is already inside user and nice.
func TestParseCPULineSortsTheFields(t *testing.T) {
	tick := time.Second / 100
	c, err := parseCPULine("cpu  100 1 50 1000 5 2 10 20 7 0")
	if err != nil {
		t.Fatal(err)
	}
	if want := (cpuTimes{busy: 163 * tick, steal: 20 * tick, all: 1188 * tick}); c != want {
		t.Fatalf("%+v, want %+v", c, want)
	}
	for _, bad := range []string{"", "cpu0 1 2 3 4 5 6 7 8", "cpu 1 2 3", "cpu 1 2 x 4 5 6 7 8"} {
		if _, err := parseCPULine(bad); err == nil {
			t.Errorf("%q read without an error", bad)
		}
	}
}

// statCores counts /proc/stat's per-core lines (cpu0, cpu1, ...): the
// cores whose time its first line sums.
func statCores() (int, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range strings.Split(string(b), "\n") {
		if len(l) > 3 && strings.HasPrefix(l, "cpu") && l[3] >= '0' && l[3] <= '9' {
			n++
		}
	}
	if n == 0 {
		return 0, errors.New("/proc/stat lists no core (no cpuN line)")
	}
	return n, nil
}
