package switchcore

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
}
