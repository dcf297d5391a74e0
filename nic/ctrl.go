package nic

import "github.com/forgive-emu/forgive/wire"

// ctrlPkt is a control packet waiting to leave: an ACK, a NACK, a CNP or a
// probe, kept as fields and encoded only when the driver asks for it.
type ctrlPkt struct {
	typ   wire.Type
	ack   wire.AckFields
	nack  wire.NackFields
	probe wire.ProbeFields
	cnp   wire.CNPFields
	conn  wire.ConnectFields
	tos   uint8 // probes travel in their flow's class; 0 takes the type's default
}

// ctrlQueue is a FIFO of control packets that reuses its storage.
type ctrlQueue struct {
	q    []ctrlPkt
	head int
}

func (c *ctrlQueue) len() int { return len(c.q) - c.head }

func (c *ctrlQueue) push(p ctrlPkt) {
	if c.head > 0 && c.head == len(c.q) {
		c.q, c.head = c.q[:0], 0
	}
	c.q = append(c.q, p)
}

func (c *ctrlQueue) pop() ctrlPkt {
	p := c.q[c.head]
	c.head++
	if c.head == len(c.q) {
		c.q, c.head = c.q[:0], 0
	}
	return p
}

// encode appends the packet to dst and returns it with its TOS byte.
func (p *ctrlPkt) encode(dst []byte) ([]byte, uint8) {
	switch p.typ {
	case wire.TypeAck:
		dst = wire.AppendAck(dst, p.ack)
	case wire.TypeNack:
		dst = wire.AppendNack(dst, p.nack)
	case wire.TypeCNP:
		dst = wire.AppendCNPFields(dst, p.cnp)
	case wire.TypeConnect, wire.TypeAccept:
		dst = wire.AppendConnect(dst, p.conn)
	case wire.TypeProbe:
		dst = wire.AppendProbe(dst, p.probe)
	}
	if p.tos != 0 {
		return dst, p.tos
	}
	return dst, wire.DefaultDSCP(p.typ)<<2 | wire.DefaultECN(p.typ)
}
