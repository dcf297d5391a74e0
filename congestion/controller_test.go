package congestion

import (
	"errors"
	"testing"
	"time"
)

func TestParseKind(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Kind
	}{
		{"dcqcn", KindDCQCN},
		{"DCQCN", KindDCQCN},
		{" none\n", KindNone},
	} {
		got, err := ParseKind(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseKind(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
		if got.String() != tc.want.String() {
			t.Errorf("String round trip of %q", tc.in)
		}
	}
	for _, bad := range []string{"", "reno", "dcqcn2"} {
		if _, err := ParseKind(bad); !errors.Is(err, ErrUnknownKind) {
			t.Errorf("ParseKind(%q) error = %v, want ErrUnknownKind", bad, err)
		}
	}
}

func TestKindText(t *testing.T) {
	for _, k := range []Kind{KindDCQCN, KindNone} {
		text, err := k.MarshalText()
		if err != nil {
			t.Fatal(err)
		}
		var back Kind
		if err := back.UnmarshalText(text); err != nil || back != k {
			t.Errorf("text round trip of %v: %q -> %v, %v", k, text, back, err)
		}
	}
	if _, err := Kind(9).MarshalText(); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("MarshalText(Kind(9)) error = %v", err)
	}
	var k Kind
	if err := k.UnmarshalText([]byte("cubic")); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("UnmarshalText(cubic) error = %v", err)
	}
}

func TestNewSelectsByKind(t *testing.T) {
	cfg := DefaultDCQCN(100 * G)
	c, err := New(KindDCQCN, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(*DCQCN); !ok {
		t.Errorf("New(dcqcn) = %T", c)
	}
	c, err = New(KindNone, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.(*LineRate); !ok {
		t.Errorf("New(none) = %T", c)
	}
	if _, err := New(Kind(7), cfg); !errors.Is(err, ErrUnknownKind) {
		t.Errorf("New(Kind(7)) error = %v", err)
	}
	if _, err := New(KindNone, DCQCNConfig{}); !errors.Is(err, ErrConfig) {
		t.Errorf("New(none) with no line rate: error = %v", err)
	}
}

// "With packet trimming on and congestion control off": the baseline keeps
// line rate whatever arrives, and still counts the CNPs it ignored.
func TestLineRateIgnoresButCountsCNPs(t *testing.T) {
	l, err := NewLineRate(100 * G)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		l.OnCNP(time.Duration(i) * us)
		l.OnSent(time.Duration(i)*us, 1<<20)
		l.Advance(time.Duration(i) * us)
	}
	if l.Rate() != 100*G {
		t.Errorf("Rate = %v, want line rate", l.Rate())
	}
	if _, ok := l.NextDeadline(); ok {
		t.Error("LineRate asked for a wake-up")
	}
	if got := l.Stats(); got != (Stats{CNPs: 10}) {
		t.Errorf("Stats = %+v, want 10 CNPs and nothing else", got)
	}
}
