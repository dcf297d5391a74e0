package forgivedrv

import (
	"errors"
	"log/slog"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// The server's slog records reach the daemon's zap log with their level,
// the logger's name, and every attribute under its key, typed.
func TestSloggerWritesToZap(t *testing.T) {
	core, logs := observer.New(zap.InfoLevel)
	log := slogger(zap.New(core).Named("forgived").Named("hostapi")).With(slog.String("socket", "/run/x.sock"))
	log.Debug("below the level")
	log.Warn("refused client", slog.Int("refused_since_last_line", 3), slog.Uint64("uid", 1000),
		slog.Duration("backoff", time.Second), slog.Any("error", errors.New("boom")), slog.Bool("ok", true))
	entries := logs.AllUntimed()
	if len(entries) != 1 {
		t.Fatalf("%d entries, want the warning alone: %+v", len(entries), entries)
	}
	e := entries[0]
	if e.Level != zapcore.WarnLevel || e.Message != "refused client" || e.LoggerName != "forgived.hostapi" {
		t.Fatalf("entry %+v", e.Entry)
	}
	got := e.ContextMap()
	want := map[string]any{"socket": "/run/x.sock", "refused_since_last_line": int64(3), "uid": uint64(1000),
		"backoff": time.Second, "error": "boom", "ok": true}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("field %s = %#v, want %#v", k, got[k], v)
		}
	}
	if len(got) != len(want) {
		t.Errorf("fields %v, want %v", got, want)
	}
}
