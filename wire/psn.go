package wire

// PSN is a 32-bit packet sequence number. Arithmetic wraps modulo 2^32 and
// comparisons are wrap-safe (serial-number arithmetic, RFC 1982): a is before
// b when the signed 32-bit distance from a to b is positive. Two PSNs more
// than 2^31 apart cannot be ordered; the send window keeps live PSNs far
// closer than that.
type PSN uint32

// Add returns p advanced by n, wrapping modulo 2^32.
func (p PSN) Add(n uint32) PSN { return p + PSN(n) }

// Sub returns the signed distance p - q.
func (p PSN) Sub(q PSN) int32 { return int32(uint32(p) - uint32(q)) }

// Before reports whether p comes strictly before q.
func (p PSN) Before(q PSN) bool { return p.Sub(q) < 0 }

// BeforeEq reports whether p comes before q or equals it.
func (p PSN) BeforeEq(q PSN) bool { return p.Sub(q) <= 0 }

// After reports whether p comes strictly after q.
func (p PSN) After(q PSN) bool { return p.Sub(q) > 0 }

// InWindow reports whether p lies in [lo, lo+size).
func (p PSN) InWindow(lo PSN, size uint32) bool { return uint32(p)-uint32(lo) < size }

// InitialPSN is the first PSN a flow end sends, derived from its own tag
// with splitmix64's finaliser: the peer learns both from the one value the
// handshake carries, and an off-path sender that does not know the tag
// cannot guess where the flow's PSNs start. Both ends must compute it the
// same way; it is part of the wire format (docs/wire.md).
func InitialPSN(tag uint32) PSN {
	x := uint64(tag) + 0x9E3779B97F4A7C15
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return PSN(uint32(x ^ x>>31))
}
