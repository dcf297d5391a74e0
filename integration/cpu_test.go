package integration

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// TestMachineBusyCountsThisProcess checks the benchmarks' CPU meter
// against the kernel's account of this process: while the test burns CPU
// for a while, the machine's busy time grows by at least what the process
// used, whatever else runs (other processes only add to it).
func TestMachineBusyCountsThisProcess(t *testing.T) {
	own := func() time.Duration {
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
			t.Fatal(err)
		}
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	m0, err := machineBusy()
	if err != nil {
		t.Fatal(err)
	}
	o0, w0 := own(), time.Now()
	x := uint64(1)
	for own()-o0 < 300*time.Millisecond {
		for range 100000 {
			x = x*6364136223846793005 + 1442695040888963407
		}
	}
	used := own() - o0
	m1, err := machineBusy()
	if err != nil {
		t.Fatal(err)
	}
	wall := time.Since(w0)
	// Ticks are sampled: allow two of them (20 ms) on each core.
	slack := time.Duration(2*runtime.NumCPU()) * 10 * time.Millisecond
	if got := m1 - m0; got < used-slack {
		t.Fatalf("the machine's busy time grew %v while this process used %v (x %d)", got, used, x)
	}
	// And no more than every core for the whole time.
	if got, most := m1-m0, wall*time.Duration(runtime.NumCPU()); got > most+slack {
		t.Fatalf("the machine's busy time grew %v in %v on %d cores", got, wall, runtime.NumCPU())
	}
}
