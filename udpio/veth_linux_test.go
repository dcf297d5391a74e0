package udpio

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
)

// vethPair is two network namespaces cabled by a veth pair of the given
// MTU, 10.99.0.1/30 in a and 10.99.0.2/30 in b, as lab/netns wires a
// fabric. The namespaces have no name: they live while a handle or a
// socket holds them, and with them the veth. It skips without root.
type vethPair struct{ a, b netns.NsHandle }

func newVethPair(t *testing.T, mtu int) *vethPair {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates two network namespaces and a veth pair")
	}
	p := &vethPair{a: netns.None(), b: netns.None()}
	t.Cleanup(func() { p.a.Close(); p.b.Close() })
	err := onThread(func(orig netns.NsHandle) error {
		var err error
		if p.a, err = netns.New(); err != nil {
			return fmt.Errorf("new namespace: %w", err)
		}
		if p.b, err = netns.New(); err != nil {
			return fmt.Errorf("new namespace: %w", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	ha, err := netlink.NewHandleAt(p.a)
	if err != nil {
		t.Fatal(err)
	}
	defer ha.Close()
	hb, err := netlink.NewHandleAt(p.b)
	if err != nil {
		t.Fatal(err)
	}
	defer hb.Close()
	veth := &netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: "va", MTU: mtu}, PeerName: "vb", PeerNamespace: netlink.NsFd(int(p.b))}
	if err := ha.LinkAdd(veth); err != nil {
		t.Fatalf("veth: %v", err)
	}
	for _, end := range []struct {
		h          *netlink.Handle
		name, addr string
	}{{ha, "va", "10.99.0.1/30"}, {hb, "vb", "10.99.0.2/30"}} {
		link, err := end.h.LinkByName(end.name)
		if err != nil {
			t.Fatal(err)
		}
		addr, _ := netlink.ParseAddr(end.addr)
		if err := end.h.LinkSetMTU(link, mtu); err != nil {
			t.Fatal(err)
		}
		if err := end.h.AddrAdd(link, addr); err != nil {
			t.Fatal(err)
		}
		if err := end.h.LinkSetUp(link); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

// listenIn opens a Conn inside namespace ns; the socket stays there.
func listenIn(t *testing.T, ns netns.NsHandle, addr string, opts Options) *Conn {
	t.Helper()
	var c *Conn
	err := onThread(func(netns.NsHandle) error {
		if err := netns.Set(ns); err != nil {
			return err
		}
		var err error
		c, err = Listen(addr, opts)
		return err
	})
	if err != nil {
		t.Fatalf("Listen(%s) in a namespace: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// onThread runs fn on a goroutine locked to a fresh OS thread and puts
// the thread back into its namespace afterwards; if that fails the thread
// stays locked and ends with the goroutine, so no other goroutine runs in
// the wrong namespace.
func onThread(fn func(orig netns.NsHandle) error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			done <- err
			return
		}
		defer orig.Close()
		ferr := fn(orig)
		if err := netns.Set(orig); err != nil {
			done <- errors.Join(ferr, err)
			return
		}
		runtime.UnlockOSThread()
		done <- ferr
	}()
	return <-done
}

// The netns path of the daemons: datagrams longer than the veth's MTU
// allows (sealed 4 KiB DATA packets, 4,196 bytes, on a 4,164-byte veth)
// cannot be segmented, and the kernel refuses such a send with EMSGSIZE
// where the same datagrams sent one by one are fragmented and arrive.
// With Offload on, the Conn must send them all, each exact, whether the
// refused run is a call's first message or follows runs the kernel took;
// keep segmenting the runs that fit (a coalesced receive proves their
// segments crossed the veth as one packet); and say which size it
// stopped segmenting.
func TestOffloadOverAVethSmallerThanTheDatagrams(t *testing.T) {
	const mtu = 4164
	run := func(n, size int) []sent {
		ds := make([]sent, n)
		for i := range ds {
			ds[i] = sent{size, ECT0}
		}
		return ds
	}
	over := run(8, 4196)                          // over the MTU: fragmented, never segmented
	headers := run(2, 40)                         // trimmed headers
	fit := append(run(8, 4136), sent{1000, ECT0}) // unsealed DATA packets: exactly the MTU
	for _, tc := range []struct {
		name string
		ds   []sent
	}{
		{"refused first", slices.Concat(over, headers, fit)},
		{"refused after runs sent", slices.Concat(headers, fit, over, headers)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := newVethPair(t, mtu)
			tx := listenIn(t, p.a, "10.99.0.1:0", Options{Offload: true})
			rx := listenIn(t, p.b, "10.99.0.2:0", Options{Offload: true})
			if _, gro := rx.Offload(); !gro {
				t.Fatal("UDP_GRO refused in a namespace")
			}
			out := fill(tc.ds, rx.LocalAddr())
			for round := range 2 {
				if n, err := tx.WriteBatch(out); n != len(out) || err != nil {
					t.Fatalf("round %d: WriteBatch = %d, %v; want %d, nil", round, n, err, len(out))
				}
				expectExact(t, readAll(t, rx, len(out), DefaultBatchSize, 8192), out, tx.LocalAddr())
			}
			if gso, _ := tx.Offload(); !gso {
				t.Fatalf("GSO turned off: %v", tx.OffloadFailure())
			}
			if l := tx.SegmentLimit(); l != 4196 {
				t.Fatalf("SegmentLimit() = %d, want 4196", l)
			}
			if rx.rg.coalesced == 0 {
				t.Fatal("no receive was coalesced: the runs that fit the MTU were not segmented")
			}
			// Without offload the same datagrams arrive too: the kernel
			// fragments them, so the refusal above is GSO's alone.
			plain := listenIn(t, p.a, "10.99.0.1:0", Options{})
			writeAllMsgs(t, plain, out)
			expectExact(t, readAll(t, rx, len(out), DefaultBatchSize, 8192), out, plain.LocalAddr())
		})
	}
}
