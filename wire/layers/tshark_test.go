package layers

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/forgive-emu/forgive/wire"
)

// tsharkFields are the dissector fields the test reads, one column each.
var tsharkFields = []string{
	"forgive.version", "forgive.type", "forgive.flags", "forgive.src", "forgive.dst",
	"forgive.flow", "forgive.dst_tag", "forgive.src_tag", "forgive.psn", "forgive.entropy",
	"forgive.msg", "forgive.offset", "forgive.msg_len", "forgive.payload_len", "forgive.subflows",
	"forgive.trimmed", "forgive.flags.trimmed", "forgive.flags.retx",
	"forgive.flags.ecn_echo", "forgive.flags.eligible", "forgive.flags.exhausted",
	"forgive.ack.cum_psn", "forgive.ack.sack_base", "forgive.ack.sack", "forgive.ack.echo_psn",
	"forgive.ack.sacked_psn",
	"forgive.nack.reason", "forgive.nack.priority", "forgive.nack.count", "forgive.nack.length",
	"forgive.probe.kind", "forgive.probe.subflow",
	"forgive.pause.class_mask", "forgive.pause.micros", "forgive.pause.class2",
	"data.len", "_ws.expert.message",
}

// TestTsharkDissector writes captures and decodes them with tshark and
// deploy/wireshark/forgive.lua: one packet of every type, whose every field
// must read as package wire encoded it, and malformed datagrams, which must
// be flagged without a Lua error.
func TestTsharkDissector(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark not installed: apt-get install tshark to check deploy/wireshark/forgive.lua")
	}
	t.Run("every type", func(t *testing.T) {
		exs := examples()
		var frames [][]byte
		for _, e := range exs {
			frames = append(frames, exampleFrame(t, e))
		}
		lines := runTshark(t, tshark, frames, tsharkFields)
		for i, e := range exs {
			got := strings.Split(lines[i], ";")
			want := tsharkWant(e)
			for j, name := range tsharkFields {
				if j >= len(got) {
					t.Errorf("%s: no column for %s", e.name, name)
					continue
				}
				if g, w := normalizeBool(got[j]), want[name]; g != w {
					t.Errorf("%s: %s = %q, want %q", e.name, name, got[j], w)
				}
			}
		}
	})
	t.Run("sealed", func(t *testing.T) {
		ses := sealedExamples(t)
		var frames [][]byte
		for _, se := range ses {
			frames = append(frames, frame(t, se.layer.Type, endpoint{se.layer.Src(), 49152},
				endpoint{se.layer.Dst(), wire.DefaultPort}, gopacket.Payload(se.sealed)))
		}
		fields := append(append([]string(nil), tsharkFields...), sealedFields...)
		lines := runTshark(t, tshark, frames, fields)
		for i, se := range ses {
			got := strings.Split(lines[i], ";")
			want := tsharkWantSealed(t, se)
			for j, name := range fields {
				if j >= len(got) {
					t.Errorf("%s: no column for %s", se.name, name)
					continue
				}
				if g, w := normalizeBool(got[j]), want[name]; g != w {
					t.Errorf("%s: %s = %q, want %q", se.name, name, got[j], w)
				}
			}
		}
	})
	t.Run("malformed", func(t *testing.T) {
		cases := append(malformedCases(t), sealedMalformedCases(t)...)
		var frames [][]byte
		for _, c := range cases {
			frames = append(frames, frame(t, wire.TypeData, endpoint{3, 49152}, endpoint{9, wire.DefaultPort},
				gopacket.Payload(c.datagram)))
		}
		lines := runTshark(t, tshark, frames, []string{"_ws.expert.message"})
		for i, c := range cases {
			if !strings.Contains(lines[i], c.expert) || strings.Contains(lines[i], "Lua Error") {
				t.Errorf("%s: expert info %q, want it to mention %q", c.name, lines[i], c.expert)
			}
		}
	})
}

type malformedCase struct {
	name     string
	datagram []byte
	expert   string // part of the expert message the dissector must show
}

