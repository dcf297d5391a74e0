package switchcore

import (
	"math/bits"
	"time"

	"github.com/forgive-emu/forgive/internal/pfcwd"
	"github.com/forgive-emu/forgive/wire"
)

// pauseTOS is the TOS byte of the PAUSE frames the switch sends: DSCP 48,
// network control.
const pauseTOS = 48 << 2

// egressPause is what the neighbour's PAUSE frames say about one priority
// of a port's egress: its data departures stop during [start, end).
type egressPause struct {
	start, end  time.Duration
	accum       time.Duration // paused time of the intervals before start
	ignoreUntil time.Duration // watchdog recovery: pause frames are ignored until then
	// level is the watchdog's bucket at start: the paused time it still
	// holds from the pauses before (PFCConfig.WatchdogWindow).
	level time.Duration
}

func (e *egressPause) paused(t time.Duration) bool { return t < e.end }

// set pauses for d from t. A frame that arrives while paused replaces the
// remaining time, as 802.1Qbb says, and keeps the pause continuous. A new
// pause finds the watchdog's bucket holding the last pause, less what
// drained since it ended.
func (e *egressPause) set(t, d time.Duration, pf *pfcParams) {
	if t >= e.end {
		e.accum += e.end - e.start
		e.level = pfcwd.Drain(e.level+e.end-e.start, t-e.end, pf.wdLimit, pf.wdDrain)
		e.start = t
	}
	e.end = t + d
}

// wdDue is when the watchdog's bucket holds the limit, if the pause lasts.
func (e *egressPause) wdDue(pf *pfcParams) time.Duration { return e.start + pf.wdLimit - e.level }

func (e *egressPause) resume(t time.Duration) {
	if t < e.end {
		e.end = t
	}
}

// total returns the time paused up to now.
func (e *egressPause) total(now time.Duration) time.Duration {
	return e.accum + max(0, min(e.end, now)-e.start)
}

// ingressPFC is the PFC state of one priority arriving on a port: the bytes
// it holds in the switch, and whether the switch has paused the neighbour.
type ingressPFC struct {
	bytes     int
	pausing   bool
	refreshAt time.Duration // when to repeat the PAUSE that left last, before it expires
}

// charge counts a queued packet against the ingress port and priority it
// came in on, pausing the neighbour above XOff.
//
// Only the priorities with PFC are counted: nothing reads the bytes of
// the others, and a hop through them then does not touch its ingress port
// a second time.
func (s *Switch) charge(e *entry) {
	if s.pfcMask&(1<<e.prio) != 0 && e.in != NoPort {
		s.chargePFC(e, 1)
	}
}

// uncharge releases what charge counted, resuming the neighbour at or below
// XOn.
func (s *Switch) uncharge(e *entry) {
	if s.pfcMask&(1<<e.prio) != 0 && e.in != NoPort {
		s.chargePFC(e, -1)
	}
}

// chargePFC adds (sign 1) or removes (sign -1) e's bytes to or from what
// its ingress port and priority hold.
func (s *Switch) chargePFC(e *entry, sign int) {
	in := &s.ports[e.in]
	in.ingress[e.prio].bytes += sign * e.size()
	s.checkPFC(in, e.prio)
}

// headroomExceeded reports whether size more bytes on (in, prio) would
// overflow the headroom above XOff.
func (s *Switch) headroomExceeded(in *port, prio uint8, size int) bool {
	pf := &s.pfc[prio]
	return pf.enabled && pf.headroom > 0 && in.ingress[prio].bytes+size > pf.xoff+pf.headroom
}

func (s *Switch) checkPFC(in *port, prio uint8) {
	pf := &s.pfc[prio]
	if !pf.enabled {
		return
	}
	ing := &in.ingress[prio]
	switch {
	case !ing.pausing && ing.bytes > pf.xoff:
		ing.pausing = true
		in.pausing |= 1 << prio
		s.sendPause(in, prio, s.coldOf(in).pauseUS[prio])
	case ing.pausing && ing.bytes <= pf.xon:
		ing.pausing = false
		in.pausing &^= 1 << prio
		s.sendPause(in, prio, 0)
	}
}

// sendPause owes the neighbour on port p a PAUSE (or, with zero time,
// RESUME) frame for prio. It leaves ahead of everything p has queued; if
// an earlier frame for prio has not left yet, this one replaces it.
func (s *Switch) sendPause(p *port, prio uint8, micros uint16) {
	p.pfcPending |= 1 << prio
	s.coldOf(p).pfcMicros[prio] = micros
	s.schedule(p)
}

