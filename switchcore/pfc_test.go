package switchcore

import (
	"strings"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/internal/pfcwd"
	"github.com/forgive-emu/forgive/wire"
)

// pfcConfig returns the two-port switch with PFC on priority 3: pause above
// five queued 1 KB packets from one port, resume at two, pause time 100 µs.
// Port 1 runs at 1 Gb/s so a queue builds.
func pfcConfig() Config {
	cfg := twoPorts()
	cfg.Ports[1].Rate = 1 * gbps // 1032 bytes take 8256 ns
	cfg.PFC[dataPrio] = PFCConfig{Enabled: true, XOff: 5 * packet1K, XOn: 2 * packet1K, PauseTime: 100 * time.Microsecond}
	return cfg
}

func isPause(o Output) bool {
	return len(o.Pkt.Buf) == wire.PauseLen && wire.Type(o.Pkt.Buf[0]&0x0F) == wire.TypePause
}

func pauseFrames(out []Output) []Output {
	var r []Output
	for _, o := range out {
		if isPause(o) {
			r = append(r, o)
		}
	}
	return r
}

// The lossless-fabric seed: "the no-drop queue raises pause at its xOFF
// threshold and releases below xON", and a PAUSE frame "carries a per-CoS
// timer ... zero quanta = resume". Ten packets arrive from host A at once;
// the seventh takes host A's bytes in the switch above XOff (the first is
// already on the link) and a PAUSE goes back out of port 0, ahead of the
// data queued there, refreshed at half its time; the RESUME goes out when
// the seventh departure leaves two packets queued.
func TestPFCPausesAboveXOffAndResumesAtXOn(t *testing.T) {
	h := newHarness(t, pfcConfig())
	// Reverse traffic on DSCP 0 (priority 0, no PFC) fills port 0's data
	// queue: the PAUSE frame must not wait behind it.
	for psn := range 20 {
		h.recv(portB, dataPacket(hostB, hostA, 2, wire.PSN(psn), 0, payload1K), 0)
	}
	for k := 1; k <= 10; k++ {
		h.recv(portA, dataPacket(hostA, hostB, 1, wire.PSN(k), 0, payload1K), tosData)
		// The PAUSE is owed at once and leaves when the link is free.
		raised := h.sw.Stats().Ports[portA].PausesSent[dataPrio]
		if h.sw.ports[portA].pfcPending&(1<<dataPrio) != 0 {
			raised++
		}
		if held := h.sw.ports[portA].ingress[dataPrio].bytes; (held > 5*packet1K) != (raised == 1) || raised > 1 {
			t.Fatalf("arrival %d: host A holds %d bytes (XOff %d), %d PAUSE frames raised", k, held, 5*packet1K, raised)
		}
	}
	h.settle()
	out := outputsOn(h.takeOut(), portA)
	frames := pauseFrames(out)
	if len(frames) != 3 {
		t.Fatalf("%d PFC frames out of port 0, want PAUSE, refresh, RESUME", len(frames))
	}
	// PAUSE: started when the reverse packet on the link finished (826 ns),
	// 12 bytes at 10 Gb/s (10 ns), then 1 µs of propagation.
	pause := wire.Pause(frames[0].Pkt.Buf)
	if pause.ClassMask() != 1<<dataPrio || pause.Micros() != 100 || frames[0].At != 1836*time.Nanosecond {
		t.Errorf("PAUSE mask %#x, %d µs at %v; want mask %#x, 100 µs at 1.836µs",
			pause.ClassMask(), pause.Micros(), frames[0].At, 1<<dataPrio)
	}
	if !isPause(out[1]) {
		t.Errorf("PAUSE left behind queued data")
	}
	// The refresh is due half the pause time after the PAUSE left the
	// link at 836 ns.
	if r := wire.Pause(frames[1].Pkt.Buf); r.Micros() != 100 || frames[1].At != 50*time.Microsecond+1846*time.Nanosecond {
		t.Errorf("refresh %d µs at %v, want 100 µs at 51.846µs", r.Micros(), frames[1].At)
	}
	// Seventh departure at 7 × 8256 ns leaves two packets queued.
	resume := wire.Pause(frames[2].Pkt.Buf)
	if want := 7*8256*time.Nanosecond + 1010*time.Nanosecond; resume.Micros() != 0 || resume.ClassMask() != 1<<dataPrio || frames[2].At != want {
		t.Errorf("RESUME mask %#x, %d µs at %v; want mask %#x, 0 µs at %v",
			resume.ClassMask(), resume.Micros(), frames[2].At, 1<<dataPrio, want)
	}
	st := h.sw.Stats().Ports[portA]
	if st.PausesSent[dataPrio] != 2 || st.ResumesSent[dataPrio] != 1 {
		t.Errorf("PausesSent %d, ResumesSent %d; want 2 and 1", st.PausesSent[dataPrio], st.ResumesSent[dataPrio])
	}
	if st.PausesSent[0] != 0 || h.sw.Stats().Ports[portB].PausesSent[0] != 0 {
		t.Errorf("priority 0 has no PFC and must never pause")
	}
}