// malformedCases returns datagrams package wire refuses, each with what the
// dissector should say about it.
func malformedCases(t *testing.T) []malformedCase {
	exs := examples()
	data, ack, nack, probe := datagram(t, exs[0]), datagram(t, exs[2]), datagram(t, exs[3]), datagram(t, exs[5])
	set := func(b []byte, i int, v byte) []byte { c := bytes.Clone(b); c[i] = v; return c }
	connectNoTag := wire.AppendConnect(nil, wire.ConnectFields{Src: 3, Dst: 9, Flow: 42})
	cases := []malformedCase{
		{"3 bytes", ack[:3], "Shorter than the 8-byte common header"},
		{"truncated ACK", ack[:20], "ACK is 20 bytes, need 40"},
		{"truncated DATA", data[:31], "DATA is 31 bytes, need 40"},
		{"version 1", set(ack, 0, 1<<4|uint8(wire.TypeAck)), "Unsupported version 1"},
		{"CONNECT without a source tag", connectNoTag, "CONNECT with source tag 0"},
		{"type 9", set(ack, 0, wire.Version<<4|9), "Unknown packet type 9"},
		{"trimmed with payload", set(data, 1, data[1]|wire.DataTrimmed), "Trimmed DATA carries 1200 payload bytes"},
		{"short payload", data[:len(data)-1], "Payload is 1199 bytes, header says 1200"},
		{"undefined ACK flag", set(ack, 1, 0x40|wire.FlagEligible), "Undefined ACK flag bits 0x40"},
		{"NACK reason 0x77", set(nack, 2, 0x77), "Unknown NACK reason 0x77"},
		{"probe kind 9", set(probe, 1, 9), "Unknown probe kind 9"},
		{"reserved byte", set(ack, 3, 1), "Reserved byte 3 is not zero"},
	}
	for _, c := range cases {
		if _, err := wire.Validate(c.datagram); err == nil {
			t.Fatalf("%s: package wire accepts it; the case tests nothing", c.name)
		}
	}
	return cases
}

// sealedFields are the dissector's fields of the security sublayer.
var sealedFields = []string{
	"forgive.sealed", "forgive.flags.sealed", "forgive.encrypted", "forgive.tss.domain", "forgive.tss.nonce",
	"forgive.tss.header_tag", "forgive.tss.ciphertext", "forgive.tss.payload_tag",
}

// tsharkWantSealed returns the columns tshark should print for a sealed
// packet: its plain header's, with the sealed bit in a flag byte, and the
// sublayer's fields as the packet carries them.
func tsharkWantSealed(t *testing.T, se sealedExample) map[string]string {
	w := tsharkWant(se.example)
	switch se.layer.Type {
	case wire.TypeData:
		w["forgive.flags"] = hex8(se.layer.Data.Flags | wire.FlagSealed)
	case wire.TypeAck:
		w["forgive.flags"] = hex8(se.layer.Ack.Flags | wire.FlagSealed)
	case wire.TypeNack:
		w["forgive.flags"] = hex8(se.layer.Nack.Flags | wire.FlagSealed)
	}
	delete(w, "data.len") // the ciphertext goes to no other dissector
	hl, _ := wire.HeaderLen(se.layer.Type)
	ext := se.sealed[hl:]
	w["forgive.sealed"] = "1"
	w["forgive.flags.sealed"] = "1"
	w["forgive.tss.domain"] = fmt.Sprint(testDomain)
	w["forgive.tss.nonce"] = fmt.Sprintf("%x", ext[wire.SealDomainLen:wire.SealDomainLen+wire.SealNonceLen])
	w["forgive.tss.header_tag"] = fmt.Sprintf("%x", ext[wire.SealDomainLen+wire.SealNonceLen:wire.SealExtLen])
	if se.layer.Type == wire.TypeData && !se.layer.Trimmed() {
		body := ext[wire.SealExtLen:]
		if len(body) != len(se.payload)+wire.SealTagLen {
			t.Fatalf("%s: %d bytes after the header tag, want %d", se.name, len(body), len(se.payload)+wire.SealTagLen)
		}
		w["forgive.encrypted"] = "1"
		w["forgive.tss.ciphertext"] = fmt.Sprintf("%x", body[:len(se.payload)])
		w["forgive.tss.payload_tag"] = fmt.Sprintf("%x", body[len(se.payload):])
	}
	return w
}

