package pfcwd

import (
	"math"
	"testing"
	"time"
)

const ms = time.Millisecond

// The bucket of forgived's defaults (limit 100 ms, window 1 s, so it
// drains 100 ms in every 900 ms without pause) told as a story.
func TestDrainLosesLimitPerPeriod(t *testing.T) {
	const limit, per = 100 * ms, 900 * ms
	for _, c := range []struct {
		name             string
		level, gap, want time.Duration
	}{
		{"a full bucket after one period is empty", 100 * ms, 900 * ms, 0},
		{"after half a period it holds half", 100 * ms, 450 * ms, 50 * ms},
		{"a part-full bucket empties sooner", 30 * ms, 270 * ms, 0},
		{"and holds the rest before", 30 * ms, 90 * ms, 20 * ms},
		{"no gap, no drain", 70 * ms, 0, 70 * ms},
		{"a negative gap (a late call) drains nothing", 70 * ms, -5 * ms, 70 * ms},
		{"an empty bucket stays empty", 0, time.Second, 0},
		{"a negative level is read as empty", -ms, time.Second, 0},
	} {
		if got := Drain(c.level, c.gap, limit, per); got != c.want {
			t.Errorf("%s: Drain(%v, %v) = %v, want %v", c.name, c.level, c.gap, got, c.want)
		}
	}
}

func TestDrainWithoutAPeriodKeepsTheLevel(t *testing.T) {
	if got := Drain(40*ms, time.Hour, 100*ms, 0); got != 40*ms {
		t.Fatalf("Drain with per 0 = %v, want the level, 40ms", got)
	}
}

// gap × limit past 2^64 ns² must not wrap into a small drain.
func TestDrainDoesNotOverflow(t *testing.T) {
	if got := Drain(time.Hour, math.MaxInt64, time.Hour, time.Nanosecond); got != 0 {
		t.Fatalf("Drain over a huge gap = %v, want 0", got)
	}
	if got := Drain(time.Hour, math.MaxInt64, 1, math.MaxInt64); got != time.Hour-1 {
		t.Fatalf("Drain of 1 ns over MaxInt64 ns per MaxInt64 = %v, want %v", got, time.Hour-1)
	}
}

// A zero setting takes its default, and the recovery and window follow a
// limit that is set; a negative limit turns the watchdog off.
func TestSettingsFillTheDefaults(t *testing.T) {
	for _, c := range []struct {
		name                    string
		limit, recovery, window time.Duration
		wantL, wantR, wantW     time.Duration
		wantOn                  bool
	}{
		{"all absent: 100 ms, recovery the limit, a window of ten limits", 0, 0, 0, 100 * ms, 100 * ms, time.Second, true},
		{"a limit set: the recovery and window follow it", 20 * ms, 0, 0, 20 * ms, 20 * ms, 200 * ms, true},
		{"every setting set: kept", 20 * ms, 5 * ms, 70 * ms, 20 * ms, 5 * ms, 70 * ms, true},
		{"the window set alone: kept, even if not longer than the limit", 0, 0, 50 * ms, 100 * ms, 100 * ms, 50 * ms, true},
		{"a negative limit: off", -1, 5 * ms, 70 * ms, 0, 0, 0, false},
	} {
		l, r, w, on := Settings(c.limit, c.recovery, c.window)
		if l != c.wantL || r != c.wantR || w != c.wantW || on != c.wantOn {
			t.Errorf("%s: Settings(%v, %v, %v) = %v, %v, %v, %v; want %v, %v, %v, %v", c.name,
				c.limit, c.recovery, c.window, l, r, w, on, c.wantL, c.wantR, c.wantW, c.wantOn)
		}
	}
}
