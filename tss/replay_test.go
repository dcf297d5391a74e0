package tss

import (
	"bytes"
	"encoding/binary"
	"errors"
	"maps"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/forgive-emu/forgive/wire"
)

func isReplay(err error) bool { return errors.Is(err, ErrReplayed) && Reason(err) == "replayed" }

// A sealed packet of any type opens once: sent again it is refused as
// replayed, CONNECT and ACCEPT included, and a trimmed header whose
// original was opened, or the other way round, is the same nonce.
func TestReplayRefused(t *testing.T) {
	k := ring(t, domA, domB)
	s, o := sealer(t, k), NewOpener(k)
	packets := plainPackets(t, 300)
	for _, name := range slices.Sorted(maps.Keys(packets)) {
		b := mustSeal(t, s, packets[name])
		mustOpen(t, o, b)
		if _, _, err := o.Open(nil, b); !isReplay(err) {
			t.Errorf("%s sent again: %v, want replayed", name, err)
		}
	}
	data := mustSeal(t, s, packets["DATA"])
	tr := trim(t, data)
	mustOpen(t, o, tr)
	if _, _, err := o.Open(nil, data); !isReplay(err) {
		t.Errorf("the untrimmed packet of an opened trimmed header: %v, want replayed", err)
	}
}

// Within the window, packets open in any order, once each; a packet a
// window or more behind the newest is refused; a forgery with a counter
// far ahead moves nothing.
func TestReplayWindow(t *testing.T) {
	k := ring(t, domA)
	s, o := sealer(t, k), NewOpener(k)
	p := plainPackets(t, 64)["CNP"]
	var batch [][]byte
	for range WindowLen + 200 {
		batch = append(batch, mustSeal(t, s, p))
	}
	// The newest of the first 100 first, then the rest of them backwards.
	for i := 99; i >= 0; i-- {
		mustOpen(t, o, batch[i])
	}
	// A forgery: the newest packet's counter far ahead, its tag not
	// recomputed. Refused by its tag, it leaves the window as it was.
	forged := bytes.Clone(batch[100])
	forged[wire.CNPLen+extNonce+ctrOff] = 0x7F
	if _, _, err := o.Open(nil, forged); !errors.Is(err, ErrHeaderTag) {
		t.Fatalf("forged counter: %v, want a header-tag refusal", err)
	}
	for i := 100; i < len(batch); i++ {
		mustOpen(t, o, batch[i])
	}
	for i, b := range batch {
		if _, _, err := o.Open(nil, b); !isReplay(err) {
			t.Fatalf("packet %d again: %v, want replayed", i, err)
		}
	}
	// Sealed and held back while a window of later packets opened: too old.
	late := mustSeal(t, s, p)
	for range WindowLen {
		mustOpen(t, o, mustSeal(t, s, p))
	}
	if _, _, err := o.Open(nil, late); !isReplay(err) {
		t.Errorf("a packet %d behind the newest: %v, want replayed", WindowLen, err)
	}
	// One behind the edge still opens.
	edge := mustSeal(t, s, p)
	for range WindowLen - 1 {
		mustOpen(t, o, mustSeal(t, s, p))
	}
	mustOpen(t, o, edge)
}

// A sender's restart (a later start: a greater epoch) is taken, and from
// then on every packet of its earlier start is refused as replayed, before
// its tag is checked, however fresh its counter; a start with an earlier
// epoch than the current one is refused too. Each sender and domain has its
// own window: host 3's packets do not age host 9's.
func TestReplayOfEarlierStartRefused(t *testing.T) {
	k := ring(t, domA)
	o := NewOpener(k)
	packets := plainPackets(t, 300)
	old := sealer(t, k)
	var captured [][]byte
	for _, name := range []string{"CONNECT", "DATA", "ACK", "ACCEPT"} {
		b := mustSeal(t, old, packets[name])
		_, info := mustOpen(t, o, b)
		if info.NewStart != (name == "CONNECT") {
			t.Errorf("%s: NewStart %v", name, info.NewStart)
		}
		captured = append(captured, b)
	}
	unsent := mustSeal(t, old, packets["CONNECT"]) // never opened: a fresh counter of the old start
	restarted := sealer(t, k)
	_, info := mustOpen(t, o, mustSeal(t, restarted, packets["CONNECT"]))
	if !info.NewStart {
		t.Error("the restarted sender's first packet is not a new start")
	}
	for i, b := range append(captured, unsent) {
		if _, _, err := o.Open(nil, b); !isReplay(err) {
			t.Errorf("packet %d of the earlier start: %v, want replayed", i, err)
		}
	}
	mustOpen(t, o, mustSeal(t, restarted, packets["DATA"]))

	earlier, err := NewSealer(k, bytes.NewReader(make([]byte, 8)), 0) // epoch 0: before every test Sealer
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := o.Open(nil, mustSeal(t, earlier, packets["CONNECT"])); !isReplay(err) {
		t.Errorf("a start with an earlier epoch: %v, want replayed", err)
	}

	// Host 9 sends to host 3 from its own start: its own window.
	back := bytes.Clone(packets["CNP"])
	back[4], back[5], back[6], back[7] = 0, 9, 0, 3
	other := sealer(t, k)
	b := mustSeal(t, other, back)
	mustOpen(t, o, b)
	if _, _, err := o.Open(nil, b); !isReplay(err) {
		t.Errorf("host 9's packet again: %v, want replayed", err)
	}
	mustOpen(t, o, mustSeal(t, restarted, packets["ACK"]))
}

