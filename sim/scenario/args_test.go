package scenario

import (
	"strings"
	"testing"
	"time"
)

// The arguments read through internal/units: the scenarios' rate
// shorthand, sizes with either family of suffixes, durations; a value
// that does not parse is named by unused, with what was wanted.
func TestArgsReadUnits(t *testing.T) {
	a := args{{"rate", "100G"}, {"low", "400M"}, {"bits", "1500"}, {"mtu", "4KiB"}, {"buf", "20MB"}, {"d", "2us"}, {"n", "7"}, {"ok", "true"}}
	if got := a.rate("rate", 0); got != 100e9 {
		t.Errorf("rate 100G = %v, want 100Gbps", got)
	}
	if got := a.rate("low", 0); got != 400e6 {
		t.Errorf("rate 400M = %v, want 400Mbps", got)
	}
	if got := a.rate("bits", 0); got != 1500 {
		t.Errorf("rate 1500 = %v, want 1500bps", got)
	}
	if got := a.size("mtu", 0); got != 4096 {
		t.Errorf("size 4KiB = %d, want 4096", got)
	}
	if got := a.size("buf", 0); got != 20e6 {
		t.Errorf("size 20MB = %d, want 20000000", got)
	}
	if got := a.dur("d", 0); got != 2*time.Microsecond {
		t.Errorf("dur 2us = %v", got)
	}
	if got := a.int("n", 0); got != 7 {
		t.Errorf("int 7 = %d", got)
	}
	if !a.bool("ok", false) {
		t.Error("bool true read false")
	}
	if got := a.size("absent", 9); got != 9 {
		t.Errorf("an absent size = %d, want its default 9", got)
	}
	if err := a.unused(); err != nil {
		t.Errorf("every argument was read, yet %v", err)
	}
}

func TestArgsRefuseBadValues(t *testing.T) {
	for _, c := range []struct {
		arg  Arg
		read func(args)
		want string
	}{
		{Arg{"rate", "0G"}, func(a args) { a.rate("rate", 1) }, "want a rate"},
		{Arg{"rate", "fast"}, func(a args) { a.rate("rate", 1) }, "want a rate"},
		{Arg{"rate", "1e9"}, func(a args) { a.rate("rate", 1) }, "want a rate"},
		{Arg{"size", "-1"}, func(a args) { a.size("size", 1) }, "want a size"},
		{Arg{"size", "3furlongs"}, func(a args) { a.size("size", 1) }, "want a size"},
		{Arg{"delay", "-2us"}, func(a args) { a.dur("delay", 1) }, "want a duration"},
		{Arg{"n", "x"}, func(a args) { a.int("n", 1) }, "want an integer"},
		{Arg{"b", "maybe"}, func(a args) { a.bool("b", true) }, "want true or false"},
		{Arg{"colour", "blue"}, func(args) {}, `unknown argument "colour"`},
	} {
		a := args{c.arg}
		c.read(a)
		err := a.unused()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%s: got %v, want an error with %q", c.arg.Key, c.arg.Val, err, c.want)
		}
	}
}
