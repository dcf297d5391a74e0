package nic_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/internal/pfcwd"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/wire"
)

// pausedTransfer sends a 1 MiB message from host 1 to host 2 while host 1
// receives a PAUSE of 50 ms every 20 ms for the whole run: a switch stuck
// in pause, or a forger. It returns when the first data packet left,
// when the message arrived intact (-1 if it did not), and host 1's
// counters.
func pausedTransfer(t *testing.T, limit time.Duration) (first, doneAt time.Duration, st nic.Stats) {
	t.Helper()
	pause := wire.AppendPause(nil, 0xff, 50000)
	return pauseAttack(t, func(c *nic.Config) { c.WatchdogLimit = limit }, 2*time.Second,
		func(now time.Duration) [][]byte {
			if now%(20*time.Millisecond) == 0 {
				return [][]byte{pause}
			}
			return nil
		})
}

// pauseAttack sends a 1 MiB message from host 1 to host 2 for at most
// runFor of virtual time, host 1 receiving the PAUSE frames pauses returns
// at each 50 µs step. It returns when the first data packet left and when
// the message arrived intact (-1 if it did not), and host 1's counters.
func pauseAttack(t *testing.T, tweak func(*nic.Config), runFor time.Duration, pauses func(now time.Duration) [][]byte) (first, doneAt time.Duration, st nic.Stats) {
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
		tweak(&cfg)
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
	if err := b.PostRecv(nic.RecvReq{Key: nic.FlowKey{Peer: 1, ID: 1}, WR: 7, Region: regions[1], Length: size}); err != nil {
		t.Fatal(err)
	}
	for _, p := range pauses(0) {
		a.Receive(0, p, 0)
	}
	if err := a.PostSend(0, nic.SendReq{Key: nic.FlowKey{Peer: 2, ID: 1}, WR: 7, Region: regions[0], Length: size}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, wire.DataLen+4096)
	first, doneAt = -1, -1
	for now := time.Duration(0); now <= runFor && doneAt < 0; now += 50 * time.Microsecond {
		if now > 0 {
			for _, p := range pauses(now) {
				a.Receive(now, p, 0)
			}
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
				doneAt = now
			}
		}
	}
	if doneAt >= 0 && !bytes.Equal(mem[0], mem[1]) {
		t.Fatal("received bytes differ from the bytes sent")
	}
	return first, doneAt, a.Stats()
}