// sealedMalformedCases returns sealed datagrams package wire refuses.
func sealedMalformedCases(t *testing.T) []malformedCase {
	by := map[string][]byte{}
	for _, se := range sealedExamples(t) {
		by[se.name] = se.sealed
	}
	set := func(b []byte, i int, v byte) []byte { c := bytes.Clone(b); c[i] = v; return c }
	data, trimmed, ack, cnp, probe := by["DATA"], by["DATA trimmed in flight"], by["ACK"], by["CNP"], by["PROBE"]
	cases := []malformedCase{
		{"sealed ACK without its extension", ack[:wire.AckLen], "Sealed ACK is 40 bytes, need 84"},
		{"sealed ACK cut in its nonce", ack[:wire.AckLen+10], "Sealed ACK is 50 bytes, need 84"},
		{"sealed ACK with a byte more", append(bytes.Clone(ack), 0), "Sealed ACK is 85 bytes, want 84"},
		{"sealed DATA cut in its header tag", data[:wire.DataLen+30], "Sealed DATA is 70 bytes, need 84"},
		{"sealed DATA without its payload tag", data[:len(data)-wire.SealTagLen], "Sealed DATA is 1284 bytes, header says 1300"},
		{"sealed DATA with T set", set(data, 1, data[1]|wire.DataTrimmed), "Trimmed sealed DATA is 1300 bytes, header says 84"},
		{"trimmed sealed DATA with T cleared", set(trimmed, 1, trimmed[1]&^wire.DataTrimmed), "Sealed DATA is 84 bytes, header says 1300"},
		{"sealed ACK undefined flag", set(ack, 1, ack[1]|0x40), "Undefined ACK flag bits 0x40"},
		{"sealed CNP reserved byte", set(cnp, 2, 1), "Reserved byte 2 is not zero"},
		{"sealed probe kind 9", set(probe, 1, wire.FlagSealed|9), "Unknown probe kind 9"},
	}
	for _, c := range cases {
		if _, err := wire.Validate(c.datagram); err == nil {
			t.Fatalf("%s: package wire accepts it; the case tests nothing", c.name)
		}
	}
	return cases
}

// runTshark writes frames to a capture, decodes it with the dissector and
// returns one line of ";"-separated fields per frame.
//
// Running as root: tshark warns that it runs as root but still loads
// scripts given with -X lua_script, as long as init.lua keeps its default
// run_user_scripts_when_superuser = true (Debian's does; later Wireshark
// versions drop the switch). Where a distribution sets it to false, the
// forgive.* fields stay unknown and tshark fails with "Some fields aren't
// valid"; run the test as an ordinary user there.
func runTshark(t *testing.T, tshark string, frames [][]byte, fields []string) []string {
	t.Helper()
	pcap := filepath.Join(t.TempDir(), "forgive.pcap")
	writePcap(t, pcap, frames)
	args := []string{"-n", "-r", pcap, "-X", "lua_script:" + luaScript(t),
		"-T", "fields", "-E", "separator=;", "-E", "occurrence=a", "-E", "aggregator=,"}
	for _, f := range fields {
		args = append(args, "-e", f)
	}
	cmd := exec.Command(tshark, args...)
	// A private configuration directory keeps the user's own profile and
	// plugins out of the run.
	cmd.Env = append(os.Environ(), "WIRESHARK_CONFIG_DIR="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "Lua: Error") {
		t.Fatalf("the dissector failed to load:\n%s", stderr.String())
	}
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) != len(frames) {
		t.Fatalf("tshark printed %d packets, want %d:\n%s", len(lines), len(frames), out)
	}
	return lines
}

