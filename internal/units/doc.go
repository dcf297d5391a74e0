// Package units parses the quantities of the daemons' configuration files:
// link rates ("400Gbps", "1.5Gb/s"), sizes ("4MiB", "800KB", "4096") and
// durations ("2us", "1.5ms"), and gives them types (Rate, Size, Duration)
// that decode from a file's text and print back in the same notation.
//
// # What it owns and what it must not import
//
// It owns the notation and nothing else: no defaults, no validation of what
// a quantity is for. It imports only the standard library's errors, fmt,
// math, math/big, strings and time, and no package of this module, so
// every layer may use it, the sans-I/O engines included: Rate is the type
// of every configured link rate, from the YAML files to nic, congestion,
// switchcore and the simulator. The types decode through
// encoding.TextUnmarshaler, which the YAML decoder calls with a scalar's
// text; naming the field and the line of a bad value is the config
// loader's job (internal/yamlconf), not this package's.
//
// # Notation
//
// A quantity is a decimal number (digits with at most one point, no sign,
// no exponent) immediately followed by a unit, and its value must be a whole
// number of the base unit (bit/s, byte, nanosecond) that fits in an int64:
// exact decimal arithmetic, so "0.1GB" is exactly 100000000 bytes.
//
//	rates  bps kbps Kbps Mbps Gbps Tbps, or b/s kb/s Kb/s Mb/s Gb/s Tb/s (powers of 1000);
//	       a bare number is bits per second
//	sizes  B KB MB GB TB (powers of 1000), KiB MiB GiB TiB (powers of 1024);
//	       a bare number is bytes
//
// Rates are bits, never bytes: "1GBps" is refused rather than guessed.
// Durations are Go's time.ParseDuration notation ("1h2m", "300ms", "2us",
// "2µs"), which already accepts "us" for microseconds; a bare "0" is zero
// and a negative duration is refused.
package units