// startPFC sends the next PFC frame p owes, lowest priority first. A PAUSE
// is repeated half its time after it has fully left, so even a pause time
// shorter than two frames leaves the link room for other traffic.
func (s *Switch) startPFC(p *port, t time.Duration) {
	prio := uint8(bits.TrailingZeros8(p.pfcPending))
	p.pfcPending &^= 1 << prio
	c := s.coldOf(p)
	micros := c.pfcMicros[prio]
	if micros == 0 {
		c.stats.ResumesSent[prio]++
	} else {
		c.stats.PausesSent[prio]++
	}
	buf := wire.AppendPause(s.newBuffer(wire.PauseLen)[:0], 1<<prio, micros)
	h, _ := wire.Inspect(buf) // a PAUSE the switch wrote: valid
	e := newEntry(Packet{Buf: buf, TOS: pauseTOS, In: NoPort}, prio, &h)
	if p.down(t) {
		s.drop(p, ClassHeader, e.packet(), DropLinkDown)
	} else {
		p.cls[ClassHeader].dequeued.add(len(buf))
		s.transmit(p, e, ClassHeader, t)
	}
	p.ingress[prio].refreshAt = max(t, p.linkFree) + c.refresh[prio]
}

// refreshPauses repeats the PAUSE of every priority still above XOn whose
// previous frame left half its time ago, so the neighbour stays paused.
func (s *Switch) refreshPauses(p *port, t time.Duration) {
	for m := p.refreshMask(); m != 0; m &= m - 1 {
		prio := uint8(bits.TrailingZeros8(m))
		if p.refreshing(prio) && p.ingress[prio].refreshAt <= t {
			s.sendPause(p, prio, s.coldOf(p).pauseUS[prio])
		}
	}
}

// refreshing reports whether a PAUSE for prio has left and is to be
// repeated while the priority stays above XOn.
func (p *port) refreshing(prio uint8) bool {
	return p.ingress[prio].pausing && p.pfcPending&(1<<prio) == 0
}

// refreshMask returns the priorities whose PAUSE is to be repeated: the
// ingress is pausing the neighbour and no frame for it is waiting to leave.
func (p *port) refreshMask() uint8 { return p.pausing &^ p.pfcPending }

func (p *port) refreshDue() time.Duration {
	t := never
	for m := p.refreshMask(); m != 0; m &= m - 1 {
		t = min(t, p.ingress[bits.TrailingZeros8(m)].refreshAt)
	}
	return t
}

// onPause applies a PAUSE frame the neighbour sent on port in to the
// egress of in. Priorities without PFC enabled, and priorities in watchdog
// recovery, ignore it.
func (s *Switch) onPause(in *port, pkt Packet) {
	c := s.coldOf(in)
	c.stats.PauseFrames.add(len(pkt.Buf))
	f := wire.Pause(pkt.Buf)
	d := time.Duration(f.Micros()) * time.Microsecond
	for m := f.ClassMask(); m != 0; m &= m - 1 {
		prio := bits.TrailingZeros8(m)
		ps := &c.pause[prio]
		if !s.pfc[prio].enabled || s.clock < ps.ignoreUntil {
			continue
		}
		if d == 0 {
			ps.resume(s.clock)
		} else {
			ps.set(s.clock, d, &s.pfc[prio])
		}
	}
	s.reclaim(pkt.Buf)
	s.schedule(in)
}

// watchdogDue is when the watchdog of a paused, non-empty data queue of p
// fires: once its bucket holds the limit (a pause from an empty bucket
// that lasted the limit, or a shorter one after others), if it is still
// paused then. A pause that passed that while its queue was empty fires
// when a packet arrives during it.
func (s *Switch) watchdogDue(p *port) time.Duration {
	t := never
	for m := p.dataMask & s.wdMask; m != 0; m &= m - 1 {
		prio := bits.TrailingZeros8(m)
		pf := &s.pfc[prio]
		ps := &s.coldOf(p).pause[prio]
		if !pf.watchdog {
			continue
		}
		if due := max(ps.wdDue(pf), s.clock); due < ps.end {
			t = min(t, due)
		}
	}
	return t
}

// fireWatchdogs clears every data queue of p whose pause has filled the
// watchdog's bucket (PFCConfig.WatchdogWindow): the seed's "deliberate
// drop inside the lossless class" that trades losslessness for liveness.
// The queue then ignores pause for the recovery period.
func (s *Switch) fireWatchdogs(p *port, t time.Duration) {
	for m := p.dataMask & s.wdMask; m != 0; m &= m - 1 {
		prio := uint8(bits.TrailingZeros8(m))
		pf := &s.pfc[prio]
		c := s.coldOf(p)
		ps := &c.pause[prio]
		if !pf.watchdog || !ps.paused(t) || ps.wdDue(pf) > t {
			continue
		}
		for p.data[prio].len() > 0 {
			e := s.popData(p, prio, false)
			s.drop(p, int(prio), e.packet(), DropWatchdog)
		}
		ps.resume(t)
		ps.ignoreUntil = t + pf.wdRecovery
		c.stats.WatchdogFires[prio]++
	}
}