// The window against a model: a counter opens iff it was never opened and
// is less than WindowLen behind the newest opened.
func TestReplayWindowModel(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var w window
		seen := map[uint64]bool{}
		var top uint64
		var any bool
		for i := range rapid.IntRange(1, 400).Draw(t, "n") {
			var ctr uint64
			if any && rapid.Bool().Draw(t, "near") {
				lo := uint64(0)
				if top > 3*WindowLen/2 {
					lo = top - 3*WindowLen/2
				}
				ctr = rapid.Uint64Range(lo, top+3*64).Draw(t, "ctr")
			} else {
				ctr = rapid.Uint64Range(0, 1<<20).Draw(t, "ctr")
			}
			want := !seen[ctr] && (!any || ctr > top || top-ctr < WindowLen)
			if got := w.fresh(ctr); got != want {
				t.Fatalf("step %d: fresh(%d) = %v with newest %d, want %v", i, ctr, got, top, want)
			}
			if want {
				w.mark(ctr)
				seen[ctr] = true
				if !any || ctr > top {
					top, any = ctr, true
				}
			}
		}
	})
}

// Opened places each packet in its sender's output: Start numbers the
// sender's starts this Opener took, 1 for the first, Counter is the
// packet's counter in its start, and a packet sealed later has the
// larger (Start, Counter), however the fabric reordered them. nic binds
// flows to incarnations with it (a CONNECT held on the path is ordered
// before the packets sealed after it).
func TestOpenedOrder(t *testing.T) {
	k := ring(t, domA)
	o := NewOpener(k)
	p := plainPackets(t, 64)["CONNECT"]
	type order struct {
		start uint32
		ctr   uint64
	}
	var got []order
	for _, s := range []*Sealer{sealer(t, k), sealer(t, k)} { // a start, then a later one
		batch := [][]byte{mustSeal(t, s, p), mustSeal(t, s, p), mustSeal(t, s, p)}
		for _, i := range []int{2, 0, 1} { // reordered on the way
			_, info := mustOpen(t, o, batch[i])
			got = append(got, order{info.Start, info.Counter})
		}
	}
	want := []order{{1, 2}, {1, 0}, {1, 1}, {2, 2}, {2, 0}, {2, 1}}
	if !slices.Equal(got, want) {
		t.Errorf("orders %v, want %v", got, want)
	}
}

