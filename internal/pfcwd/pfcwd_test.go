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
