package nic

import "github.com/forgive-emu/forgive/wire"

// ctrlLen is the longest control packet the engine sends.
const ctrlLen = max(wire.AckLen, wire.NackLen, wire.CNPLen, wire.ProbeLen, wire.ConnectLen)

// ctrlPkt is a control packet waiting to leave: an ACK, a NACK, a CNP, a
// probe, a CONNECT or an ACCEPT, encoded when it is queued. Its fields
// are values fixed at that moment, so encoding then writes the bytes that
// encoding at Transmit would; the queue holds 42 bytes a packet instead
// of every type's fields side by side, and Transmit copies them out.
type ctrlPkt struct {
	b   [ctrlLen]byte
	n   uint8 // length of the packet in b
	tos uint8
}

// ctrlQueue is a FIFO of control packets that reuses its storage.
type ctrlQueue struct {
	q    []ctrlPkt
	head int
}

func (c *ctrlQueue) len() int { return len(c.q) - c.head }

// slot appends an empty packet and returns it.
func (c *ctrlQueue) slot() *ctrlPkt {
	if c.head > 0 && c.head == len(c.q) {
		c.q, c.head = c.q[:0], 0
	}
	c.q = append(c.q, ctrlPkt{})
	return &c.q[len(c.q)-1]
}

// set records the encoding of a packet of type t written into p.b; tos 0
// takes the type's default class and ECN codepoint.
func (p *ctrlPkt) set(pkt []byte, t wire.Type, tos uint8) {
	p.n = uint8(len(pkt))
	if tos == 0 {
		tos = wire.DefaultDSCP(t)<<2 | wire.DefaultECN(t)
	}
	p.tos = tos
}

func (c *ctrlQueue) pushAck(f wire.AckFields) {
	p := c.slot()
	p.set(wire.AppendAck(p.b[:0], f), wire.TypeAck, 0)
}

func (c *ctrlQueue) pushNack(f wire.NackFields) {
	p := c.slot()
	p.set(wire.AppendNack(p.b[:0], f), wire.TypeNack, 0)
}

func (c *ctrlQueue) pushCNP(f wire.CNPFields) {
	p := c.slot()
	p.set(wire.AppendCNPFields(p.b[:0], f), wire.TypeCNP, 0)
}

// pushConnect queues a CONNECT, or an ACCEPT when f.Accept is set.
func (c *ctrlQueue) pushConnect(f wire.ConnectFields) {
	t := wire.TypeConnect
	if f.Accept {
		t = wire.TypeAccept
	}
	p := c.slot()
	p.set(wire.AppendConnect(p.b[:0], f), t, 0)
}

// pushProbe queues a probe that travels in the class tos names.
func (c *ctrlQueue) pushProbe(f wire.ProbeFields, tos uint8) {
	p := c.slot()
	p.set(wire.AppendProbe(p.b[:0], f), wire.TypeProbe, tos)
}

// pop appends the oldest packet to dst and returns it with its TOS byte.
func (c *ctrlQueue) pop(dst []byte) ([]byte, uint8) {
	p := &c.q[c.head]
	dst = append(dst, p.b[:p.n]...)
	tos := p.tos
	c.head++
	if c.head == len(c.q) {
		c.q, c.head = c.q[:0], 0
	}
	return dst, tos
}
