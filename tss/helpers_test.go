package tss

import (
	"bytes"
	"crypto/rand"
	"sync/atomic"
	"testing"

	"github.com/forgive-emu/forgive/wire"
)

// Hosts 3 and 9 share domain 7; host 5 is alone in domain 8.
var (
	keyA = Key{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32}
	keyB = Key{0xB0, 0xB1, 0xB2, 0xB3, 0xB4, 0xB5, 0xB6, 0xB7, 0xB8, 0xB9, 0xBA, 0xBB, 0xBC, 0xBD, 0xBE, 0xBF,
		0xC0, 0xC1, 0xC2, 0xC3, 0xC4, 0xC5, 0xC6, 0xC7, 0xC8, 0xC9, 0xCA, 0xCB, 0xCC, 0xCD, 0xCE, 0xCF}
	domA = Domain{ID: 7, Key: keyA, Hosts: []uint16{3, 9}}
	domB = Domain{ID: 8, Key: keyB, Hosts: []uint16{5}}
)

func ring(t testing.TB, ds ...Domain) *Keyring {
	t.Helper()
	k, err := NewKeyring(ds...)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// epochs numbers the Sealers the tests make, as the daemon's start times
// do: each is a later start than the one before.
var epochs atomic.Uint64

func sealer(t testing.TB, k *Keyring) *Sealer {
	t.Helper()
	s, err := NewSealer(k, rand.Reader, epochs.Add(1))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func payload(n int) []byte {
	p := make([]byte, n)
	for i := range p {
		p[i] = byte(i*7 + 1)
	}
	return p
}

var dataFields = wire.DataFields{Flags: wire.DataFirst | wire.DataAckReq, Entropy: 0xBEEF, Src: 3, Dst: 9,
	Flow: 0x01020304, Tags: wire.Tags{Dst: 0x0BADF00D, Src: 0xA1B2C3D4}, PSN: 1000, Msg: 77, Offset: 8192, MsgLen: 1 << 20, Subflows: 4}

// plainPackets returns one plain packet of every sealable type from host 3
// to host 9, DATA with a payload of n bytes.
func plainPackets(t testing.TB, n int) map[string][]byte {
	t.Helper()
	data, err := wire.AppendData(nil, dataFields, payload(n))
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := wire.AppendDataHeader(nil, wire.DataFields{Flags: wire.DataLast | wire.DataTrimmed, Src: 3, Dst: 9,
		Flow: 1, PSN: 5, MsgLen: 100}, 100)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"DATA":         data,
		"trimmed DATA": hdr,
		"ACK": wire.AppendAck(nil, wire.AckFields{Flags: wire.FlagECNEcho | wire.FlagEligible, Src: 3, Dst: 9,
			Flow: 0x01020304, CumPSN: 100, SackBase: 101, Sack: 0x8000_0000_0000_0005, EchoPSN: 164}),
		"NACK": wire.AppendNack(nil, wire.NackFields{Flags: wire.FlagEligible, Reason: wire.NackTrimmed,
			Priority: wire.PriorityHigh, Src: 3, Dst: 9, Flow: 0x01020304, PSN: 4000, Count: 1, Msg: 77,
			Offset: 8192, Length: 4096}),
		"CNP": wire.AppendCNP(nil, 3, 9, 0x01020304, 4001),
		"PROBE": wire.AppendProbe(nil, wire.ProbeFields{Kind: wire.ProbeTail, Entropy: 0xCAFE, Src: 3, Dst: 9,
			Flow: 0x01020304, PSN: 4002, Subflow: 2, Subflows: 4}),
		"CONNECT": wire.AppendConnect(nil, wire.ConnectFields{Src: 3, Dst: 9, Flow: 0x01020304,
			Tags: wire.Tags{Src: 0xA1B2C3D4}}),
		"ACCEPT": wire.AppendConnect(nil, wire.ConnectFields{Accept: true, Src: 3, Dst: 9, Flow: 0x01020304,
			Tags: wire.Tags{Dst: 0x0BADF00D, Src: 0xA1B2C3D4}}),
	}
}

func mustSeal(t testing.TB, s *Sealer, p []byte) []byte {
	t.Helper()
	b, err := s.Seal(nil, p)
	if err != nil {
		t.Fatalf("Seal: %v", err)
	}
	return b
}

func mustOpen(t testing.TB, o *Opener, b []byte) ([]byte, Opened) {
	t.Helper()
	p, info, err := o.Open(nil, b)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	return p, info
}

// trim trims a copy of b as a switch does, without any key.
func trim(t testing.TB, b []byte) []byte {
	t.Helper()
	c, err := wire.Trim(bytes.Clone(b))
	if err != nil {
		t.Fatalf("Trim: %v", err)
	}
	return c
}
