package nic

import "testing"

// A destroyed flow's tag is remembered for the MaxFlows flows destroyed
// after it, so its key's next incarnation within them draws another; the
// memory of tags stays at most MaxFlows past the live flows however many
// flows come and go, and a recreated key's entry is never dropped for its
// earlier incarnation.
func TestRetiredTagsAreBounded(t *testing.T) {
	cfg := DefaultConfig(1, 1e9)
	cfg.MaxFlows = 4
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	create := func(id uint32) uint32 {
		t.Helper()
		if err := e.CreateFlow(0, FlowSpec{Peer: 2, ID: id}); err != nil {
			t.Fatal(err)
		}
		return e.flows.get(FlowKey{2, id}).tag
	}
	destroy := func(id uint32) {
		t.Helper()
		if err := e.DestroyFlow(FlowKey{2, id}); err != nil {
			t.Fatal(err)
		}
	}
	first := create(1)
	destroy(1)
	for id := uint32(2); id <= 4; id++ { // three more: the first is still remembered
		create(id)
		destroy(id)
	}
	if e.lastTag[FlowKey{2, 1}] != first {
		t.Fatalf("the tag of flow 1 was forgotten after three later destroys, with MaxFlows 4")
	}
	again := create(1) // live: its entry is its own tag
	if again == first {
		t.Fatalf("flow 1 recreated with its earlier tag %#x", first)
	}
	for id := uint32(10); id < 1000; id++ {
		create(id)
		destroy(id)
		if n := len(e.lastTag); n > 1+cfg.MaxFlows {
			t.Fatalf("%d tags remembered after flow %d, one live", n, id)
		}
		if len(e.retired)-e.retiredHead > cfg.MaxFlows || cap(e.retired) > 4*cfg.MaxFlows {
			t.Fatalf("retired list of %d (from %d, capacity %d)", len(e.retired), e.retiredHead, cap(e.retired))
		}
	}
	if e.lastTag[FlowKey{2, 1}] != again {
		t.Fatalf("the live flow 1's tag was dropped with its earlier incarnation's")
	}
	if _, ok := e.lastTag[FlowKey{2, 10}]; ok {
		t.Fatalf("flow 10's tag still held after 989 later destroys")
	}
}