// "PFC (Priority Flow Control) - hop-by-hop ... The switch sends a
// per-priority PAUSE to the upstream device": a PAUSE received on port 1
// stops that port's data departures of the paused priority until the
// timer runs out; other priorities and the strict-priority queue keep
// going. The paused time is counted.
func TestPauseReceivedStopsDataUntilExpiry(t *testing.T) {
	h := newHarness(t, pfcConfig())
	h.recv(portB, wire.AppendPause(nil, 1<<dataPrio, 20), 0)
	h.recv(portA, dataPacket(hostA, hostB, 1, 1, 0, payload1K), tosData) // priority 3: paused
	h.recv(portA, dataPacket(hostA, hostB, 2, 1, 0, payload1K), 0)       // priority 0: not paused
	h.recv(portA, ackPacket(hostA, hostB, 3), tosAck)                    // strict priority: not paused
	h.settle()
	out := h.takeOut()
	if len(out) != 3 {
		t.Fatalf("%d outputs, want 3", len(out))
	}
	if wire.Data(out[2].Pkt.Buf).Flow() != 1 {
		t.Fatalf("paused priority did not leave last")
	}
	// It starts when the pause expires at 20 µs: 8256 ns on the link, 1 µs
	// of propagation.
	if want := 20*time.Microsecond + 8256*time.Nanosecond + time.Microsecond; out[2].At != want {
		t.Errorf("paused packet out at %v, want %v", out[2].At, want)
	}
	st := h.sw.Stats().Ports[portB]
	if st.Paused[dataPrio] != 20*time.Microsecond || st.Paused[0] != 0 {
		t.Errorf("Paused = %v, want 20µs on priority 3 only", st.Paused)
	}
	if st.PauseFrames.Packets != 1 {
		t.Errorf("PauseFrames = %+v, want 1", st.PauseFrames)
	}
}

// A RESUME (zero time) ends the pause at once.
func TestResumeEndsPause(t *testing.T) {
	h := newHarness(t, pfcConfig())
	h.recv(portB, wire.AppendPause(nil, 1<<dataPrio, 60000), 0)
	h.recv(portA, dataPacket(hostA, hostB, 1, 1, 0, payload1K), tosData)
	h.advance(5 * time.Microsecond)
	if len(h.out) != 0 {
		t.Fatal("paused packet left")
	}
	h.recv(portB, wire.AppendPause(nil, 1<<dataPrio, 0), 0)
	h.settle()
	if want := 5*time.Microsecond + 8256*time.Nanosecond + time.Microsecond; len(h.out) != 1 || h.out[0].At != want {
		t.Fatalf("outputs %+v, want one at %v", h.out, want)
	}
	if p := h.sw.Stats().Ports[portB].Paused[dataPrio]; p != 5*time.Microsecond {
		t.Errorf("Paused %v, want 5µs", p)
	}
}

// A priority without PFC enabled ignores PAUSE frames.
func TestPauseIgnoredWithoutPFC(t *testing.T) {
	h := newHarness(t, twoPorts())
	h.recv(portB, wire.AppendPause(nil, 0xFF, 60000), 0)
	h.recv(portA, dataPacket(hostA, hostB, 1, 1, 0, payload1K), tosData)
	h.settle()
	if len(h.out) != 1 || h.out[0].At != 826*time.Nanosecond+time.Microsecond {
		t.Fatalf("outputs %+v, want the packet unpaused", h.out)
	}
}

