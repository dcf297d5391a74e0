package reliability

import (
	"testing"

	"github.com/forgive-emu/forgive/wire"
)

const testFlow = 7

var testInfo = FlowInfo{Flow: testFlow, Local: 2, Peer: 1}

// trimCall and arrivalCall record what a Receiver told its Decider.
type trimCall struct {
	msg              uint32
	missing, newlyOS int64
}

type arrivalCall struct {
	msg             uint32
	newly, fromOSBy int64
}

type answer struct{ forgive, counted bool }

// fakeDecider records every call and answers OnTrim from a script
// (refusing, uncounted, once the script runs out).
type fakeDecider struct {
	trims     []trimCall
	arrivals  []arrivalCall
	script    []answer
	eligible  bool
	exhausted bool
}

func (d *fakeDecider) OnTrim(flow, msg uint32, missing, newlyOutstanding int64) (bool, bool) {
	d.trims = append(d.trims, trimCall{msg, missing, newlyOutstanding})
	if len(d.script) == 0 {
		return false, false
	}
	a := d.script[0]
	d.script = d.script[1:]
	return a.forgive, a.counted
}

func (d *fakeDecider) OnArrival(flow, msg uint32, newlyReceived, fromOutstanding int64) {
	d.arrivals = append(d.arrivals, arrivalCall{msg, newlyReceived, fromOutstanding})
}

func (d *fakeDecider) Flags(flow, msg uint32) (bool, bool) { return d.eligible, d.exhausted }

func (d *fakeDecider) answer(forgive, counted bool) {
	d.script = append(d.script, answer{forgive, counted})
}

// data returns the header of an untrimmed data packet.
func data(psn wire.PSN, msg, off, n, msgLen uint32) DataHeader {
	return DataHeader{PSN: psn, Msg: msg, Offset: off, PayloadLen: n, MsgLen: msgLen}
}

// trimmed returns the header of the same packet after a switch trimmed it.
func trimmed(psn wire.PSN, msg, off, n, msgLen uint32) DataHeader {
	h := data(psn, msg, off, n, msgLen)
	h.Flags |= wire.DataTrimmed
	return h
}

func newReceiver(t testing.TB, d Decider, edit func(*ReceiverConfig)) *Receiver {
	t.Helper()
	cfg := DefaultReceiverConfig()
	if edit != nil {
		edit(&cfg)
	}
	r, err := NewReceiver(testInfo, cfg, d)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newSender(t testing.TB, edit func(*SenderConfig)) *Sender {
	t.Helper()
	cfg := DefaultSenderConfig()
	if edit != nil {
		edit(&cfg)
	}
	s, err := NewSender(FlowInfo{Flow: testFlow, Local: 1, Peer: 2}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// mustPacket hands a packet to r and fails on error.
func mustPacket(t testing.TB, r *Receiver, h DataHeader) Result {
	t.Helper()
	res, err := r.OnPacket(0, h)
	if err != nil {
		t.Fatalf("PSN %d: %v", h.PSN, err)
	}
	return res
}

// takeAcks returns and clears the receiver's ACKs.
func takeAcks(r *Receiver) []wire.AckFields {
	a := append([]wire.AckFields(nil), r.Out.Acks...)
	r.Out.Acks = r.Out.Acks[:0]
	return a
}

// takeNacks returns and clears the receiver's NACKs.
func takeNacks(r *Receiver) []wire.NackFields {
	n := append([]wire.NackFields(nil), r.Out.Nacks...)
	r.Out.Nacks = r.Out.Nacks[:0]
	return n
}

func wantStates(t testing.TB, sb *Scoreboard, want map[uint32]State) {
	t.Helper()
	for off, st := range want {
		if got := sb.StateAt(off); got != st {
			t.Errorf("byte %d is %v, want %v", off, got, st)
		}
	}
}
