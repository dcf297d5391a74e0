package switchcore

import (
	"bytes"
	"crypto/rand"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/tss"
	"github.com/forgive-emu/forgive/wire"
)

// The switch has no key, yet trims sealed packets: a burst of sealed data
// into a full trimming port leaves as whole sealed packets, byte for byte,
// and as trimmed sealed headers of wire.TrimmedLen bytes (header, domain,
// nonce, header tag) that the receiver authenticates.
func TestSealedPacketsTrimmedWithoutTheKey(t *testing.T) {
	ring, err := tss.NewKeyring(tss.Domain{ID: 3, Key: tss.Key{1, 2, 3}})
	if err != nil {
		t.Fatal(err)
	}
	sealer, err := tss.NewSealer(ring, rand.Reader, 1)
	if err != nil {
		t.Fatal(err)
	}
	opener := tss.NewOpener(ring)
	for _, mode := range []TrimMode{TrimArrival, TrimNDP} {
		t.Run(mode.String(), func(t *testing.T) {
			h := newHarness(t, trimConfig(mode))
			sent := map[wire.PSN][]byte{}
			for i := range 200 {
				plain := dataPacket(hostA, hostB, 1, wire.PSN(i), 0, payload1K)
				b, err := sealer.Seal(nil, plain)
				if err != nil {
					t.Fatal(err)
				}
				sent[wire.PSN(i)] = bytes.Clone(b)
				if r := h.recv(portA, b, tosData); r != DropNone {
					t.Fatalf("sealed packet %d dropped: %v", i, r)
				}
				h.advance(h.now + 100*time.Nanosecond)
			}
			h.settle()
			var whole, trimmed int
			for _, o := range outputsOn(h.takeOut(), portB) {
				b := o.Pkt.Buf
				psn := wire.Data(b).PSN()
				want, ok := sent[psn]
				if !ok {
					t.Fatalf("output for PSN %d never sent", psn)
				}
				n, _ := wire.TrimmedLen(want)
				out, info, err := opener.Open(nil, b)
				switch {
				case err != nil:
					t.Fatalf("PSN %d (%d bytes) does not authenticate after the switch: %v", psn, len(b), err)
				case bytes.Equal(b, want):
					whole++
				case len(b) == n && info.Trimmed && bytes.Equal(b[2:], want[2:n]) && b[1] == want[1]|wire.DataTrimmed:
					trimmed++
					if d, err := wire.ParseData(out); err != nil || !d.Trimmed() || d.PayloadLen() != payload1K {
						t.Fatalf("PSN %d opened into %x: %v", psn, out, err)
					}
				default:
					t.Fatalf("PSN %d left as %d bytes %x; sent %d bytes, trimmed length %d", psn, len(b), b, len(want), n)
				}
			}
			if trimmed == 0 || whole == 0 || whole+trimmed != len(sent) {
				t.Fatalf("%d whole and %d trimmed of %d sealed packets", whole, trimmed, len(sent))
			}
			t.Logf("%d whole, %d trimmed to %d bytes", whole, trimmed, wire.DataLen+wire.SealExtLen)
		})
	}
}
