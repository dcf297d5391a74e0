package fabric

import (
	"testing"
	"unsafe"
)

// TestHotLayout holds the sizes the per-hop cost depends on at fabric
// scale: a queue entry is half a cache line, and the fields every hop
// reads of a port fit its first two lines.
func TestHotLayout(t *testing.T) {
	if n := unsafe.Sizeof(entry{}); n != 32 {
		t.Errorf("entry is %d bytes, want 32", n)
	}
	if off := unsafe.Offsetof(portState{}.wire); off > 128 {
		t.Errorf("the hot fields of a port end at byte %d, past its first two cache lines", off)
	}
	if n := unsafe.Sizeof(port{}); n%64 != 0 {
		t.Errorf("port is %d bytes, not whole cache lines", n)
	}
	// A packet's counters on its egress port: one line per queue class.
	if n := unsafe.Sizeof(classHot{}); n != 64 {
		t.Errorf("classHot is %d bytes, want one 64-byte line", n)
	}
	if off := unsafe.Offsetof(portState{}.cls); off%64 != 0 {
		t.Errorf("the per-class counters start at byte %d of a port, not at a line", off)
	}
}
