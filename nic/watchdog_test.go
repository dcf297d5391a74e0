package nic_test

import (
	"bytes"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/wire"
)

// pausedTransfer sends a 1 MiB message from host 1 to host 2 while host 1
// receives a PAUSE of 50 ms every 20 ms for the whole run: a switch stuck
// in pause, or a forger. It returns when the first data packet left,
// whether the message arrived intact, and host 1's counters.
func pausedTransfer(t *testing.T, limit time.Duration) (first time.Duration, done bool, st nic.Stats) {
	t.Helper()
	const size = 1 << 20
	var engines [2]*nic.Engine
	var regions [2]nic.RegionID
	mem := [2][]byte{make([]byte, size), make([]byte, size)}
	for i := range mem[0] {
		mem[0][i] = byte(i*7 + 1)
	}
	for i, h := range []uint16{1, 2} {
		cfg := nicConfig(h)
		cfg.WatchdogLimit = limit
		e, err := nic.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := e.CreateFlow(0, nic.FlowSpec{Peer: 3 - h, ID: 1, Class: nic.ClassTensor}); err != nil {
			t.Fatal(err)
		}
		if regions[i], err = e.RegisterMemory(mem[i]); err != nil {
			t.Fatal(err)
		}
		engines[i] = e
	}
	a, b := engines[0], engines[1]
	if err := b.PostRecv(nic.FlowKey{Peer: 1, ID: 1}, 7, regions[1], 0, size, 0); err != nil {
		t.Fatal(err)
	}
	pause := wire.AppendPause(nil, 0xff, 50000)
	a.Receive(0, pause, 0)
	if err := a.PostSend(0, nic.FlowKey{Peer: 2, ID: 1}, 7, regions[0], 0, size); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, wire.DataLen+4096)
	first = -1
	for now := time.Duration(0); now <= 2*time.Second && !done; now += 50 * time.Microsecond {
		if now%(20*time.Millisecond) == 0 {
			a.Receive(now, pause, 0)
		}
		for _, dir := range [2][2]*nic.Engine{{a, b}, {b, a}} {
			dir[0].Advance(now)
			for {
				pkt, tos, ok := dir[0].Transmit(now, buf)
				if !ok {
					break
				}
				if dir[0] == a && wire.Type(pkt[0]&0x0F) == wire.TypeData && first < 0 {
					first = now
				}
				dir[1].Receive(now, pkt, tos)
			}
		}
		for _, c := range b.Completions() {
			if c.Kind == nic.WorkRecv && c.Err == nil && c.Len == size {
				done = true
			}
		}
	}
	if done && !bytes.Equal(mem[0], mem[1]) {
		t.Fatal("received bytes differ from the bytes sent")
	}
	return first, done, a.Stats()
}

// "forgived takes PAUSE frames from any source and has no watchdog: 20
// forged PAUSEs a second stopped a host's progress for 10 s." The NIC's
// watchdog, like the switch's, ends a pause that lasted its limit and
// ignores PAUSE for the recovery time, so a host paused without a break
// still makes progress; with the watchdog off the same PAUSE stream stops
// it for the whole run.
func TestPauseWatchdogEndsEndlessPause(t *testing.T) {
	first, done, st := pausedTransfer(t, 0)
	t.Logf("watchdog on: first data at %v, done %v, %+v", first, done, st)
	if !done {
		t.Fatal("the transfer did not complete under an endless pause")
	}
	if lim := nic.DefaultWatchdogLimit; first < lim || first > lim+time.Millisecond {
		t.Errorf("first data packet at %v, want at the watchdog limit %v", first, lim)
	}
	if st.WatchdogFires == 0 || st.PausesIgnored == 0 || st.Pauses <= st.PausesIgnored {
		t.Errorf("watchdog fires %d, pauses %d of which ignored %d; want fires and ignored pauses",
			st.WatchdogFires, st.Pauses, st.PausesIgnored)
	}
	// Every pause the watchdog ended lasted its limit exactly, none longer.
	lim := nic.DefaultWatchdogLimit
	if st.LongestPause != lim || st.PausedTime < time.Duration(st.WatchdogFires)*lim ||
		st.PausedTime > time.Duration(st.WatchdogFires+1)*lim {
		t.Errorf("longest pause %v, paused %v in all over %d watchdog fires; want the longest %v and %v-%v in all",
			st.LongestPause, st.PausedTime, st.WatchdogFires, lim,
			time.Duration(st.WatchdogFires)*lim, time.Duration(st.WatchdogFires+1)*lim)
	}

	first, done, st = pausedTransfer(t, -1)
	if done || first >= 0 || st.WatchdogFires != 0 || st.PausesIgnored != 0 {
		t.Errorf("watchdog off: first data at %v, done %v, %+v; want the host paused throughout", first, done, st)
	}
	if st.LongestPause != st.PausedTime || st.PausedTime < 2*time.Second {
		t.Errorf("watchdog off: longest pause %v, paused %v in all; want one pause over the whole 2 s run", st.LongestPause, st.PausedTime)
	}
}

