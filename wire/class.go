package wire

// Suggested DSCP values (the upper six bits of the IPv4 TOS byte). As in
// RoCEv2 the traffic class travels in the DSCP and the switch picks a queue by
// it; the values are conventions every NIC and switch of a fabric must share,
// not part of this header. Drivers may configure other data classes (Cisco's
// RoCEv2 design uses CS3 = 24), for instance to tell gradient all-reduce
// traffic from tensor-parallel traffic.
const (
	DSCPData    uint8 = 0  // CS0: data, and probes, which must queue behind their data
	DSCPControl uint8 = 46 // EF: ACK, NACK and PAUSE
	DSCPCNP     uint8 = 48 // CS6: congestion notifications, strict priority
)

// ECN codepoints (the low two bits of the IPv4 TOS byte, RFC 3168). Data and
// probes are sent ECT(0); a switch sets CE instead of dropping. Control
// packets are sent Not-ECT.
const (
	ECNNotECT uint8 = 0b00
	ECNECT1   uint8 = 0b01
	ECNECT0   uint8 = 0b10
	ECNCE     uint8 = 0b11
)

// DefaultDSCP returns the suggested DSCP for a packet of type t.
func DefaultDSCP(t Type) uint8 {
	switch t {
	case TypeData, TypeProbe:
		return DSCPData
	case TypeCNP:
		return DSCPCNP
	}
	return DSCPControl
}

// DefaultECN returns the ECN codepoint a sender sets on a packet of type t.
func DefaultECN(t Type) uint8 {
	if t == TypeData || t == TypeProbe {
		return ECNECT0
	}
	return ECNNotECT
}
