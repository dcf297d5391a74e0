package reliability

import "sort"

// msgBefore compares message ids in serial arithmetic, like PSNs: ids
// increase per flow and may wrap around 2^32.
func msgBefore(a, b uint32) bool { return int32(a-b) < 0 }

// idRange is the half-open range [lo, hi) of message ids, serially.
type idRange struct{ lo, hi uint32 }

func (r idRange) contains(id uint32) bool { return !msgBefore(id, r.lo) && msgBefore(id, r.hi) }

// maxDoneRanges bounds the record of completed message ids. With the
// consecutive ids a NIC assigns, the record is a single range.
const maxDoneRanges = 64

// rxMsg is an open message at the receiver.
type rxMsg struct {
	id uint32
	sb Scoreboard
}

// msgTable holds a flow's open messages, sorted by id, and the ids of the
// completed ones, so a late packet of a completed message can never open
// it again. Entries are recycled through a free list.
type msgTable struct {
	open []*rxMsg
	free []*rxMsg
	// done lists completed ids as sorted, merged ranges. When it would
	// exceed maxDoneRanges the oldest range is dropped and floor rises to
	// its end: every id before floor counts as completed.
	done     []idRange
	floor    uint32
	hasFloor bool
	max      int
}

// find returns the open message id, or its insertion index.
func (t *msgTable) find(id uint32) (*rxMsg, int) {
	// sort.Search(len(t.open), !msgBefore(t.open[i].id, id)) written out,
	// the same probes in the same order, without a closure call per probe:
	// every data packet looks its message up.
	i, j := 0, len(t.open)
	for i < j {
		h := int(uint(i+j) >> 1)
		if msgBefore(t.open[h].id, id) {
			i = h + 1
		} else {
			j = h
		}
	}
	if i < len(t.open) && t.open[i].id == id {
		return t.open[i], i
	}
	return nil, i
}

// isDone reports whether id belongs to a completed message.
func (t *msgTable) isDone(id uint32) bool {
	if t.hasFloor && msgBefore(id, t.floor) {
		return true
	}
	for _, r := range t.done {
		if r.contains(id) {
			return true
		}
	}
	return false
}

// openMsg opens message id of the given length at index i from find.
func (t *msgTable) openMsg(id, length uint32, i int) (*rxMsg, error) {
	if len(t.open) >= t.max {
		return nil, ErrTooManyMessages
	}
	var m *rxMsg
	if n := len(t.free); n > 0 {
		m, t.free = t.free[n-1], t.free[:n-1]
	} else {
		m = new(rxMsg)
	}
	m.id = id
	m.sb.Reset(length)
	t.open = append(t.open, nil)
	copy(t.open[i+1:], t.open[i:])
	t.open[i] = m
	return m, nil
}

// complete closes message m and records its id as completed.
func (t *msgTable) complete(m *rxMsg) {
	if _, i := t.find(m.id); i < len(t.open) && t.open[i] == m {
		t.open = append(t.open[:i], t.open[i+1:]...)
	}
	t.free = append(t.free, m)
	t.markDone(m.id)
}

// markDone adds id to the completed ranges, merging neighbours.
func (t *msgTable) markDone(id uint32) {
	i := sort.Search(len(t.done), func(i int) bool { return msgBefore(id, t.done[i].hi) })
	switch {
	case i < len(t.done) && t.done[i].contains(id):
		return
	case i > 0 && t.done[i-1].hi == id:
		t.done[i-1].hi++
		if i < len(t.done) && t.done[i].lo == t.done[i-1].hi {
			t.done[i-1].hi = t.done[i].hi
			t.done = append(t.done[:i], t.done[i+1:]...)
		}
		return
	case i < len(t.done) && t.done[i].lo == id+1:
		t.done[i].lo = id
		return
	}
	t.done = append(t.done, idRange{})
	copy(t.done[i+1:], t.done[i:])
	t.done[i] = idRange{id, id + 1}
	if len(t.done) > maxDoneRanges {
		t.floor, t.hasFloor = t.done[0].hi, true
		t.done = append(t.done[:0], t.done[1:]...)
	}
}
