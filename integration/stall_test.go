package integration

import (
	"bytes"
	"context"
	"syscall"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
)

// A receiving daemon stopped (SIGSTOP) for many RTOs in the middle of a
// transfer, as a daemon waiting for a core is: its socket keeps the
// window's packets, and nothing is lost. With reliability.spurious_rto the
// sender resends the oldest packet alone at each timeout and, once the
// receiver's ACKs of the originals come back, counts the timeout spurious
// and resends nothing more; under IRN's rule each timeout resends the
// whole window. The transfer arrives exact either way.
func TestStalledReceiverCostsAPacketNotTheWindow(t *testing.T) {
	for _, detect := range []bool{true, false} {
		name := "irn-rule"
		if detect {
			name = "spurious-rto"
		}
		t.Run(name, func(t *testing.T) {
			opts := map[uint16]hostOpts{1: {cc: "none", spuriousRTO: detect}, 2: {cc: "none", spuriousRTO: detect}}
			s := newStar(t, 2, "100Mbps", opts)
			c1, c2 := s.client(1), s.client(2)
			const size = 4 << 20 // 0.34 s at 100 Mb/s
			x := post(t, c1, c2, 1, 2, 5, hostapi.ClassTensor, size, 0)
			receiver := s.group.Pids()[2] // switch, host1, host2
			// Stop the receiver once data flows, for 100 ms: 12 of the
			// 8 ms RTOs.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			for {
				ct, err := c1.Counters(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if len(ct.Flows) == 1 && ct.Flows[0].Values.AcksRecv > 0 {
					break
				}
				time.Sleep(time.Millisecond)
			}
			if err := syscall.Kill(receiver, syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond)
			if err := syscall.Kill(receiver, syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			comp := awaitKind(t, c2, hostapi.KindRecv, time.Minute)
			if comp.Status != hostapi.StatusOK || !bytes.Equal(x.dst, x.src) {
				t.Fatalf("receive %+v: the bytes differ from those sent", comp)
			}
			awaitKind(t, c1, hostapi.KindSend, time.Minute)
			ct, err := c1.Counters(ctx)
			if err != nil {
				t.Fatal(err)
			}
			v := ct.Flows[0].Values
			t.Logf("%s: %d RTOs, %d found spurious, %d packets resent of %d", name, v.RTOs, v.SpuriousRTOs, v.RetxPackets, v.DataPackets)
			if v.RTOs == 0 {
				t.Fatal("no timeout fired while the receiver was stopped: the test exercised nothing")
			}
			const window = 16 // 64 KiB of 4 KiB packets
			if detect && (v.SpuriousRTOs == 0 || v.RetxPackets > v.RTOs) {
				t.Errorf("with spurious_rto: %d RTOs, %d spurious, %d resent; want some spurious and at most one packet resent per RTO",
					v.RTOs, v.SpuriousRTOs, v.RetxPackets)
			}
			if !detect && (v.SpuriousRTOs != 0 || v.RetxPackets < window) {
				t.Errorf("under IRN's rule: %d spurious, %d resent; want none counted and the window (%d) resent", v.SpuriousRTOs, v.RetxPackets, window)
			}
		})
	}
}
