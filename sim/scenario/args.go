package scenario

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/forgive-emu/forgive/internal/units"
)

// args reads a directive's arguments, remembering the first bad one and
// which were used.
type args []Arg

func (a args) find(k string) int {
	for i := range a {
		if a[i].Key == k {
			return i
		}
	}
	return -1
}

func (a args) has(k string) bool { return a.find(k) >= 0 }

// take returns k's value and marks it used (its key emptied).
func (a args) take(k string) (string, bool) {
	i := a.find(k)
	if i < 0 {
		return "", false
	}
	v := a[i].Val
	a[i].Key = "\x00" + a[i].Key
	return v, true
}

// sub hands the arguments named in keys to a later reader, unread here.
func (a args) sub(keys ...string) []Arg {
	var out []Arg
	for _, k := range keys {
		if v, ok := a.take(k); ok {
			out = append(out, Arg{Key: k, Val: v})
		}
	}
	return out
}

func (a args) bad(k, v, want string) {
	for i := range a {
		if a[i].Key == "\x00"+k {
			a[i].Key = "\x01" + k + "=" + v + ": want " + want
		}
	}
}

// unused reports the first argument nobody read, or one that did not parse.
func (a args) unused() error {
	for _, x := range a {
		switch {
		case strings.HasPrefix(x.Key, "\x01"):
			return fmt.Errorf("bad argument %s", x.Key[1:])
		case !strings.HasPrefix(x.Key, "\x00"):
			return fmt.Errorf("unknown argument %q", x.Key)
		}
	}
	return nil
}

func (a args) str(k, def string) string {
	if v, ok := a.take(k); ok {
		return v
	}
	return def
}

func (a args) int(k string, def int) int {
	v, ok := a.take(k)
	if !ok {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		a.bad(k, v, "an integer")
		return def
	}
	return n
}

func (a args) bool(k string, def bool) bool {
	v, ok := a.take(k)
	if !ok {
		return def
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		a.bad(k, v, "true or false")
		return def
	}
	return b
}

// dur reads a non-negative duration (units.ParseDuration).
func (a args) dur(k string, def time.Duration) time.Duration {
	v, ok := a.take(k)
	if !ok {
		return def
	}
	d, err := units.ParseDuration(v)
	if err != nil {
		a.bad(k, v, "a duration such as 2us")
		return def
	}
	return d
}

// size reads a size in bytes (units.ParseSize).
func (a args) size(k string, def int64) int64 {
	v, ok := a.take(k)
	if !ok {
		return def
	}
	n, err := units.ParseSize(v)
	if err != nil {
		a.bad(k, v, "a size such as 4096, 64KiB or 20MB")
		return def
	}
	return n
}

// rate reads a positive rate in bits per second: units.ParseRate's
// notation, where the scenarios' shorthand G and M stand for Gbps and
// Mbps.
func (a args) rate(k string, def units.Rate) units.Rate {
	v, ok := a.take(k)
	if !ok {
		return def
	}
	r, err := parseRate(v)
	if err != nil {
		a.bad(k, v, "a rate such as 100G or 400M")
		return def
	}
	return units.Rate(r)
}

func parseRate(v string) (int64, error) {
	if s, ok := strings.CutSuffix(v, "G"); ok {
		v = s + "Gbps"
	} else if s, ok := strings.CutSuffix(v, "M"); ok {
		v = s + "Mbps"
	}
	r, err := units.ParseRate(v)
	if err == nil && r <= 0 {
		err = fmt.Errorf("rate %q: want more than 0", v)
	}
	return r, err
}
