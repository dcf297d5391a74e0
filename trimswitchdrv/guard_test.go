package trimswitchdrv

import (
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/switchcore"
	"github.com/forgive-emu/forgive/wire"
)

// "A datagram is accepted on a port only from that port's configured
// neighbour address, and a packet arriving on a host-facing port only with
// that host's id as its source": an off-path socket's valid packets are
// counted foreign_source and never forwarded; the neighbour's packets
// naming another source host are dropped by the source guard; the
// neighbour's own packets go through.
func TestPortTakesOnlyItsNeighbourAndItsHost(t *testing.T) {
	sender, receiver, stranger := listen(t), listen(t), listen(t)
	doc := twoPortYAML(sender.LocalAddr(), receiver.LocalAddr(), unshapedDefaults, "")
	doc = strings.Replace(doc, "  - name: in\n", "  - name: in\n    host: 1\n", 1)
	r := start(t, parse(t, doc))
	const n = 20
	var forged, spoofed, good [][]byte
	for i := range n {
		forged = append(forged, dataPacket(t, uint32(i), 64))
		s, err := wire.AppendData(nil, wire.DataFields{Src: 3, Dst: 2, Flow: 9, MsgLen: 64}, make([]byte, 64))
		if err != nil {
			t.Fatal(err)
		}
		spoofed = append(spoofed, s)
		good = append(good, dataPacket(t, uint32(100+i), 64))
	}
	send(t, stranger, r.LocalAddr(0), forged, make([]byte, n))
	send(t, sender, r.LocalAddr(0), spoofed, make([]byte, n))
	send(t, sender, r.LocalAddr(0), good, make([]byte, n))
	got := receive(t, receiver, n+1, time.Second)
	r.stop(t)
	if len(got) != n {
		t.Fatalf("forwarded %d packets, want the neighbour's %d", len(got), n)
	}
	for _, g := range got {
		if d := wire.Data(g.data); d.Src() != 1 || d.PSN() < 100 {
			t.Fatalf("forwarded a refused packet: src %d psn %d", d.Src(), d.PSN())
		}
	}
	st := r.Snapshot()
	if f := st.Ports[0].Invalid[InvalidForeignSource]; f != n {
		t.Errorf("foreign_source %d, want %d", f, n)
	}
	if g := st.Fabric.Ports[0].RxDrops[switchcore.DropSourceGuard].Packets; g != n {
		t.Errorf("source_guard drops %d, want %d", g, n)
	}
	if InvalidForeignSource.String() != "foreign_source" {
		t.Errorf("reason name %q", InvalidForeignSource)
	}
}
