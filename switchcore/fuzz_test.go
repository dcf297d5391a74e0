package switchcore

import (
	"testing"
	"time"

	"github.com/forgive-emu/forgive/wire"
)

// fuzzConfig is a small busy switch with every mechanism on: three ports,
// NDP trimming into tiny buffers, marking, PFC with a watchdog, a lossy
// link, and ECMP.
func fuzzConfig() Config {
	port := PortConfig{Rate: gbps, Delay: 500, Overhead: 20, DataCap: 4000, HeaderCap: 300, Trim: TrimNDP,
		ECN: ECNConfig{Enabled: true, KMin: 500, KMax: 3000, PMax: 0.3}}
	cfg := Config{
		Ports:  []PortConfig{port, port, port},
		Routes: map[uint16][]PortID{1: {0}, 2: {1}, 3: {2}, 50: {0, 1, 2}},
		Seed:   42,
	}
	cfg.Ports[2].Fault = FaultConfig{Loss: 0.2, Jitter: 100}
	cfg.PFC[dataPrio] = PFCConfig{Enabled: true, XOff: 2000, XOn: 500, PauseTime: 5 * time.Microsecond,
		WatchdogLimit: 30 * time.Microsecond}
	return cfg
}

func fuzzSeeds() [][]byte {
	trimmed, _ := wire.Trim(dataPacket(1, 2, 1, 0, 0, 50))
	return [][]byte{
		dataPacket(1, 2, 1, 0, 0, 100),
		dataPacket(1, 50, 1, 3, 9, 0),
		trimmed,
		ackPacket(2, 1, 1),
		wire.AppendCNP(nil, 2, 1, 1, 0),
		wire.AppendNack(nil, wire.NackFields{Reason: wire.NackTrimmed, Src: 2, Dst: 1, Flow: 1}),
		wire.AppendProbe(nil, wire.ProbeFields{Kind: wire.ProbeTail, Src: 1, Dst: 2, Flow: 1}),
		wire.AppendPause(nil, 1<<dataPrio, 3),
		wire.AppendPause(nil, 0xFF, 0),
		{0x11, 0, 0, 0, 0, 0, 0, 2},
	}
}

// FuzzClassify: any bytes, TOS and ingress port are classified without a
// panic; the switch drops as malformed exactly what wire.Validate rejects,
// and conserves packets and bytes.
func FuzzClassify(f *testing.F) {
	for _, b := range fuzzSeeds() {
		f.Add(b, uint8(tosData), uint8(0))
	}
	f.Fuzz(func(t *testing.T, b []byte, tos uint8, in uint8) {
		h := newHarness(t, fuzzConfig())
		port := PortID(in % 4) // port 3 does not exist
		r := h.recv(port, b, tos)
		_, err := wire.Validate(b)
		if wantMalformed := err != nil || port == 3; (r == DropMalformed) != wantMalformed {
			t.Fatalf("Receive = %v, wire.Validate = %v", r, err)
		}
		checkInvariants(t, h.sw)
		h.settle()
		checkInvariants(t, h.sw)
		if len(h.owned) != 0 {
			t.Fatal("buffer never came back")
		}
	})
}

// FuzzReceive: a stream of arbitrary packets at arbitrary times never
// panics, and bytes are conserved and occupancy bounded after every one.
// Each record is [port][tos][gap][length][bytes...].
func FuzzReceive(f *testing.F) {
	var stream []byte
	for i, b := range fuzzSeeds() {
		stream = append(stream, byte(i%3), tosData, byte(i*7), byte(len(b)))
		stream = append(stream, b...)
	}
	f.Add(stream)
	f.Fuzz(func(t *testing.T, stream []byte) {
		h := newHarness(t, fuzzConfig())
		for len(stream) >= 4 {
			port, tos, gap, n := PortID(stream[0]%4), stream[1], stream[2], int(stream[3])
			stream = stream[4:]
			n = min(n, len(stream))
			b := append([]byte(nil), stream[:n]...)
			stream = stream[n:]
			h.advance(h.now + time.Duration(gap)*20)
			h.recv(port, b, tos)
			checkInvariants(t, h.sw)
		}
		h.settle()
		checkInvariants(t, h.sw)
		if fl := inFlight(h.sw); fl.Packets != 0 || len(h.owned) != 0 {
			t.Fatalf("idle switch holds %d packets, %d buffers not returned", fl.Packets, len(h.owned))
		}
	})
}
