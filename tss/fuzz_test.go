package tss

import (
	"bytes"
	"maps"
	"slices"
	"testing"

	"github.com/forgive-emu/forgive/wire"
)

// Open never panics, refuses with a named reason, and opens only what was
// sealed: a fuzzer cannot forge a packet, so anything that opens is one of
// the seeds, unchanged or trimmed.
func FuzzOpen(f *testing.F) {
	k := ring(f, domA, domB)
	// A fixed nonce prefix: the fuzzing workers rebuild the same seeds.
	s, err := NewSealer(k, bytes.NewReader(make([]byte, 16)), 1)
	if err != nil {
		f.Fatal(err)
	}
	var seeds [][]byte
	packets := plainPackets(f, 200)
	for _, name := range slices.Sorted(maps.Keys(packets)) { // the same order in every worker
		b := mustSeal(f, s, packets[name])
		seeds = append(seeds, b)
		if wire.Sealed(b) {
			if tr, err := wire.Trim(bytes.Clone(b)); err == nil {
				seeds = append(seeds, tr)
			}
		}
	}
	for _, b := range seeds {
		f.Add(b)
	}
	f.Add([]byte{})
	f.Add(make([]byte, wire.DataLen+wire.SealExtLen))
	f.Fuzz(func(t *testing.T, b []byte) {
		// A fresh Opener for each input: one that opened a seed before
		// refuses it again as a replay.
		o := NewOpener(k)
		out, _, err := o.Open(make([]byte, 0, len(b)), b)
		if err != nil {
			if Reason(err) == "" {
				t.Fatalf("refusal without a reason: %v", err)
			}
			return
		}
		for _, sd := range seeds {
			if bytes.Equal(b, sd) {
				if _, err := wire.Validate(out); err != nil {
					t.Fatalf("opened a seed into an invalid packet: %v", err)
				}
				return
			}
		}
		t.Fatalf("opened a packet that was never sealed: %x", b)
	})
}
