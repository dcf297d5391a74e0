package switchcore

import (
	"math/bits"

	"github.com/forgive-emu/forgive/internal/splitmix"
	"github.com/forgive-emu/forgive/wire"
)

// routeTable maps a destination host id to its equal-cost egress ports.
// It is dense (indexed by host id) so a lookup is two slice reads.
type routeTable struct {
	byDst []portSet // index: destination host id
	def   portSet
	ports []PortID // backing array of every portSet
	salt  uint64   // per-switch hash salt, so switches do not polarise
}

// portSet is the equal-cost egress ports of a destination: one port
// itself (n == 1: off is that port, so a lookup reads no second array),
// or the slice [off, off+n) of routeTable.ports. Destinations with the
// same list of ports share one slice (a switch's uplinks, the same for
// every destination not below it), so the lists a lookup reads stay few
// and in cache however many hosts the fabric has.
type portSet struct {
	off, n uint32
}

func compileRoutes(routes map[uint16][]PortID, def []PortID, salt uint64) routeTable {
	rt := routeTable{salt: salt}
	maxDst := -1
	for dst := range routes {
		maxDst = max(maxDst, int(dst))
	}
	rt.byDst = make([]portSet, maxDst+1)
	shared := map[string]uint32{} // a list of ports, as bytes, to its offset
	add := func(ports []PortID) portSet {
		if len(ports) == 1 {
			return portSet{off: uint32(ports[0]), n: 1}
		}
		key := make([]byte, 0, 2*len(ports))
		for _, p := range ports {
			key = append(key, byte(p>>8), byte(p))
		}
		off, ok := shared[string(key)]
		if !ok {
			off = uint32(len(rt.ports))
			rt.ports = append(rt.ports, ports...)
			shared[string(key)] = off
		}
		return portSet{off: off, n: uint32(len(ports))}
	}
	for dst, ports := range routes {
		rt.byDst[dst] = add(ports)
	}
	rt.def = add(def)
	return rt
}

// lookup picks the egress port of a validated packet from its header:
// its destination, and for ECMP its flow id and entropy (zero where its
// type has none: every type but PAUSE, which is never routed, has a flow
// id; data packets and probes carry an entropy, so a probe takes the path
// of the subflow it probes).
func (rt *routeTable) lookup(h *wire.Summary) (PortID, bool) {
	dst := h.Dst
	set := rt.def
	if int(dst) < len(rt.byDst) && rt.byDst[dst].n > 0 {
		set = rt.byDst[dst]
	}
	switch set.n {
	case 0:
		return 0, false
	case 1:
		return PortID(set.off), true
	}
	return rt.ports[set.off+ecmpIndex(rt.salt, dst, h.Flow, h.Entropy, set.n)], true
}

// ecmpIndex hashes (dst, flow, entropy) to one of n ports. The mix is a
// full-avalanche 64-bit finalizer, so flipping any input bit moves about
// half the output bits, and the top bits are mapped onto [0, n) by
// multiplication rather than modulo (Lemire's reduction).
func ecmpIndex(salt uint64, dst uint16, flow uint32, entropy uint16, n uint32) uint32 {
	key := uint64(dst) | uint64(entropy)<<16 | uint64(flow)<<32
	hi, _ := bits.Mul64(splitmix.Mix(key^salt), uint64(n))
	return uint32(hi)
}
