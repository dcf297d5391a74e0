package workload

import (
	"encoding/binary"
	"math"
	"math/bits"
	"math/rand/v2"
	"sync/atomic"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/internal/splitmix"
)

// hash folds a tuple through SplitMix64 one field at a time: its
// finalizer is a bijection with full avalanche, so the values look
// independent.
func hash(fields ...uint64) uint64 {
	var h uint64
	for _, f := range fields {
		h = splitmix.Next(h ^ f)
	}
	return h
}

// gradientValue is element e of rank's gradient on step: an integer in
// [-32, 31]. Sums of up to 2^18 of them stay below 2^24 in magnitude, so
// float32 adds them exactly in any order.
func gradientValue(seed uint64, step, rank, e int) float32 {
	return elementValue(gradientPrefix(seed, step, rank), e)
}

// gradientPrefix is the hash of (seed, step, rank), which every element's
// value continues: hashing folds one field at a time.
func gradientPrefix(seed uint64, step, rank int) uint64 {
	return hash(seed, uint64(step), uint64(rank))
}

func elementValue(prefix uint64, e int) float32 {
	return float32(int(splitmix.Next(prefix^uint64(e))&63) - 32)
}

// fillGradient writes rank's gradient for step into acc.
func fillGradient(acc []byte, seed uint64, step, rank int) {
	prefix := gradientPrefix(seed, step, rank)
	for e := range len(acc) / 4 {
		putFloat(acc, e, elementValue(prefix, e))
	}
}

// exactSum is the all-reduced value of element e, given every rank's
// gradientPrefix of the step.
func exactSum(prefixes []uint64, e int) float32 {
	var s float32
	for _, p := range prefixes {
		s += elementValue(p, e)
	}
	return s
}

func getFloat(b []byte, e int) float32 {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[4*e:]))
}

func putFloat(b []byte, e int, v float32) {
	binary.LittleEndian.PutUint32(b[4*e:], math.Float32bits(v))
}

// addFloats adds src into dst elementwise (both float32 arrays as bytes).
func addFloats(dst, src []byte) {
	for e := range len(src) / 4 {
		putFloat(dst, e, getFloat(dst, e)+getFloat(src, e))
	}
}

// Payload kinds: which non-gradient message a payload belongs to.
const (
	payloadTensor = iota + 1
	payloadPipeline
	payloadBurst
)

// payloads generates the non-gradient messages. Each kind has a random
// base pattern, made once per run from the seed; a message's payload is
// its kind's base XOR a 64-bit word of (seed, step, kind, sender), so it
// differs for every step and sender, and the receiver checks every byte
// against it without generating anything. The bases are read-only once
// made, so ranks on several goroutines share them.
type payloads struct {
	seed uint64
	base [payloadBurst + 1][]byte
}

func newPayloads(seed uint64, sizes map[int]int) *payloads {
	ps := &payloads{seed: seed}
	for kind, n := range sizes {
		var key [32]byte
		for i := range 4 {
			binary.LittleEndian.PutUint64(key[8*i:], hash(seed, uint64(kind), uint64(i)))
		}
		ps.base[kind] = make([]byte, n)
		_, _ = rand.NewChaCha8(key).Read(ps.base[kind]) // never fails
	}
	return ps
}

func (ps *payloads) word(step, kind, sender int) uint64 {
	return hash(ps.seed, uint64(step), uint64(kind), uint64(sender))
}

// fill writes the payload of one message: b is at most the kind's size.
func (ps *payloads) fill(b []byte, step, kind, sender int) {
	w, base := ps.word(step, kind, sender), ps.base[kind]
	i := 0
	for ; i+8 <= len(b); i += 8 {
		binary.LittleEndian.PutUint64(b[i:], binary.LittleEndian.Uint64(base[i:])^w)
	}
	for ; i < len(b); i++ {
		b[i] = base[i] ^ byte(w>>(8*(i%8)))
	}
}

// equal reports whether b is exactly the payload of the message.
func (ps *payloads) equal(b []byte, step, kind, sender int) bool {
	w, base := ps.word(step, kind, sender), ps.base[kind]
	if len(b) > len(base) {
		return false
	}
	i := 0
	for ; i+8 <= len(b); i += 8 {
		if binary.LittleEndian.Uint64(b[i:]) != binary.LittleEndian.Uint64(base[i:])^w {
			return false
		}
	}
	for ; i < len(b); i++ {
		if b[i] != base[i]^byte(w>>(8*(i%8))) {
			return false
		}
	}
	return true
}

// taint marks gradient elements whose sum no longer needs to be exact: a
// forgiven range or a shed message touched them.
type taint []uint64

func newTaint(elems int) taint { return make(taint, (elems+63)/64) }

func (t taint) reset() { clear(t) }

// add taints elements [lo, hi).
func (t taint) add(lo, hi int) {
	for e := lo; e < hi; {
		if e%64 == 0 && hi-e >= 64 {
			t[e/64] = math.MaxUint64
			e += 64
			continue
		}
		t[e/64] |= 1 << (e % 64)
		e++
	}
}

// addBytes taints the elements that overlap bytes [off, off+n) of the
// gradient.
func (t taint) addBytes(off, n int) {
	if n > 0 {
		t.add(off/4, (off+n+3)/4)
	}
}

func (t taint) has(e int) bool { return t[e/64]&(1<<(e%64)) != 0 }

func (t taint) merge(o taint) {
	for i := range t {
		t[i] |= o[i]
	}
}

func (t taint) count() int {
	n := 0
	for _, w := range t {
		n += bits.OnesCount64(w)
	}
	return n
}

// Work-request ids say which run, step, kind and index a completion
// belongs to: run tag (16 bits) | step (16) | kind (8) | index (24). The
// run tag lets a run ignore completions left over from an earlier run on
// the same connection (work failed by a flow's destruction).
type wrKind uint8

const (
	wrRingSend wrKind = iota + 1
	wrRingRecv
	wrTensorSend
	wrTensorRecv
	wrPipeSend
	wrPipeRecv
	wrBurstSend
	wrBurstRecv
	wrNoticeSend
	wrNoticeRecv
	wrSchedSend // a compiled schedule's message; the index is the plan's
	wrSchedRecv
	wrTensorSchedSend // the tensor-parallel group's compiled exchange
	wrTensorSchedRecv
)

// modelParallel reports whether k is tensor- or pipeline-parallel work.
func (k wrKind) modelParallel() bool {
	switch k {
	case wrTensorSend, wrTensorRecv, wrPipeSend, wrPipeRecv, wrTensorSchedSend, wrTensorSchedRecv:
		return true
	}
	return false
}

var runTags atomic.Uint64

func nextRunTag() uint64 { return runTags.Add(1) & 0xffff }

// wrID packs a work request's identity; for ring work the index is the
// message index (phase and round).
func wrID(tag uint64, step int, k wrKind, index int) uint64 {
	return tag<<48 | uint64(step)<<32 | uint64(k)<<24 | uint64(index)&0xffffff
}

func splitWR(id uint64) (tag uint64, step int, k wrKind, index int) {
	return id >> 48, int(id >> 32 & 0xffff), wrKind(id >> 24), int(id & 0xffffff)
}

// forgivenBytes sums a completion's forgiven ranges.
func forgivenBytes(c hostapi.Completion) int64 { return int64(c.ForgivenBytes()) }