// tsharkWant returns the column values tshark should print for e; fields
// the type does not have are empty.
func tsharkWant(e example) map[string]string {
	l := e.layer
	w := map[string]string{
		"forgive.version": fmt.Sprint(wire.Version),
		"forgive.type":    fmt.Sprint(uint8(l.Type)),
		"forgive.src":     fmt.Sprint(l.Src()),
		"forgive.dst":     fmt.Sprint(l.Dst()),
	}
	if l.Type != wire.TypePause {
		w["forgive.dst_tag"] = fmt.Sprintf("0x%08x", l.Tags().Dst)
		w["forgive.src_tag"] = fmt.Sprintf("0x%08x", l.Tags().Src)
	}
	switch l.Type {
	case wire.TypeData:
		d := l.Data
		w["forgive.flags"] = hex8(d.Flags)
		w["forgive.flow"] = fmt.Sprint(d.Flow)
		w["forgive.psn"] = fmt.Sprint(uint32(d.PSN))
		w["forgive.entropy"] = fmt.Sprintf("0x%04x", d.Entropy)
		w["forgive.msg"] = fmt.Sprint(d.Msg)
		w["forgive.offset"] = fmt.Sprint(d.Offset)
		w["forgive.msg_len"] = fmt.Sprint(d.MsgLen)
		w["forgive.payload_len"] = fmt.Sprint(l.PayloadLen)
		w["forgive.subflows"] = fmt.Sprint(d.Subflows)
		w["forgive.trimmed"] = bit(l.Trimmed())
		w["forgive.flags.trimmed"] = bit(l.Trimmed())
		w["forgive.flags.retx"] = bit(d.Flags&wire.DataRetx != 0)
		if l.Trimmed() {
			w["_ws.expert.message"] = fmt.Sprintf("Trimmed: bytes [%d,%d) of message %d are missing",
				d.Offset, d.Offset+uint32(l.PayloadLen), d.Msg)
		} else {
			w["data.len"] = fmt.Sprint(len(e.payload))
		}
	case wire.TypeAck:
		a := l.Ack
		feedback(w, a.Flags)
		w["forgive.flow"] = fmt.Sprint(a.Flow)
		w["forgive.ack.cum_psn"] = fmt.Sprint(uint32(a.CumPSN))
		w["forgive.ack.sack_base"] = fmt.Sprint(uint32(a.SackBase))
		w["forgive.ack.sack"] = fmt.Sprintf("0x%016x", a.Sack)
		w["forgive.ack.echo_psn"] = fmt.Sprint(uint32(a.EchoPSN))
		var sacked []string
		for i := range wire.SackBits {
			if a.Sack&(1<<i) != 0 {
				sacked = append(sacked, fmt.Sprint(uint32(a.SackBase.Add(uint32(i)))))
			}
		}
		w["forgive.ack.sacked_psn"] = strings.Join(sacked, ",")
	case wire.TypeNack:
		n := l.Nack
		feedback(w, n.Flags)
		w["forgive.flow"] = fmt.Sprint(n.Flow)
		w["forgive.psn"] = fmt.Sprint(uint32(n.PSN))
		w["forgive.msg"] = fmt.Sprint(n.Msg)
		w["forgive.offset"] = fmt.Sprint(n.Offset)
		w["forgive.nack.reason"] = hex8(uint8(n.Reason))
		w["forgive.nack.priority"] = fmt.Sprint(n.Priority)
		w["forgive.nack.count"] = fmt.Sprint(n.Count)
		w["forgive.nack.length"] = fmt.Sprint(n.Length)
	case wire.TypeCNP:
		w["forgive.flow"] = fmt.Sprint(l.CNP.Flow)
		w["forgive.psn"] = fmt.Sprint(uint32(l.CNP.PSN))
	case wire.TypeProbe:
		p := l.Probe
		w["forgive.flow"] = fmt.Sprint(p.Flow)
		w["forgive.psn"] = fmt.Sprint(uint32(p.PSN))
		w["forgive.entropy"] = fmt.Sprintf("0x%04x", p.Entropy)
		w["forgive.probe.kind"] = fmt.Sprint(uint8(p.Kind))
		w["forgive.probe.subflow"] = fmt.Sprint(p.Subflow)
		w["forgive.subflows"] = fmt.Sprint(p.Subflows)
	case wire.TypeConnect, wire.TypeAccept:
		w["forgive.flow"] = fmt.Sprint(l.Connect.Flow)
	case wire.TypePause:
		w["forgive.pause.class_mask"] = hex8(l.Pause.ClassMask)
		w["forgive.pause.micros"] = fmt.Sprint(l.Pause.Micros)
		w["forgive.pause.class2"] = bit(l.Pause.ClassMask&(1<<2) != 0)
	}
	return w
}

// feedback fills the columns of the flags ACK and NACK share.
func feedback(w map[string]string, flags uint8) {
	w["forgive.flags"] = hex8(flags)
	w["forgive.flags.ecn_echo"] = bit(flags&wire.FlagECNEcho != 0)
	w["forgive.flags.eligible"] = bit(flags&wire.FlagEligible != 0)
	w["forgive.flags.exhausted"] = bit(flags&wire.FlagExhausted != 0)
}

func hex8(v uint8) string { return fmt.Sprintf("0x%02x", v) }

func bit(b bool) string {
	if b {
		return "1"
	}
	return "0"
}

// normalizeBool maps the True/False that newer tshark versions print for
// boolean fields to the 1/0 older ones print.
func normalizeBool(s string) string {
	switch s {
	case "True":
		return "1"
	case "False":
		return "0"
	}
	return s
}

// writePcap writes the Ethernet frames to path.
func writePcap(t *testing.T, path string, frames [][]byte) {
	t.Helper()
	var buf bytes.Buffer
	w := pcapgo.NewWriter(&buf)
	if err := w.WriteFileHeader(65536, layers.LinkTypeEthernet); err != nil {
		t.Fatal(err)
	}
	stamp := time.Unix(1_700_000_000, 0) // any fixed capture time
	for i, b := range frames {
		ci := gopacket.CaptureInfo{Timestamp: stamp.Add(time.Duration(i) * time.Microsecond),
			CaptureLength: len(b), Length: len(b)}
		if err := w.WritePacket(ci, b); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}

// luaScript returns the path of the dissector, found from this file's own
// location so the test runs from any working directory.
func luaScript(t *testing.T) string {
	_, self, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the test source")
	}
	p := filepath.Join(filepath.Dir(self), "..", "..", "deploy", "wireshark", "forgive.lua")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("dissector not found: %v", err)
	}
	return p
}