// The seed's watchdog: "it clears the stuck no-drop queue, a deliberate
// drop inside the lossless class". A neighbour that keeps refreshing its
// PAUSE holds port 1's priority-3 queue paused; at the limit the queue's
// packets are dropped and counted, and during recovery further PAUSE
// frames are ignored so new packets flow.
func TestWatchdogClearsQueuePausedTooLong(t *testing.T) {
	cfg := pfcConfig()
	cfg.PFC[dataPrio].WatchdogLimit = time.Millisecond
	cfg.PFC[dataPrio].WatchdogRecovery = 2 * time.Millisecond
	h := newHarness(t, cfg)
	refresh := func(until time.Duration) {
		for h.now < until {
			h.recv(portB, wire.AppendPause(nil, 1<<dataPrio, 200), 0)
			h.advance(min(h.now+100*time.Microsecond, until))
		}
	}
	refresh(10 * time.Microsecond)
	for psn := range 4 {
		h.recv(portA, dataPacket(hostA, hostB, 1, wire.PSN(psn), 0, payload1K), tosData)
	}
	refresh(time.Millisecond - time.Nanosecond)
	if len(h.out) != 0 {
		t.Fatalf("%d packets left a paused queue before the watchdog", len(h.out))
	}
	if st := h.sw.Stats().Ports[portB]; st.WatchdogFires[dataPrio] != 0 {
		t.Fatal("watchdog fired early")
	}
	h.advance(time.Millisecond)
	st := h.sw.Stats().Ports[portB]
	if st.WatchdogFires[dataPrio] != 1 || st.Classes[dataPrio].Drops[DropWatchdog].Packets != 4 {
		t.Fatalf("at the limit: %d fires, %d watchdog drops; want 1 and 4",
			st.WatchdogFires[dataPrio], st.Classes[dataPrio].Drops[DropWatchdog].Packets)
	}
	if st.Paused[dataPrio] != time.Millisecond {
		t.Errorf("Paused %v, want 1ms", st.Paused[dataPrio])
	}
	// The PFC bytes held for host A went with the packets: no PAUSE stays
	// raised toward host A.
	if held := h.sw.ports[portA].ingress[dataPrio].bytes; held != 0 {
		t.Errorf("host A still holds %d bytes after the watchdog", held)
	}
	// During recovery the neighbour's PAUSE frames are ignored.
	h.recv(portA, dataPacket(hostA, hostB, 1, 9, 0, payload1K), tosData)
	refresh(2500 * time.Microsecond)
	if len(h.out) != 1 {
		t.Fatalf("%d outputs during recovery, want the new packet", len(h.out))
	}
	// After recovery, pause is obeyed again.
	h.advance(3 * time.Millisecond)
	h.takeOut()
	refresh(3100 * time.Microsecond)
	h.recv(portA, dataPacket(hostA, hostB, 1, 10, 0, payload1K), tosData)
	refresh(3500 * time.Microsecond)
	if len(h.out) != 0 {
		t.Errorf("a packet left while paused after recovery")
	}
}

// "headroom ≈ 2 MTU + C·(2L/v + t_resp)" absorbs what arrives after the
// PAUSE; a packet beyond XOff + headroom is dropped at ingress.
func TestHeadroomOverflowDropped(t *testing.T) {
	cfg := pfcConfig()
	cfg.PFC[dataPrio].Headroom = 2 * packet1K
	h := newHarness(t, cfg)
	var dropped int
	for psn := range 12 {
		if h.recv(portA, dataPacket(hostA, hostB, 1, wire.PSN(psn), 0, payload1K), tosData) == DropHeadroom {
			dropped++
		}
	}
	// One on the link, seven held (XOff 5 + headroom 2), four dropped.
	if st := h.sw.Stats().Ports[portA].RxDrops[DropHeadroom]; dropped != 4 || st.Packets != 4 {
		t.Errorf("dropped %d, counted %+v; want 4", dropped, st)
	}
}

// The default PAUSE time is 65535 quanta of 512 bit times at the port rate:
// 3355 µs at 10 Gb/s, 84 µs at 400 Gb/s.
func TestDefaultPauseTime(t *testing.T) {
	cfg := twoPorts()
	cfg.Ports[1].Rate = 400 * gbps
	cfg.PFC[dataPrio] = PFCConfig{Enabled: true, XOff: 1, XOn: 0}
	h := newHarness(t, cfg)
	if a, b := h.sw.cold[portA].pauseUS[dataPrio], h.sw.cold[portB].pauseUS[dataPrio]; a != 3356 || b != 84 {
		t.Errorf("pause times %d µs and %d µs, want 3356 and 84", a, b)
	}
}

