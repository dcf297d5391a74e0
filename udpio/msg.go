package udpio

import "net/netip"

// Msg is one datagram in a batch. The caller owns Buf and reuses it from
// batch to batch; the package never allocates or retains packet memory.
//
// On ReadBatch, Buf is the space offered to the kernel (its full length), and
// N, Addr, TOS and Truncated describe what arrived. On WriteBatch, Buf[:N] is
// the payload, Addr the destination and TOS the byte placed in the IPv4
// header. A received Msg therefore forwards unchanged once Addr is replaced.
//
// Tail, when not empty, is more of the datagram on WriteBatch: the kernel
// sends Buf[:N] followed by Tail, gathered from both (two iovecs), so a
// header built in Buf and a payload that lives elsewhere (forgived's
// registered memory) leave as one datagram without being copied together.
// The datagram is N+len(Tail) bytes long, which is also its size for
// segmentation offload. ReadBatch sets Tail to nil.
type Msg struct {
	Buf       []byte
	N         int
	Tail      []byte
	Addr      netip.AddrPort
	TOS       byte // DSCP<<2 | ECN, the IPv4 type-of-service byte
	Truncated bool // the datagram was longer than Buf; Buf[:N] holds its start
}

// Payload returns the bytes of the datagram in Buf: Buf[:N].
func (m *Msg) Payload() []byte { return m.Buf[:m.N] }

// Len is the length of the datagram: N, and Tail's bytes after it.
func (m *Msg) Len() int { return m.N + len(m.Tail) }

// ECN codepoints, the two low bits of the TOS byte (RFC 3168 section 5).
const (
	NotECT byte = 0b00 // the sender does not support ECN
	ECT1   byte = 0b01 // ECN-capable transport, codepoint 1
	ECT0   byte = 0b10 // ECN-capable transport, codepoint 0
	CE     byte = 0b11 // congestion experienced, set by a switch
)

// ECN returns the ECN codepoint of a TOS byte.
func ECN(tos byte) byte { return tos & 0b11 }

// DSCP returns the differentiated-services codepoint of a TOS byte.
func DSCP(tos byte) byte { return tos >> 2 }

// MakeTOS builds a TOS byte. Bits of dscp above the sixth and of ecn above the
// second are dropped, so the result is always a valid header byte.
func MakeTOS(dscp, ecn byte) byte { return dscp<<2 | ecn&0b11 }

// WithECN returns tos with its ECN codepoint replaced, keeping the DSCP: what
// a switch does when it marks CE.
func WithECN(tos, ecn byte) byte { return tos&^0b11 | ecn&0b11 }