// "forgived takes PAUSE frames from any source and has no watchdog: 20
// forged PAUSEs a second stopped a host's progress for 10 s." The NIC's
// watchdog, like the switch's, ends a pause that lasted its limit and
// ignores PAUSE for the recovery time, so a host paused without a break
// still makes progress; with the watchdog off the same PAUSE stream stops
// it for the whole run.
func TestPauseWatchdogEndsEndlessPause(t *testing.T) {
	first, doneAt, st := pausedTransfer(t, 0)
	t.Logf("watchdog on: first data at %v, done at %v, %+v", first, doneAt, st)
	if doneAt < 0 {
		t.Fatal("the transfer did not complete under an endless pause")
	}
	if lim := pfcwd.DefaultLimit; first < lim || first > lim+time.Millisecond {
		t.Errorf("first data packet at %v, want at the watchdog limit %v", first, lim)
	}
	if st.WatchdogFires == 0 || st.PausesIgnored == 0 || st.Pauses <= st.PausesIgnored {
		t.Errorf("watchdog fires %d, pauses %d of which ignored %d; want fires and ignored pauses",
			st.WatchdogFires, st.Pauses, st.PausesIgnored)
	}
	// The first pause the watchdog ended lasted its limit exactly, none
	// longer; the later ones began with the bucket part full, and over
	// the run the host was paused no more than the window allows.
	lim := pfcwd.DefaultLimit
	win := pfcwd.DefaultWindows * lim
	if st.LongestPause != lim || st.PausedTime < lim || st.PausedTime > allowance(lim, win, doneAt) {
		t.Errorf("longest pause %v, paused %v in all over %v; want the longest %v and %v-%v in all",
			st.LongestPause, st.PausedTime, doneAt, lim, lim, allowance(lim, win, doneAt))
	}

	first, doneAt, st = pausedTransfer(t, -1)
	if doneAt >= 0 || first >= 0 || st.WatchdogFires != 0 || st.PausesIgnored != 0 {
		t.Errorf("watchdog off: first data at %v, done at %v, %+v; want the host paused throughout", first, doneAt, st)
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
	if err := e.PostSend(0, nic.SendReq{Key: nic.FlowKey{Peer: 2, ID: 1}, WR: 1, Region: r, Length: 64 << 10}); err != nil {
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
	if err := e.PostSend(0, nic.SendReq{Key: nic.FlowKey{Peer: 2, ID: 1}, WR: 1, Region: r, Length: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, wire.DataLen+4096)
	for now := time.Duration(0); now <= 90*time.Millisecond; now += 10 * time.Millisecond {
		e.Receive(now, wire.AppendPause(nil, 0xff, 50000), 0)
	}
	// Paused to 140 ms since 0: the watchdog's 100 ms comes first.
	if at, ok := e.NextDeadline(); !ok || at != pfcwd.DefaultLimit {
		t.Errorf("NextDeadline = %v, %v; want the watchdog at %v", at, ok, pfcwd.DefaultLimit)
	}
	if _, _, ok := e.Transmit(pfcwd.DefaultLimit, buf); !ok {
		t.Fatal("no data when the watchdog ended the pause")
	}
}

// A driver that calls the engine late (a loaded host) does not stretch a
// pause: the watchdog fires at its due time, the pause counts as the limit
// and the recovery runs from there, and the paused time is what the
// PAUSE frames and the watchdog allowed.
func TestPauseWatchdogFiresAtItsDueTimeWhenCalledLate(t *testing.T) {
	e, r := lonelySender(t)
	if err := e.PostSend(0, nic.SendReq{Key: nic.FlowKey{Peer: 2, ID: 1}, WR: 1, Region: r, Length: 64 << 10}); err != nil {
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
	// A PAUSE at 210 ms, after the recovery, finds the bucket holding
	// what the 110 ms since the fire did not drain: the watchdog ends it
	// when the bucket is full again.
	e.Receive(210*ms, wire.AppendPause(nil, 0xff, 30000), 0) // asks for a pause to 240 ms
	lim, win := pfcwd.DefaultLimit, pfcwd.DefaultWindows*pfcwd.DefaultLimit
	drained := time.Duration(int64(110*ms) * int64(lim) / int64(win-lim))
	due := 210*ms + drained
	if _, _, ok := e.Transmit(due-time.Microsecond, buf); ok {
		t.Fatalf("data left at %v, before the watchdog's due time %v", due-time.Microsecond, due)
	}
	if _, _, ok := e.Transmit(230*ms, buf); !ok {
		t.Fatalf("no data at 230 ms: the watchdog did not end at %v a pause the bucket had no room for", due)
	}
	if st := e.Stats(); st.PausedTime != 100*ms+drained || st.LongestPause != 100*ms || st.WatchdogFires != 2 {
		t.Errorf("at 230 ms: paused %v, longest %v, %d fires; want %v, 100ms, 2", st.PausedTime, st.LongestPause, st.WatchdogFires, 100*ms+drained)
	}
}

// allowance is the most the watchdog lets a host be paused over a run of
// length T: one limit, and limit per window beyond it (nic.Config).
func allowance(limit, window, T time.Duration) time.Duration {
	return limit + time.Duration(int64(T)*int64(limit)/int64(window)) + time.Microsecond
}

// "PAUSE 0 followed by PAUSE 65535 every 60 ms restarts the continuous
// pause clock each time, so the NIC's watchdog never fires." The bucket
// keeps the paused time across the breaks: the watchdog fires, the
// transfer completes, and the host was paused no more than the window
// allows over the run. A watchdog of continuous pause (the drain line in
// onPause resetting the bucket at each pause, or no bucket) fires never,
// and the transfer does not complete within the run.
func TestPauseWatchdogBoundsResumedPauses(t *testing.T) {
	resume, pause := wire.AppendPause(nil, 0xff, 0), wire.AppendPause(nil, 0xff, 65535)
	pattern := func(now time.Duration) [][]byte {
		if now%(60*time.Millisecond) == 0 {
			return [][]byte{resume, pause}
		}
		return nil
	}
	const runFor = 20 * time.Second
	// At 20 Mb/s the 1 MiB takes 0.42 s unpaused: long enough for the
	// attack to meet the watchdog many times.
	slow := func(c *nic.Config) {
		c.LineRate = 20e6
		c.DCQCN = congestion.DefaultDCQCN(c.LineRate)
	}
	first, doneAt, st := pauseAttack(t, slow, runFor, pattern)
	t.Logf("first data at %v, done at %v: %+v", first, doneAt, st)
	if doneAt < 0 {
		t.Fatalf("the transfer did not complete in %v of PAUSE 0 + PAUSE 65535 every 60 ms: %d fires, paused %v",
			runFor, st.WatchdogFires, st.PausedTime)
	}
	lim := pfcwd.DefaultLimit
	win := pfcwd.DefaultWindows * lim
	if st.WatchdogFires == 0 || st.PausesIgnored == 0 {
		t.Errorf("%d watchdog fires, %d pauses ignored: want the watchdog to have fired", st.WatchdogFires, st.PausesIgnored)
	}
	if st.LongestPause > lim || st.PausedTime > allowance(lim, win, doneAt) || st.PausedTime < lim {
		t.Errorf("paused %v in all (longest %v) over %v: want %v to %v", st.PausedTime, st.LongestPause, doneAt, lim, allowance(lim, win, doneAt))
	}

	// A window twice as long allows half the share: the bound follows the
	// window.
	_, doneAt2, st2 := pauseAttack(t, func(c *nic.Config) { slow(c); c.WatchdogWindow = 2 * win }, runFor, pattern)
	if doneAt2 < 0 || st2.PausedTime > allowance(lim, 2*win, doneAt2) {
		t.Errorf("window %v: done at %v, paused %v; want done and at most %v", 2*win, doneAt2, st2.PausedTime, allowance(lim, 2*win, doneAt2))
	}
}

// Pauses below the window's share never fire the watchdog, however many:
// 5 ms of every 100 ms for 5 s is paused exactly as asked.
func TestPauseWatchdogObeysPausesBelowTheWindowsShare(t *testing.T) {
	e, r := lonelySender(t)
	if err := e.PostSend(0, nic.SendReq{Key: nic.FlowKey{Peer: 2, ID: 1}, WR: 1, Region: r, Length: 64 << 10}); err != nil {
		t.Fatal(err)
	}
	const n = 50
	for i := range n {
		e.Receive(time.Duration(i)*100*time.Millisecond, wire.AppendPause(nil, 0xff, 5000), 0)
	}
	e.Advance(n * 100 * time.Millisecond)
	if st := e.Stats(); st.WatchdogFires != 0 || st.PausesIgnored != 0 || st.PausedTime != n*5*time.Millisecond {
		t.Errorf("%d pauses of 5 ms every 100 ms: %d fires, %d ignored, paused %v; want 0, 0, %v",
			n, st.WatchdogFires, st.PausesIgnored, st.PausedTime, n*5*time.Millisecond)
	}
}

// A window no longer than the limit is refused, naming the field.
func TestPauseWatchdogWindowValidated(t *testing.T) {
	cfg := nicConfig(1)
	cfg.WatchdogLimit, cfg.WatchdogWindow = 100*time.Millisecond, 100*time.Millisecond
	if _, err := nic.New(cfg); err == nil || !strings.Contains(err.Error(), "WatchdogWindow") {
		t.Errorf("a window equal to the limit: %v, want an error naming WatchdogWindow", err)
	}
	cfg.WatchdogWindow = 0
	if _, err := nic.New(cfg); err != nil {
		t.Errorf("the default window: %v", err)
	}
}
