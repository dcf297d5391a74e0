package nic

import (
	"math/rand/v2"
	"testing"

	"github.com/forgive-emu/forgive/wire"
)

// TestValidateAgreesWithWire mutates valid packets of every type (bytes
// flipped, cut short, extended, sealed flag set) and requires the
// receive path's validate to give wire.Validate's type and error for
// each.
func TestValidateAgreesWithWire(t *testing.T) {
	tags := wire.Tags{Dst: 7, Src: 9}
	data, err := wire.AppendData(nil, wire.DataFields{Flags: wire.DataFirst, Src: 1, Dst: 2, Flow: 3, Tags: tags,
		PSN: 100, Msg: 4, Offset: 8, MsgLen: 64}, make([]byte, 16))
	if err != nil {
		t.Fatal(err)
	}
	trimmed, err := wire.Trim(append([]byte(nil), data...))
	if err != nil {
		t.Fatal(err)
	}
	seeds := [][]byte{
		data, trimmed,
		wire.AppendAck(nil, wire.AckFields{Flags: wire.FlagECNEcho, Src: 2, Dst: 1, Flow: 3, Tags: tags, CumPSN: 100, SackBase: 100, Sack: 6, EchoPSN: 102}),
		wire.AppendNack(nil, wire.NackFields{Src: 2, Dst: 1, Flow: 3, Tags: tags, PSN: 5, Count: 1}),
		wire.AppendCNPFields(nil, wire.CNPFields{Src: 2, Dst: 1, Flow: 3, Tags: tags, PSN: 5}),
		wire.AppendProbe(nil, wire.ProbeFields{Kind: wire.ProbeTail, Src: 1, Dst: 2, Flow: 3, Tags: tags, PSN: 5, Subflows: 1}),
		wire.AppendConnect(nil, wire.ConnectFields{Src: 1, Dst: 2, Flow: 3, Tags: tags}),
		wire.AppendPause(nil, 1, 10),
	}
	rng := rand.New(rand.NewPCG(1, 2))
	checked := map[wire.Type]int{}
	accepted := 0
	for _, seed := range seeds {
		for i := range 3000 {
			p := append([]byte(nil), seed...)
			if i > 0 {
				for range 1 + rng.IntN(3) {
					switch rng.IntN(5) {
					case 0:
						p = p[:rng.IntN(len(p)+1)]
					case 1:
						p = append(p, byte(rng.Uint32()))
					case 2:
						if len(p) > 1 {
							p[1] ^= wire.FlagSealed
						}
					default:
						if len(p) > 0 {
							p[rng.IntN(len(p))] ^= byte(1 << rng.IntN(8))
						}
					}
				}
			}
			gotT, gotErr := validate(p)
			wantT, wantErr := wire.Validate(p)
			if gotT != wantT || (gotErr == nil) != (wantErr == nil) ||
				(gotErr != nil && gotErr.Error() != wantErr.Error()) {
				t.Fatalf("% x: validate = %v, %v; wire.Validate = %v, %v", p, gotT, gotErr, wantT, wantErr)
			}
			checked[wantT]++
			if wantErr == nil {
				accepted++
			}
		}
	}
	if checked[wire.TypeData] == 0 || checked[wire.TypeAck] == 0 || accepted < len(seeds) {
		t.Fatalf("too few cases: %v by type, %d accepted", checked, accepted)
	}
}
