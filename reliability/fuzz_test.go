package reliability

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/wire"
)

// fuzzReader hands out the fuzzer's bytes, zeros once they run out.
type fuzzReader struct{ b []byte }

func (f *fuzzReader) more() bool { return len(f.b) > 0 }

func (f *fuzzReader) u8() uint8 {
	if len(f.b) == 0 {
		return 0
	}
	v := f.b[0]
	f.b = f.b[1:]
	return v
}

func (f *fuzzReader) u16() uint16 { return uint16(f.u8())<<8 | uint16(f.u8()) }

func (f *fuzzReader) bytes(n int) []byte {
	n = min(n, len(f.b))
	v := f.b[:n]
	f.b = f.b[n:]
	return v
}

// fuzzDecider answers from the fuzzer's bytes.
type fuzzDecider struct{ in *fuzzReader }

func (d fuzzDecider) OnTrim(flow, msg uint32, missing, newlyOutstanding int64) (bool, bool) {
	v := d.in.u8()
	return v&1 != 0, v&2 != 0
}
func (d fuzzDecider) OnArrival(flow, msg uint32, newlyReceived, fromOutstanding int64) {}
func (d fuzzDecider) Flags(flow, msg uint32) (bool, bool)                              { return msg&1 != 0, msg&2 != 0 }

// fuzzHeader decodes a data header over small value ranges, so that PSNs,
// messages and byte ranges collide often.
func fuzzHeader(in *fuzzReader) DataHeader {
	h := DataHeader{
		PSN: wire.PSN(in.u8()), Msg: uint32(in.u8() % 4), Offset: uint32(in.u16() % 5000),
		PayloadLen: uint32(in.u16() % 5000), MsgLen: uint32(in.u16() % 10000),
		Flags: in.u8(), Subflows: in.u8() % 9,
	}
	h.CE = h.Flags&0x80 != 0
	return h
}

// FuzzReceiver feeds a Receiver arbitrary sequences of events, decoded or
// garbage: it must never panic, and its cumulative PSN never goes back.
func FuzzReceiver(f *testing.F) {
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 100, 0, 200, 0, 1})
	f.Add([]byte{1, 1, 3, 0, 0, 0, 10, 0, 100, 0, 16, 1, 0, 2, 0, 0, 5})
	f.Add([]byte{0x40, 2, 1, 9, 4, 2, 3, 0, 0, 0, 40})
	pkt, _ := wire.AppendData(nil, wire.DataFields{PSN: 0, Msg: 1, MsgLen: 10}, make([]byte, 10))
	f.Add(append([]byte{0, 4, byte(len(pkt))}, pkt...))
	f.Fuzz(func(t *testing.T, b []byte) {
		in := &fuzzReader{b: b}
		cfg := DefaultReceiverConfig()
		mode := in.u8()
		cfg.Mode = Mode(mode & 1)
		cfg.SprayPerPacket = mode&2 != 0
		cfg.AckEvery = 1 + int(mode>>2)*512
		cfg.MaxMessages = 3
		r, err := NewReceiver(testInfo, cfg, fuzzDecider{in})
		if err != nil {
			t.Fatal(err)
		}
		var now time.Duration
		cum := r.CumPSN()
		for in.more() {
			fuzzEvent(r, in, &now)
			if r.CumPSN().Before(cum) {
				t.Fatalf("cumulative PSN went back from %d to %d", cum, r.CumPSN())
			}
			cum = r.CumPSN()
			r.Out.Reset()
		}
	})
}

func fuzzEvent(r *Receiver, in *fuzzReader, now *time.Duration) {
	switch in.u8() % 5 {
	case 0:
		_, _ = r.OnData(*now, fuzzHeader(in))
	case 1:
		h := fuzzHeader(in)
		h.Flags |= wire.DataTrimmed
		_, _ = r.OnPacket(*now, h)
	case 2:
		_ = r.OnProbe(*now, wire.ProbeFields{Kind: wire.ProbeKind(in.u8() % 4), Flow: testFlow,
			PSN: wire.PSN(in.u8()), Subflow: in.u8() % 9, Subflows: in.u8() % 9})
	case 3:
		*now += time.Duration(in.u16()) * time.Microsecond
		r.OnTimer(*now)
	case 4:
		raw := in.bytes(int(in.u8()))
		switch typ, err := wire.Validate(raw); {
		case err != nil:
		case typ == wire.TypeData:
			d, _ := wire.ParseData(raw)
			_, _ = r.OnPacket(*now, HeaderOf(d, false))
		case typ == wire.TypeProbe:
			p, _ := wire.ParseProbe(raw)
			_ = r.OnProbe(*now, p.Fields())
		}
	}
}

// FuzzSender feeds a Sender posts, sends, timers and arbitrary ACKs and
// NACKs: it must never panic, never report more in flight than it sent,
// and never let una pass the next PSN.
func FuzzSender(f *testing.F) {
	f.Add([]byte{0, 1, 10, 1, 1, 1, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 3})
	f.Add([]byte{1, 1, 200, 1, 1, 1, 1, 3, 0, 0, 0, 2, 0, 1, 4, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		in := &fuzzReader{b: b}
		cfg := DefaultSenderConfig()
		mode := in.u8()
		cfg.Mode = Mode(mode & 1)
		cfg.MTU = 1 + int(mode>>1)*40
		cfg.Subflows = 1 << (in.u8() % 4)
		cfg.RetxProbe, cfg.ProbeEvery = true, 3
		s, err := NewSender(FlowInfo{Flow: testFlow}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		var now time.Duration
		msg := uint32(0)
		for in.more() {
			switch in.u8() % 5 {
			case 0:
				msg++
				_ = s.Post(msg, uint32(in.u16()))
			case 1:
				for range in.u8() % 16 {
					s.Next(now)
				}
			case 2:
				raw := in.bytes(12)
				var w [12]byte
				copy(w[:], raw)
				_, _ = s.OnAck(now, wire.AckFields{Flow: testFlow, Flags: w[0],
					CumPSN: wire.PSN(w[1]), SackBase: wire.PSN(w[2]), Sack: binary.BigEndian.Uint64(w[3:11]), EchoPSN: wire.PSN(w[11])})
			case 3:
				_, _ = s.OnNack(now, wire.NackFields{Flow: testFlow, Reason: wire.NackReason(in.u8()),
					PSN: wire.PSN(in.u8()), Count: uint16(in.u8() % 8), Msg: uint32(in.u8() % 4),
					Offset: uint32(in.u16()), Length: uint32(in.u16())})
			case 4:
				now += time.Duration(in.u16()) * time.Microsecond
				s.OnTimer(now)
			}
			if s.InFlight() < 0 || s.InFlight() > int(s.NextPSN().Sub(s.Una())) || s.Una().After(s.NextPSN()) {
				t.Fatalf("in flight %d, una %d, next %d", s.InFlight(), s.Una(), s.NextPSN())
			}
			s.Out.Reset()
		}
	})
}
