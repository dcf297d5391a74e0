package wire

import "testing"

// The prefix view reads the flow id and the entropy of every packet as its
// own type's view does: one accessor for a switch's ECMP hash and a NIC's
// flow lookup, instead of decoding bytes by hand.
func TestHeaderReadsFlowAndEntropyOfEveryType(t *testing.T) {
	for _, s := range samples(t) {
		h := Header(s.b)
		flow, hasFlow := h.Flow()
		entropy, hasEntropy := h.Entropy()
		var wantFlow uint32
		var wantEntropy uint16
		switch s.typ {
		case TypeData:
			wantFlow, wantEntropy = Data(s.b).Flow(), Data(s.b).Entropy()
		case TypeAck:
			wantFlow = Ack(s.b).Flow()
		case TypeNack:
			wantFlow = Nack(s.b).Flow()
		case TypeCNP:
			wantFlow = CNP(s.b).Flow()
		case TypeProbe:
			wantFlow, wantEntropy = Probe(s.b).Flow(), Probe(s.b).Entropy()
		}
		if hasFlow != (s.typ != TypePause) || flow != wantFlow {
			t.Errorf("%s: Flow() = %d, %v; want %d", s.name, flow, hasFlow, wantFlow)
		}
		if hasEntropy != (s.typ == TypeData || s.typ == TypeProbe) || entropy != wantEntropy {
			t.Errorf("%s: Entropy() = %d, %v; want %d", s.name, entropy, hasEntropy, wantEntropy)
		}
		if s.typ != TypePause && wantFlow == 0 {
			t.Errorf("%s: the sample's flow id is zero, which proves nothing", s.name)
		}
	}
	if _, ok := Header(make([]byte, 4)).Flow(); ok {
		t.Error("a 4-byte packet has a flow id")
	}
}
