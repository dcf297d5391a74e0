// Package cli holds what the three commands share: the structured logger
// every daemon writes, and the usage-error marker behind exit status 2.
package cli

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Exit statuses of every command.
const (
	ExitOK     = 0
	ExitFailed = 1 // could not start, or failed while running
	ExitUsage  = 2 // bad flags, configuration or input
)

// UsageError marks an error that exits with ExitUsage.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }
func (e UsageError) Unwrap() error { return e.Err }

// Usage wraps err as a UsageError.
func Usage(err error) error { return UsageError{err} }

// IsUsage reports whether err, or one of the sentinels it wraps, is a usage
// problem.
func IsUsage(err error, sentinels ...error) bool {
	var ue UsageError
	if errors.As(err, &ue) {
		return true
	}
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// NewLogger returns a JSON zap logger writing to w at level (debug, info,
// warn or error; empty means info), with ISO 8601 timestamps.
func NewLogger(level string, w io.Writer) (*zap.Logger, error) {
	lvl, err := ParseLevel(level)
	if err != nil {
		return nil, Usage(fmt.Errorf("log level %w", err))
	}
	enc := zap.NewProductionEncoderConfig()
	enc.EncodeTime = zapcore.ISO8601TimeEncoder
	core := zapcore.NewCore(zapcore.NewJSONEncoder(enc), zapcore.Lock(zapcore.AddSync(w)), lvl)
	return zap.New(core), nil
}

// ParseLevel reads a log level as the daemons' files and flags write it:
// debug, info, warn or error; empty means info.
func ParseLevel(level string) (zapcore.Level, error) {
	switch level {
	case "":
		return zapcore.InfoLevel, nil
	case "debug", "info", "warn", "error":
		var lvl zapcore.Level
		err := lvl.Set(level)
		return lvl, err
	}
	return 0, fmt.Errorf("%q: want debug, info, warn or error", level)
}

// CheckHostPort checks a TCP listen address such as a metrics address:
// host:port with a numeric port (the host may be empty: every address).
func CheckHostPort(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err == nil {
		_, err = strconv.ParseUint(port, 10, 16)
	}
	if err != nil {
		return fmt.Errorf("%q: want host:port", addr)
	}
	return nil
}

// PerSecond returns log sampled for a data path: of each message at each
// level it writes the first entry every second and drops the rest until
// the next (zap's sampler), so a fault that repeats per packet is seen at
// once without flooding the log. The counters say how often it happened.
func PerSecond(log *zap.Logger) *zap.Logger {
	return log.WithOptions(zap.WrapCore(func(c zapcore.Core) zapcore.Core {
		return zapcore.NewSamplerWithOptions(c, time.Second, 1, 0)
	}))
}
