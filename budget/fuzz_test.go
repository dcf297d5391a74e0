package budget

import (
	"encoding/binary"
	"math/rand/v2"
	"testing"
)

// FuzzLedger drives a ledger with arbitrary configs and arbitrary, mostly
// inconsistent, call sequences. Whatever the caller reports, the ledger
// must not panic and every step it knows must keep its invariants.
func FuzzLedger(f *testing.F) {
	f.Add(0.005, 0.1, 1.0, false, []byte{0, 1, 0, 0, 16, 0, 0, 0, 0, 2, 1, 0, 0, 4, 0, 0, 0, 4, 1, 1, 0, 0, 1, 0, 0, 1})
	f.Add(0.5, 1.0, 0.25, true, []byte("\x00\x02\x00\x00\xff\xff\x01\x02\x03\x01\x02"))
	f.Add(0.2, 0.05, 1.0, false, []byte{5, 1, 0, 0, 0, 0, 0, 1, 0, 2, 1, 0, 0, 1, 0, 0, 0, 0, 15, 1, 0, 16, 0, 0, 16, 0, 0, 6, 1, 1, 0, 0, 0, 0, 0, 0})
	// The last op a trim with its phase (op 7): the harness once indexed
	// the consumed input for its phase and panicked here.
	f.Add(0.2, 0.05, 1.0, false, []byte{0, 1, 0, 0, 0, 64, 0, 0, 0, 7 | 2<<3, 1, 16, 0, 0, 0, 16, 0, 0})
	f.Fuzz(func(t *testing.T, pLow, pHigh, p float64, noVesting bool, ops []byte) {
		cfg := Config{PLow: pLow, PHigh: pHigh, P: p, PacketBytes: DefaultPacketBytes, NoVesting: noVesting,
			Gather: GatherPolicy(len(ops) % int(NumGatherPolicies))}
		l, err := NewLedger(cfg, rand.New(rand.NewPCG(uint64(len(ops)), 1)))
		if err != nil {
			return // Validate refused it, which is all a bad config may do
		}
		for len(ops) >= 9 {
			// Everything the op reads is taken from its own 9 bytes before
			// they are consumed: the phase of op 7 once read ops[0] after
			// the slice had moved on, and panicked on the last op.
			op, step := ops[0]%8, StepID(ops[1]%8)
			phase := Phase(ops[0]>>3) % (NumPhases + 1)
			a := int64(int32(binary.LittleEndian.Uint32(ops[1:5])))
			c := int64(int32(binary.LittleEndian.Uint32(ops[5:9])))
			ops = ops[9:]
			switch op {
			case 0:
				_ = l.OnStepBegin(step, a%2 == 0, c)
			case 1:
				l.OnTrim(step, a, c)
			case 2:
				_ = l.OnArrival(step, a, c)
			case 3:
				l.OnAllReduceComplete(step)
			case 4:
				l.Flags(step)
			case 5:
				_ = l.OnStepOpenAt(0, step, c)
			case 6:
				_ = l.OnStepClassifyAt(0, step, a%2 == 0, c)
			case 7:
				l.OnTrimPhaseAt(0, step, phase, a, c)
			}
			for s := StepID(0); s < 8; s++ {
				if _, ok := l.Record(s); ok {
					if err := l.CheckInvariants(s); err != nil {
						t.Fatal(err)
					}
				}
			}
		}
	})
}
