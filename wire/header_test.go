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
		var wantTags Tags
		switch s.typ {
		case TypeData:
			wantFlow, wantEntropy, wantTags = Data(s.b).Flow(), Data(s.b).Entropy(), Data(s.b).Fields().Tags
		case TypeAck:
			wantFlow, wantTags = Ack(s.b).Flow(), Ack(s.b).Fields().Tags
		case TypeNack:
			wantFlow, wantTags = Nack(s.b).Flow(), Nack(s.b).Fields().Tags
		case TypeCNP:
			wantFlow, wantTags = CNP(s.b).Flow(), CNP(s.b).Fields().Tags
		case TypeProbe:
			wantFlow, wantEntropy, wantTags = Probe(s.b).Flow(), Probe(s.b).Entropy(), Probe(s.b).Fields().Tags
		case TypeConnect, TypeAccept:
			wantFlow, wantTags = Connect(s.b).Flow(), Connect(s.b).Fields().Tags
		}
		tags, hasTags := h.Tags()
		if hasTags != (s.typ != TypePause) || tags != wantTags {
			t.Errorf("%s: Tags() = %+v, %v; want %+v", s.name, tags, hasTags, wantTags)
		}
		if s.typ != TypePause && wantTags.Src == 0 {
			t.Errorf("%s: the sample's source tag is zero, which proves nothing", s.name)
		}
		if s.typ != TypePause {
			c := append([]byte(nil), s.b...)
			if !Header(c).SetTags(Tags{Dst: 7, Src: 8}) {
				t.Errorf("%s: SetTags refused", s.name)
			} else if got, _ := Header(c).Tags(); got != (Tags{Dst: 7, Src: 8}) {
				t.Errorf("%s: after SetTags, Tags() = %+v", s.name, got)
			}
		} else if Header(s.b).SetTags(Tags{Dst: 7}) {
			t.Errorf("%s: SetTags wrote tags into a PAUSE", s.name)
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
