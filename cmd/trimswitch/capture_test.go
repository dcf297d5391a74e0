package main

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/forgive-emu/forgive/udpio"
	"github.com/forgive-emu/forgive/wire"
)

const dissector = "../../deploy/wireshark/forgive.lua"

// switchAddrs returns two addresses on UDP port 4793, the port the
// Wireshark dissector decodes, on a random 127.77.0.0/16 host pair so
// that concurrent runs do not collide.
func switchAddrs() (in, out netip.AddrPort) {
	a, b := byte(rand.IntN(256)), byte(rand.IntN(127)*2)
	in = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 77, a, b}), wire.DefaultPort)
	out = netip.AddrPortFrom(netip.AddrFrom4([4]byte{127, 77, a, b + 1}), wire.DefaultPort)
	return in, out
}

// SIGTERM stops the switch cleanly: exit 0, the capture flushed to a valid
// pcap whose packets decode with the wire parser and carry CE where the
// switch marked, and every socket released (the addresses bind again).
func TestSIGTERMFlushesTheCaptureAndReleasesTheSockets(t *testing.T) {
	const packets = 400
	sender, receiver := listen(t, "127.0.0.1:0"), listen(t, "127.0.0.1:0")
	in, out := switchAddrs()
	file := filepath.Join(t.TempDir(), "switch.pcap")
	cfg := overloadConfig(sender.LocalAddr(), receiver.LocalAddr(), in, out, "50Mbps", "")
	sw := startSwitch(t, cfg, "--capture", file, "--capture-ports", "in,out")

	var got tally
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		got = collect(t, receiver, packets, 5*time.Second)
	}()
	sent := blast(t, sender, in, blastPlan{packets: packets, payload: 1400, bitsPerSec: 100e6, garbageEvery: 100})
	wg.Wait()
	if got.packets != packets || got.ce == 0 || got.trimmed == 0 {
		t.Fatalf("received %d of %d, %d CE, %d trimmed: want all, some marked, some trimmed", got.packets, packets, got.ce, got.trimmed)
	}

	r := sw.terminate(t)
	if r.code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0", r.code)
	}
	for _, a := range []netip.AddrPort{in, out} {
		c, err := udpio.Listen(a.String(), udpio.Options{})
		if err != nil {
			t.Fatalf("%v still bound after exit: %v", a, err)
		}
		c.Close()
	}

	rec := readCapture(t, file, in, out)
	garbage := 0
	for _, n := range sent.garbage {
		garbage += n
	}
	if rec.ingress != packets+garbage || rec.ingressInvalid != garbage {
		t.Errorf("captured %d datagrams arriving on in (%d invalid), want %d (%d garbage)", rec.ingress, rec.ingressInvalid, packets+garbage, garbage)
	}
	if rec.egress != got.packets || rec.egressCE != got.ce || rec.egressTrimmed != got.trimmed {
		t.Errorf("captured %d leaving out (%d CE, %d trimmed); receiver saw %d (%d CE, %d trimmed)",
			rec.egress, rec.egressCE, rec.egressTrimmed, got.packets, got.ce, got.trimmed)
	}
	if rec.ingressCE != 0 {
		t.Errorf("%d arriving packets carry CE: the sender sent ECT(0)", rec.ingressCE)
	}
	t.Run("tshark", func(t *testing.T) { checkTshark(t, file, receiver.LocalAddr().Port(), got) })
}

// captureCount is what a capture file holds.
type captureCount struct {
	ingress, ingressInvalid, ingressCE int
	egress, egressCE, egressTrimmed    int
}

// readCapture decodes every record with gopacket (Ethernet, IPv4, UDP)
// and the wire parser, and counts them by direction.
func readCapture(t *testing.T, file string, in, out netip.AddrPort) captureCount {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rd, err := pcapgo.NewReader(f)
	if err != nil {
		t.Fatalf("not a pcap file: %v", err)
	}
	var c captureCount
	for {
		data, _, err := rd.ReadPacketData()
		if err == io.EOF {
			return c
		}
		if err != nil {
			t.Fatal(err)
		}
		pkt := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
		ip, _ := pkt.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		udp, _ := pkt.Layer(layers.LayerTypeUDP).(*layers.UDP)
		if ip == nil || udp == nil {
			t.Fatalf("record is not IPv4/UDP: %v", pkt)
		}
		dst, _ := netip.AddrFromSlice(ip.DstIP.To4())
		src, _ := netip.AddrFromSlice(ip.SrcIP.To4())
		d, perr := wire.ParseData(udp.Payload)
		ce := ip.TOS&3 == udpio.CE
		switch {
		case dst == in.Addr() && uint16(udp.DstPort) == in.Port():
			c.ingress++
			if perr != nil {
				c.ingressInvalid++
			} else if ce {
				c.ingressCE++
			}
		case src == out.Addr() && uint16(udp.SrcPort) == out.Port():
			if perr != nil {
				t.Fatalf("an egress record does not decode: %v", perr)
			}
			c.egress++
			if ce {
				c.egressCE++
			}
			if d.Trimmed() {
				c.egressTrimmed++
			}
		default:
			t.Fatalf("record %v:%d -> %v:%d is neither into in nor out of out", src, udp.SrcPort, dst, udp.DstPort)
		}
	}
}

// checkTshark reads the capture with the project's Wireshark dissector and
// checks that tshark sees the same trimmed headers and CE marks.
func checkTshark(t *testing.T, file string, receiverPort uint16, got tally) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark is not installed (apt-get install tshark)")
	}
	if _, err := os.Stat(dissector); err != nil {
		t.Skipf("the dissector %s does not exist yet", dissector)
	}
	// Only the egress of port out: the packets sent to the receiver.
	cmd := exec.Command(tshark, "-n", "-r", file, "-X", "lua_script:"+dissector,
		"-Y", fmt.Sprintf("udp.dstport == %d", receiverPort),
		"-T", "fields", "-E", "separator=,", "-e", "forgive.type", "-e", "forgive.flags.trimmed", "-e", "ip.dsfield.ecn")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir()) // no user profile
	outb, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(outb)), "\n")
	data, trimmed, ce := 0, 0, 0
	for _, l := range lines {
		f := strings.Split(l, ",")
		if len(f) != 3 {
			t.Fatalf("tshark line %q", l)
		}
		if f[0] == "1" {
			data++
		}
		if f[1] == "1" || f[1] == "True" {
			trimmed++
		}
		if f[2] == "3" {
			ce++
		}
	}
	if data != got.packets || trimmed != got.trimmed || ce != got.ce {
		t.Fatalf("tshark decoded %d DATA, %d trimmed, %d CE; receiver saw %d, %d, %d\nfirst lines: %q",
			data, trimmed, ce, got.packets, got.trimmed, got.ce, lines[:min(len(lines), 5)])
	}
}