// A forgery naming a new sender start costs the header subkey alone: the
// payload subkey is derived only once a header tag authenticated, and the
// last candStarts starts named are kept, so forgeries cycling through a
// few starts derive nothing after their first round. The sender's real
// new start still opens among them.
func TestNewStartForgeriesDeriveHeaderKeyOnce(t *testing.T) {
	k := ring(t, domA)
	s, o := sealer(t, k), NewOpener(k)
	p := plainPackets(t, 300)["DATA"]
	mustOpen(t, o, mustSeal(t, s, p)) // the sender's current start
	forged := make([][]byte, candStarts)
	for i := range forged {
		b := mustSeal(t, s, p)
		nonce := b[wire.DataLen+extNonce:]
		binary.BigEndian.PutUint64(nonce, epochs.Add(1)) // a later start
		nonce[epochLen] ^= byte(i)
		forged[i] = b
	}
	headers := map[[prefixLen]byte]any{}
	for round := range 3 {
		for i, b := range forged {
			if _, _, err := o.Open(nil, b); !errors.Is(err, ErrHeaderTag) {
				t.Fatalf("round %d, forgery %d: %v, want ErrHeaderTag", round, i, err)
			}
		}
		for i := range o.cands {
			c := &o.cands[i]
			if !c.ok || c.keys.body != nil {
				t.Fatalf("round %d, slot %d: ok %v, payload key derived %v", round, i, c.ok, c.keys.body != nil)
			}
			if h, seen := headers[c.prefix]; round > 0 && (!seen || h != c.keys.header) {
				t.Fatalf("round %d: the header key of start %x derived again", round, c.prefix)
			}
			headers[c.prefix] = c.keys.header
		}
	}
	if len(headers) != candStarts {
		t.Fatalf("%d starts cached, want %d", len(headers), candStarts)
	}
	restarted := sealer(t, k)
	if _, info := mustOpen(t, o, mustSeal(t, restarted, p)); !info.NewStart {
		t.Error("the sender's real new start was not opened as one")
	}
	mustOpen(t, o, mustSeal(t, restarted, p))
}

// The refusals that need no key come before any key is derived: a packet
// whose source host is in another domain than the one it names, even one
// naming a new start, derives nothing, and its refusal still says what
// was refused.
func TestWrongDomainRefusedBeforeDerivation(t *testing.T) {
	both := ring(t, domA, domB)
	o := NewOpener(both)
	forger := sealer(t, ring(t, Domain{ID: 7, Key: keyA}))
	p := bytes.Clone(plainPackets(t, 300)["DATA"])
	p[4], p[5] = 0, 5 // src host 5, of domain 8
	_, _, err := o.Open(nil, mustSeal(t, forger, p))
	if !errors.Is(err, ErrWrongDomain) || Reason(err) != "wrong_domain" {
		t.Fatalf("host 5 sealed for domain 7: %v (reason %q), want ErrWrongDomain", err, Reason(err))
	}
	if want := "tss: sealed for another domain than its source host's: DATA from host 5 sealed for domain 7"; err.Error() != want {
		t.Errorf("refusal %q, want %q", err, want)
	}
	for i, c := range o.cands {
		if c.ok {
			t.Errorf("slot %d: keys derived for a packet refused as wrong_domain", i)
		}
	}
}

// Refusing allocates nothing: a flood of forgeries, replays or plain
// packets costs its checks and no garbage (a new start's key derivation
// aside). Each refusal is still the error of its reason.
func TestRefusalsAllocateNothing(t *testing.T) {
	k := ring(t, domA, domB)
	earlier := sealer(t, k) // a start of host 3 before s
	s, o := sealer(t, k), NewOpener(k)
	p := plainPackets(t, 1400)["DATA"]
	opened := mustSeal(t, s, p)
	mustOpen(t, o, opened) // the sender's current start; opened is a replay from now on
	flip := func(b []byte, i int) []byte { c := bytes.Clone(b); c[i] ^= 1; return c }
	fromHost5 := bytes.Clone(p)
	fromHost5[4], fromHost5[5] = 0, 5 // domain 8's host, sealed for domain 7
	cases := []struct {
		name string
		pkt  []byte
		want error
	}{
		{"unsealed", p, ErrUnsealed},
		{"cut in the extension", mustSeal(t, s, p)[:wire.DataLen+5], ErrMalformed},
		{"unknown domain", flip(mustSeal(t, s, p), wire.DataLen+extDomain+3), ErrUnknownDomain},
		{"wrong domain", mustSeal(t, sealer(t, ring(t, Domain{ID: 7, Key: keyA})), fromHost5), ErrWrongDomain},
		{"replayed", opened, ErrReplayed},
		{"earlier start", mustSeal(t, earlier, p), ErrReplayed},
		{"header tag", flip(mustSeal(t, s, p), 20), ErrHeaderTag},
		{"payload tag", flip(mustSeal(t, s, p), wire.DataLen+wire.SealExtLen+10), ErrPayloadTag},
	}
	buf := make([]byte, 0, 2048)
	for _, c := range cases {
		var err error
		allocs := testing.AllocsPerRun(100, func() {
			buf = append(buf[:0], c.pkt...)
			_, _, err = o.OpenInPlace(buf)
		})
		if !errors.Is(err, c.want) || Reason(err) == "" {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if allocs != 0 {
			t.Errorf("%s: %v allocations per refusal, want 0", c.name, allocs)
		}
	}
}