// lonelySender is host 1's engine with flow 1 to host 2 bound and 64 KiB
// of registered memory to send from.
func lonelySender(t *testing.T) (*nic.Engine, nic.RegionID) {
	t.Helper()
	e, err := nic.New(nicConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := e.CreateFlow(0, nic.FlowSpec{Peer: 2, ID: 1, Class: nic.ClassTensor}); err != nil {
		t.Fatal(err)
	}
	bindAlone(t, e, nic.FlowKey{Peer: 2, ID: 1}, 0x2222)
	r, err := e.RegisterMemory(make([]byte, 64<<10))
	if err != nil {
		t.Fatal(err)
	}
	return e, r
}

// A pause that is not endless is obeyed exactly: the watchdog stays out of
// PFC's way below its limit.
func TestPauseBelowWatchdogLimitIsObeyed(t *testing.T) {
	e, r := lonelySender(t)
	e.Receive(0, wire.AppendPause(nil, 0xff, 60000), 0) // 60 ms
	if err := e.PostSend(0, nic.FlowKey{Peer: 2, ID: 1}, 1, r, 0, 64<<10); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, wire.DataLen+4096)
	if _, _, ok := e.Transmit(59*time.Millisecond, buf); ok {
		t.Fatal("data left during a 60 ms pause")
	}
	if at, ok := e.NextDeadline(); !ok || at != 60*time.Millisecond {
		t.Errorf("NextDeadline = %v, %v; want the pause's end, 60ms", at, ok)
	}
	if _, _, ok := e.Transmit(60*time.Millisecond, buf); !ok {
		t.Fatal("no data at the pause's end")
	}
	if st := e.Stats(); st.WatchdogFires != 0 {
		t.Errorf("watchdog fired on a 60 ms pause: %+v", st)
	}
}

// The engine asks to be woken when the watchdog ends a pause, not at the
// end of the last PAUSE frame's time.
func TestPauseWatchdogDeadline(t *testing.T) {
	e, r := lonelySender(t)
	if err := e.PostSend(0, nic.FlowKey{Peer: 2, ID: 1}, 1, r, 0, 64<<10); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, wire.DataLen+4096)
	for now := time.Duration(0); now <= 90*time.Millisecond; now += 10 * time.Millisecond {
		e.Receive(now, wire.AppendPause(nil, 0xff, 50000), 0)
	}
	// Paused to 140 ms since 0: the watchdog's 100 ms comes first.
	if at, ok := e.NextDeadline(); !ok || at != nic.DefaultWatchdogLimit {
		t.Errorf("NextDeadline = %v, %v; want the watchdog at %v", at, ok, nic.DefaultWatchdogLimit)
	}
	if _, _, ok := e.Transmit(nic.DefaultWatchdogLimit, buf); !ok {
		t.Fatal("no data when the watchdog ended the pause")
	}
}

// A driver that calls the engine late (a loaded host) does not stretch a
// pause: the watchdog fires at its due time, the pause counts as the limit
// and the recovery runs from there, and the paused time is what the
// PAUSE frames and the watchdog allowed.
func TestPauseWatchdogFiresAtItsDueTimeWhenCalledLate(t *testing.T) {
	e, r := lonelySender(t)
	if err := e.PostSend(0, nic.FlowKey{Peer: 2, ID: 1}, 1, r, 0, 64<<10); err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	for now := time.Duration(0); now <= 90*ms; now += 30 * ms {
		e.Receive(now, wire.AppendPause(nil, 0xff, 60000), 0) // paused to 150 ms
	}
	// A datagram at 130 ms moves the engine's clock past the watchdog's
	// due time: the counters say the pause lasted the limit.
	e.Receive(130*ms, []byte{0}, 0)
	if st := e.Stats(); st.PausedTime != 100*ms || st.LongestPause != 100*ms || st.Malformed != 1 {
		t.Fatalf("at 130 ms: paused %v, longest %v, %d malformed; want 100ms, 100ms, 1", st.PausedTime, st.LongestPause, st.Malformed)
	}
	buf := make([]byte, wire.DataLen+4096)
	// The driver wakes at 170 ms, not at the watchdog's 100 ms.
	if _, _, ok := e.Transmit(170*ms, buf); !ok {
		t.Fatal("no data at 170 ms, after the watchdog's limit and the pause's end")
	}
	st := e.Stats()
	if st.WatchdogFires != 1 || st.PausedTime != 100*ms || st.LongestPause != 100*ms {
		t.Fatalf("at 170 ms: %d watchdog fires, paused %v, longest %v; want 1 fire and 100ms paused", st.WatchdogFires, st.PausedTime, st.LongestPause)
	}
	// Recovery runs from the fire, at 100 ms, to 200 ms.
	e.Receive(190*ms, wire.AppendPause(nil, 0xff, 60000), 0)
	if st := e.Stats(); st.PausesIgnored != 1 {
		t.Fatalf("a PAUSE at 190 ms, in the recovery: %d ignored, want 1", st.PausesIgnored)
	}
	e.Receive(210*ms, wire.AppendPause(nil, 0xff, 30000), 0) // paused to 240 ms
	if _, _, ok := e.Transmit(230*ms, buf); ok {
		t.Fatal("data left during a PAUSE taken after the recovery")
	}
	if st := e.Stats(); st.PausedTime != 120*ms || st.LongestPause != 100*ms {
		t.Errorf("at 230 ms: paused %v, longest %v; want 120ms and 100ms", st.PausedTime, st.LongestPause)
	}
	e.Advance(300 * ms)
	if st := e.Stats(); st.PausedTime != 130*ms || st.WatchdogFires != 1 {
		t.Errorf("at 300 ms: paused %v, %d fires; want 130ms, 1 fire", st.PausedTime, st.WatchdogFires)
	}
}
