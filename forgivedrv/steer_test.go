package forgivedrv

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"testing"
	"time"

	"golang.org/x/net/bpf"

	"github.com/forgive-emu/forgive/udpio"
	"github.com/forgive-emu/forgive/wire"
)

// steerPackets are packets of flow (src, flow) of several types, built by
// package wire, so that the program's offsets are checked against wire's.
func steerPackets(t testing.TB, src uint16, flow uint32) [][]byte {
	t.Helper()
	data, err := wire.AppendData(nil, wire.DataFields{Src: src, Dst: 9, Flow: flow, Tags: wire.Tags{Dst: 1, Src: 2},
		MsgLen: 4}, []byte{1, 2, 3, 4})
	if err != nil {
		t.Fatal(err)
	}
	return [][]byte{
		data,
		wire.AppendCNP(nil, src, 9, flow, 5),
		wire.AppendAck(nil, wire.AckFields{Src: src, Dst: 9, Flow: flow, Tags: wire.Tags{Dst: 1, Src: 2}}),
	}
}

// The program the kernel runs computes Steer, for every packet type, on
// packets package wire builds; a PAUSE goes to engine 0, and a datagram
// too short for the fields fails the program (the kernel's hash then
// chooses; the engine counts it malformed).
func TestSteerProgram(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{2, 3, 4, MaxEngines} {
		vm, err := bpf.NewVM(SteerProgram(n))
		if err != nil {
			t.Fatal(err)
		}
		seen := make([]int, n)
		for range 2000 {
			src, flow := uint16(rng.Uint32()), rng.Uint32()
			want := Steer(src, flow, n)
			seen[want]++
			for _, pkt := range steerPackets(t, src, flow) {
				got, err := vm.Run(pkt)
				if err != nil || got != want {
					t.Fatalf("n=%d src %d flow %d type %v: program %d (%v), Steer %d", n, src, flow, wire.Header(pkt).Type(), got, err, want)
				}
			}
		}
		for i, c := range seen {
			if c < 2000/n/2 {
				t.Errorf("n=%d: engine %d got %d of 2000 random flows: %v", n, i, c, seen)
			}
		}
		// Consecutive flow ids, as a client numbers them, spread too.
		clear(seen)
		for id := range uint32(64) {
			seen[Steer(1, id, n)]++
		}
		for i, c := range seen {
			if c == 0 && n <= 4 {
				t.Errorf("n=%d: no flow of ids 0..63 on engine %d: %v", n, i, seen)
			}
		}
		pause := wire.AppendPause(nil, 1, 100)
		if got, err := vm.Run(pause); err != nil || got != 0 {
			t.Errorf("n=%d: a PAUSE went to engine %d (%v), want 0", n, got, err)
		}
		if got, err := vm.Run([]byte{byte(wire.TypeData)}); err == nil && got != 0 {
			t.Errorf("n=%d: a 1-byte datagram went to engine %d", n, got)
		}
	}
	if Steer(7, 7, 1) != 0 || Steer(7, 7, 0) != 0 {
		t.Error("one engine: Steer is not 0")
	}
}

// In the kernel: a group of sockets with the program attached gives every
// packet of a flow to the socket Steer names, whatever its type.
func TestSteerKernelGroup(t *testing.T) {
	for _, n := range []int{2, 4} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			addr := netip.MustParseAddrPort(fmt.Sprintf("127.%d.251.1:0", 100+os.Getpid()%100))
			conns, err := listenGroup(addr, n, udpio.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer func() {
				for _, c := range conns {
					c.Close()
				}
			}()
			tx, err := udpio.Listen(fmt.Sprintf("127.%d.251.2:0", 100+os.Getpid()%100), udpio.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Close()
			to := conns[0].LocalAddr()
			type sent struct {
				src  uint16
				flow uint32
			}
			want := map[int][]sent{}
			rng := rand.New(rand.NewPCG(3, 4))
			total := 0
			for range 64 {
				src, flow := uint16(rng.Uint32()), rng.Uint32()
				for _, pkt := range steerPackets(t, src, flow) {
					msg := []udpio.Msg{{Buf: pkt, N: len(pkt), Addr: to}}
					if _, err := tx.WriteBatch(msg); err != nil {
						t.Fatal(err)
					}
					i := Steer(src, flow, n)
					want[i] = append(want[i], sent{src, flow})
					total++
				}
			}
			got := 0
			for i, c := range conns {
				rx := make([]udpio.Msg, 64)
				for j := range rx {
					rx[j].Buf = make([]byte, 2048)
				}
				var arrived []sent
				deadline := time.Now().Add(20 * time.Second)
				for len(arrived) < len(want[i]) && time.Now().Before(deadline) {
					k, err := c.ReadBatchUntil(rx, time.Now().Add(50*time.Millisecond))
					if err != nil {
						t.Fatal(err)
					}
					for j := range rx[:k] {
						m := &rx[j]
						h := wire.Header(m.Payload())
						id, _ := h.Flow()
						arrived = append(arrived, sent{h.Src(), id})
					}
				}
				// Nothing more arrives here: an extra packet would be
				// another engine's.
				if k, _ := c.ReadBatchUntil(rx, time.Now().Add(20*time.Millisecond)); k != 0 {
					t.Errorf("socket %d: %d packets more than its flows'", i, k)
				}
				if fmt.Sprint(arrived) != fmt.Sprint(want[i]) {
					t.Errorf("socket %d of %d: got flows %v, want %v", i, n, arrived, want[i])
				}
				got += len(arrived)
			}
			if got != total {
				t.Errorf("%d of %d packets arrived", got, total)
			}
		})
	}
}
