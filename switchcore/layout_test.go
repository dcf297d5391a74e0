package switchcore

import (
	"testing"
	"unsafe"
)

// TestHotLayout holds the sizes the per-hop cost depends on at fabric
// scale: a queue entry is 40 bytes (its packet's buffer, order and
// header summary: eight fit in five cache lines), and the fields every hop
// reads of a port fit its first two lines.
func TestHotLayout(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n != 40 {
		t.Errorf("entry is %d bytes, want 40", n)
	}
	if off := unsafe.Offsetof(portState{}.wire); off > 96 {
		t.Errorf("the hot fields of a port end at byte %d, past 96", off)
	}
	// The wire's ring, the strict-priority queue's and the first data
	// queue's, which every hop reads, end in the port's third line.
	if n := unsafe.Sizeof(ring{}); n != 32 {
		t.Errorf("ring is %d bytes, want 32", n)
	}
	if end := unsafe.Offsetof(portState{}.data) + unsafe.Sizeof(ring{}); end > 192 {
		t.Errorf("the first data ring ends at byte %d, past the port's third cache line", end)
	}
	if n := unsafe.Sizeof(port{}); n%64 != 0 {
		t.Errorf("port is %d bytes, not whole cache lines", n)
	}
}
