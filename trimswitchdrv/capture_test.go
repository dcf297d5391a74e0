package trimswitchdrv

import (
	"bytes"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/forgive-emu/forgive/udpio"
	"github.com/forgive-emu/forgive/wire"
)

// A frame the capture synthesises decodes as Ethernet/IPv4/UDP with an
// independent decoder, carries the real TOS byte, and has a valid IPv4
// header checksum.
func TestCaptureFrameDecodes(t *testing.T) {
	src := netip.MustParseAddrPort("127.1.2.3:4793")
	dst := netip.MustParseAddrPort("127.4.5.6:5000")
	payload := dataPacket(t, 7, 100)
	frame := appendFrame(nil, src, dst, udpio.MakeTOS(26, udpio.CE), 9, payload)
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	if err := pkt.ErrorLayer(); err != nil {
		t.Fatal(err.Error())
	}
	ip := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	udp := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
	if ip.TOS != 26<<2|3 || ip.SrcIP.String() != "127.1.2.3" || ip.DstIP.String() != "127.4.5.6" || ip.TTL != 64 {
		t.Fatalf("IPv4 %+v", ip)
	}
	if udp.SrcPort != 4793 || udp.DstPort != 5000 || !bytes.Equal(udp.Payload, payload) {
		t.Fatalf("UDP %d -> %d, %d payload bytes", udp.SrcPort, udp.DstPort, len(udp.Payload))
	}
	if sum := ipChecksum(frame[ethLen : ethLen+ipv4Len]); sum != 0 {
		t.Fatalf("IPv4 header checksum does not verify (residue %#x)", sum)
	}
}

// The capture of a run holds both directions of the captured ports, with
// the CE marks and trims the engine made, readable by pcapgo.
func TestCaptureRecordsBothDirectionsWithCE(t *testing.T) {
	sender, receiver := listen(t), listen(t)
	file := filepath.Join(t.TempDir(), "run.pcap")
	defaults := `  rate: 50Mbps
  data_queue: 16KiB
  trim: arrival
  ecn: {kmin: 2KiB, kmax: 12KiB, pmax: 1}`
	extra := "capture:\n  file: " + file + "\n"
	begin := time.Now()
	r := start(t, parse(t, twoPortYAML(sender.LocalAddr(), receiver.LocalAddr(), defaults, extra)))
	const n = 60
	pkts := make([][]byte, n)
	for i := range pkts {
		pkts[i] = dataPacket(t, uint32(i), 1400)
	}
	send(t, sender, r.LocalAddr(0), pkts, bytes.Repeat([]byte{udpio.ECT0}, n))
	if got := receive(t, receiver, n, 2*time.Second); len(got) != n {
		t.Fatalf("received %d of %d", len(got), n)
	}
	r.stop(t)
	end := time.Now()
	cs := r.Snapshot().Fabric.Ports[1].Classes[0]

	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	if rd.LinkType() != layers.LinkTypeEthernet {
		t.Fatalf("link type %v", rd.LinkType())
	}
	in, out, ce, trimmed := 0, 0, 0, 0
	for {
		data, ci, err := rd.ReadPacketData()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if ci.Timestamp.Before(begin) || ci.Timestamp.After(end) {
			t.Fatalf("timestamp %v outside the run [%v, %v]", ci.Timestamp, begin, end)
		}
		pkt := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		ip, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		udp, _ := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if ip == nil || udp == nil {
			t.Fatalf("record is not IPv4/UDP: %v", pkt)
		}
		d, err := wire.ParseData(udp.Payload)
		if err != nil {
			t.Fatalf("record payload: %v", err)
		}
		switch {
		case ip.DstIP.Equal(r.LocalAddr(0).Addr().AsSlice()) && int(udp.DstPort) == int(r.LocalAddr(0).Port()):
			in++
		case int(udp.SrcPort) == int(r.LocalAddr(1).Port()):
			out++
			if ip.TOS&3 == udpio.CE {
				ce++
			}
			if d.Trimmed() {
				trimmed++
			}
		default:
			t.Fatalf("record %v -> %v:%d is neither direction", ip.SrcIP, ip.DstIP, udp.DstPort)
		}
	}
	if in != n || out != n {
		t.Fatalf("captured %d in and %d out, want %d each", in, out, n)
	}
	if uint64(ce) != cs.Marked.Packets || uint64(trimmed) != cs.Trimmed.Packets || ce == 0 || trimmed == 0 {
		t.Fatalf("captured %d CE and %d trimmed; engine marked %d, trimmed %d", ce, trimmed, cs.Marked.Packets, cs.Trimmed.Packets)
	}
}
