package nic

import (
	"testing"
	"unsafe"

	"github.com/forgive-emu/forgive/congestion"
)

// TestFlowLayout holds the layout flow's comment claims: the state and
// the engines' pointers in its first 64 bytes, the key and the
// notification point's state in the next line (its counters, the
// Notifier's last field, may spill over: Advance and NextDeadline do not
// read them), and a size in the 640-byte size
// class, whose objects are 64-byte aligned.
func TestFlowLayout(t *testing.T) {
	var f flow
	end := func(off, size uintptr) uintptr { return off + size }
	if e := end(unsafe.Offsetof(f.entropy), unsafe.Sizeof(f.entropy)); e > 64 {
		t.Errorf("the flow's state and engine pointers end at byte %d, past its first cache line", e)
	}
	if off := unsafe.Offsetof(f.key); off < 64 {
		t.Errorf("the flow's key starts at byte %d, in its first cache line, not the second", off)
	}
	if e := end(unsafe.Offsetof(f.np), unsafe.Sizeof(f.np)-unsafe.Sizeof(congestion.NotifierStats{})); e > 128 {
		t.Errorf("the flow's key and notification point end at byte %d, past its second cache line", e)
	}
	if n := unsafe.Sizeof(f); n <= 576 || n > 640 {
		t.Errorf("a flow is %d bytes, not in the 640-byte size class (577..640)", n)
	}
}
