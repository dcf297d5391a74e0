package nic

import "math/bits"

// flowTable maps a FlowKey to its flow: an open-addressed hash table with
// linear probing, at most half full, that the receive path reads once per
// packet. A Go map with a struct key hashes through the generic
// per-type hash function and compares fields through another call; here
// the key packs into one word, the hash is one multiplication (Fibonacci
// hashing: the top bits of key times 2^64 over the golden ratio), and a
// lookup usually reads one 16-byte slot. Nothing iterates the table
// (the engine's round-robin order is a slice), so its layout can never
// decide an order.
type flowTable struct {
	slots []flowSlot // len is a power of two, or 0 before the first insert
	shift uint       // 64 - log2(len(slots)): home keeps the top bits
	n     int
}

// flowSlot is one entry; f == nil marks an empty slot.
type flowSlot struct {
	key uint64
	f   *flow
}

func packKey(k FlowKey) uint64 { return uint64(k.Peer)<<32 | uint64(k.ID) }

// home is the slot a key's probe sequence starts at.
func (t *flowTable) home(key uint64) int {
	return int((key * 0x9E3779B97F4A7C15) >> t.shift)
}

// len returns the number of flows.
func (t *flowTable) len() int { return t.n }

// get returns the flow of key, or nil.
func (t *flowTable) get(k FlowKey) *flow {
	if t.n == 0 {
		return nil
	}
	key, mask := packKey(k), len(t.slots)-1
	for i := t.home(key); ; i = (i + 1) & mask {
		s := &t.slots[i]
		if s.f == nil {
			return nil
		}
		if s.key == key {
			return s.f
		}
	}
}

// put inserts f under k, which must not be in the table.
func (t *flowTable) put(k FlowKey, f *flow) {
	if 2*(t.n+1) > len(t.slots) {
		t.grow()
	}
	t.insert(packKey(k), f)
	t.n++
}

func (t *flowTable) insert(key uint64, f *flow) {
	mask := len(t.slots) - 1
	i := t.home(key)
	for t.slots[i].f != nil {
		i = (i + 1) & mask
	}
	t.slots[i] = flowSlot{key, f}
}

func (t *flowTable) grow() {
	old := t.slots
	t.slots = make([]flowSlot, max(8, 2*len(old)))
	t.shift = uint(64 - bits.TrailingZeros(uint(len(t.slots))))
	for _, s := range old {
		if s.f != nil {
			t.insert(s.key, s.f)
		}
	}
}

// remove deletes k if present. Deletion shifts later entries of the same
// probe run back (Knuth's algorithm R), so no tombstones are left and a
// lookup still stops at the first empty slot.
func (t *flowTable) remove(k FlowKey) {
	if t.n == 0 {
		return
	}
	key, mask := packKey(k), len(t.slots)-1
	i := t.home(key)
	for t.slots[i].key != key || t.slots[i].f == nil {
		if t.slots[i].f == nil {
			return
		}
		i = (i + 1) & mask
	}
	t.n--
	for j := i; ; {
		t.slots[i] = flowSlot{}
		for {
			j = (j + 1) & mask
			if t.slots[j].f == nil {
				return
			}
			// The entry at j may move to i unless its home lies
			// cyclically in (i, j]: then i is before its home.
			h := t.home(t.slots[j].key)
			if (j > i && (h <= i || h > j)) || (j < i && h <= i && h > j) {
				break
			}
		}
		t.slots[i] = t.slots[j]
		i = j
	}
}
