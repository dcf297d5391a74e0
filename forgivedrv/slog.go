package forgivedrv

import (
	"context"
	"log/slog"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// zapHandler writes the host-API server's log records (log/slog) to the
// daemon's zap logger, so both go to one log with one format.
type zapHandler struct {
	name   string // the zap logger's
	core   zapcore.Core
	fields []zap.Field
	group  string
}

// slogger returns an slog.Logger writing to log.
func slogger(log *zap.Logger) *slog.Logger {
	return slog.New(&zapHandler{name: log.Name(), core: log.Core()})
}

func zapLevel(l slog.Level) zapcore.Level {
	switch {
	case l >= slog.LevelError:
		return zapcore.ErrorLevel
	case l >= slog.LevelWarn:
		return zapcore.WarnLevel
	case l >= slog.LevelInfo:
		return zapcore.InfoLevel
	}
	return zapcore.DebugLevel
}

func (h *zapHandler) Enabled(_ context.Context, l slog.Level) bool {
	return h.core.Enabled(zapLevel(l))
}

func (h *zapHandler) field(a slog.Attr) zap.Field {
	key := a.Key
	if h.group != "" {
		key = h.group + "." + key
	}
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return zap.String(key, v.String())
	case slog.KindInt64:
		return zap.Int64(key, v.Int64())
	case slog.KindUint64:
		return zap.Uint64(key, v.Uint64())
	case slog.KindFloat64:
		return zap.Float64(key, v.Float64())
	case slog.KindBool:
		return zap.Bool(key, v.Bool())
	case slog.KindDuration:
		return zap.Duration(key, v.Duration())
	case slog.KindTime:
		return zap.Time(key, v.Time())
	}
	if err, ok := v.Any().(error); ok {
		return zap.NamedError(key, err)
	}
	return zap.Any(key, v.Any())
}

func (h *zapHandler) Handle(_ context.Context, r slog.Record) error {
	ent := zapcore.Entry{LoggerName: h.name, Level: zapLevel(r.Level), Time: r.Time, Message: r.Message}
	ce := h.core.Check(ent, nil)
	if ce == nil {
		return nil
	}
	fields := make([]zap.Field, 0, len(h.fields)+r.NumAttrs())
	fields = append(fields, h.fields...)
	r.Attrs(func(a slog.Attr) bool {
		fields = append(fields, h.field(a))
		return true
	})
	ce.Write(fields...)
	return nil
}

func (h *zapHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	n := &zapHandler{name: h.name, core: h.core, group: h.group, fields: append([]zap.Field(nil), h.fields...)}
	for _, a := range attrs {
		n.fields = append(n.fields, h.field(a))
	}
	return n
}

func (h *zapHandler) WithGroup(name string) slog.Handler {
	g := name
	if h.group != "" {
		g = h.group + "." + name
	}
	return &zapHandler{name: h.name, core: h.core, group: g, fields: h.fields}
}