// "PAUSE 0 followed by PAUSE 65535 every 60 ms restarts the continuous
// pause clock each time", at the switch: its host-facing egress stayed
// paused 8.9 s of 10 s. The watchdog's bucket keeps the paused time
// across the breaks, so it fires, and over the run the queue is paused
// no more than the window allows: one limit, and a limit per window.
// Here the limit is 1 ms (window 10 ms), the breaks come every 600 µs and
// a packet arrives every 100 µs for 100 ms. A watchdog of continuous
// pause (the bucket's drain in egressPause.set replaced by 0) never fires,
// and the queue is paused the whole run.
func TestWatchdogBoundsResumedPauses(t *testing.T) {
	cfg := pfcConfig()
	const limit = time.Millisecond
	cfg.PFC[dataPrio].WatchdogLimit = limit
	h := newHarness(t, cfg)
	const run = 100 * time.Millisecond
	psn := wire.PSN(0)
	for now := time.Duration(0); now < run; now += 100 * time.Microsecond {
		h.advance(now)
		if now%(600*time.Microsecond) == 0 {
			h.recv(portB, wire.AppendPause(nil, 1<<dataPrio, 0), 0)
			h.recv(portB, wire.AppendPause(nil, 1<<dataPrio, 65535), 0)
		}
		h.recv(portA, dataPacket(hostA, hostB, 1, psn, 0, payload1K), tosData)
		psn++
	}
	h.advance(run)
	st := h.sw.Stats().Ports[portB]
	window := pfcwd.DefaultWindows * limit
	bound := limit + run*limit/window
	t.Logf("%d fires, paused %v of %v (bound %v), %d packets out, %d watchdog drops",
		st.WatchdogFires[dataPrio], st.Paused[dataPrio], run, bound, len(h.out), st.Classes[dataPrio].Drops[DropWatchdog].Packets)
	if st.WatchdogFires[dataPrio] == 0 {
		t.Fatalf("the watchdog never fired: paused %v of %v", st.Paused[dataPrio], run)
	}
	if p := st.Paused[dataPrio]; p > bound || p < limit {
		t.Errorf("paused %v over %v: want %v to %v", p, run, limit, bound)
	}
	// Between the fires the queue sends: most packets leave.
	if out := len(h.out) - len(pauseFrames(h.out)); out < int(psn)/2 {
		t.Errorf("%d of %d packets left", out, psn)
	}
}

// Pauses below the window's share never fire the watchdog: 50 µs of
// every 1 ms, with data queued, is paused exactly as asked.
func TestWatchdogObeysPausesBelowTheWindowsShare(t *testing.T) {
	cfg := pfcConfig()
	cfg.PFC[dataPrio].WatchdogLimit = time.Millisecond
	h := newHarness(t, cfg)
	const n = 100
	for i := range n {
		now := time.Duration(i) * time.Millisecond
		h.advance(now)
		h.recv(portB, wire.AppendPause(nil, 1<<dataPrio, 50), 0)
		h.recv(portA, dataPacket(hostA, hostB, 1, wire.PSN(i), 0, payload1K), tosData)
	}
	h.advance(n * time.Millisecond)
	st := h.sw.Stats().Ports[portB]
	if st.WatchdogFires[dataPrio] != 0 || st.Paused[dataPrio] != n*50*time.Microsecond {
		t.Errorf("%d pauses of 50 µs every 1 ms: %d fires, paused %v; want 0 and %v",
			n, st.WatchdogFires[dataPrio], st.Paused[dataPrio], n*50*time.Microsecond)
	}
}

// A window no longer than the limit is refused, naming the field.
func TestWatchdogWindowValidated(t *testing.T) {
	cfg := pfcConfig()
	cfg.PFC[dataPrio].WatchdogLimit = time.Millisecond
	cfg.PFC[dataPrio].WatchdogWindow = time.Millisecond
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "WatchdogWindow") {
		t.Errorf("a window equal to the limit: %v, want an error naming WatchdogWindow", err)
	}
}
