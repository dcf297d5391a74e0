package wire

import (
	"encoding/binary"
	"fmt"
)

// Offsets of the control packets' own fields (the diagrams below).
const (
	cnpReserved = 2 // 2-3, and the flag byte

	probeEntropy  = 2
	probeSubflow  = 24
	probeSubflows = 25
	probeReserved = 26 // 26-27

	pauseClassMask = 2
	pauseReserved3 = 3
	pauseMicros    = 8
	pauseReserved  = 10 // 10-11
)

// CNP is a view of a congestion notification packet, sent by the receiver
// (the notification point) to the sender of a CE-marked packet, at most once
// per flow per interval, on the strict-priority class as in RoCEv2:
//
//	 0: ver|type   1: flags (zero)   2-3: reserved, zero
//	 4-5: src host                   6-7: dst host
//	 8-11: flow id
//	12-15: PSN of the CE-marked packet that triggered it
type CNP []byte

// CNPFields holds the values of a CNP; AppendCNP takes them one by one.
type CNPFields struct {
	Src, Dst uint16
	Flow     uint32
	Tags     Tags
	PSN      PSN
}

// ParseCNP validates b as a CNP.
func ParseCNP(b []byte) (CNP, error) {
	if err := checkFixed(b, TypeCNP, CNPLen); err != nil {
		return nil, err
	}
	if err := checkReserved(TypeCNP, b[offFlags:offFlags+3], offFlags); err != nil {
		return nil, err
	}
	return CNP(b), nil
}

// AppendCNP appends a CNP to dst.
func AppendCNP(dst []byte, src, dst16 uint16, flow uint32, psn PSN) []byte {
	return AppendCNPFields(dst, CNPFields{Src: src, Dst: dst16, Flow: flow, PSN: psn})
}

// AppendCNPFields appends a CNP with every field, the tags included.
func AppendCNPFields(dst []byte, f CNPFields) []byte {
	dst, b := grow(dst, CNPLen)
	putCommon(b, TypeCNP, 0, f.Src, f.Dst)
	b[cnpReserved], b[cnpReserved+1] = 0, 0
	binary.BigEndian.PutUint32(b[offFlow:], f.Flow)
	putTags(b, f.Tags)
	binary.BigEndian.PutUint32(b[offPSN:], uint32(f.PSN))
	return dst
}

// Fields returns the values of c.
func (c CNP) Fields() CNPFields {
	return CNPFields{Src: c.Src(), Dst: c.Dst(), Flow: c.Flow(), Tags: c.Tags(), PSN: c.PSN()}
}

// Src returns the source host id (the notification point).
func (c CNP) Src() uint16 { return binary.BigEndian.Uint16(c[offSrc:]) }

// Dst returns the destination host id (the reaction point).
func (c CNP) Dst() uint16 { return binary.BigEndian.Uint16(c[offDst:]) }

// Flow returns the flow id.
func (c CNP) Flow() uint32 { return binary.BigEndian.Uint32(c[offFlow:]) }

// Tags returns the destination and source tags.
func (c CNP) Tags() Tags { t, _ := Header(c).Tags(); return t }

// PSN returns the PSN of the CE-marked packet.
func (c CNP) PSN() PSN { return PSN(binary.BigEndian.Uint32(c[offPSN:])) }

// ProbeKind says why a sender probes (Ordered Chaos, PFLD).
type ProbeKind uint8

// Probe kinds.
const (
	ProbeTail     ProbeKind = 1 // after a subflow's last packet
	ProbeRetx     ProbeKind = 2 // sent with each retransmission
	ProbePeriodic ProbeKind = 3 // every few packets of a subflow
)

func (k ProbeKind) String() string {
	switch k {
	case ProbeTail:
		return "tail"
	case ProbeRetx:
		return "retx"
	case ProbePeriodic:
		return "periodic"
	}
	return fmt.Sprintf("ProbeKind(%d)", uint8(k))
}

// Probe is a view of a loss-detection probe. A subflow is delivered in order,
// so when a probe arrives every packet the sender put on that subflow before
// it has either arrived or been lost without a trim:
//
//	 0: ver|type   1: kind       2-3: entropy (the subflow's path)
//	 4-5: src host               6-7: dst host
//	 8-11: flow id
//	12-15: PSN: the last PSN sent on the subflow before this probe
//	16: subflow index   17: subflow count   18-19: reserved, zero
type Probe []byte

// ProbeFields holds the values used to build a probe.
type ProbeFields struct {
	Kind     ProbeKind
	Entropy  uint16
	Src, Dst uint16
	Flow     uint32
	Tags     Tags
	PSN      PSN
	Subflow  uint8
	Subflows uint8
}

// ParseProbe validates b as a probe.
func ParseProbe(b []byte) (Probe, error) {
	if err := checkFixed(b, TypeProbe, ProbeLen); err != nil {
		return nil, err
	}
	p := Probe(b)
	if k := p.Kind(); k < ProbeTail || k > ProbePeriodic {
		return nil, fmt.Errorf("%w: probe kind %d", ErrBadField, k)
	}
	// A subflow count of 0 means a single path, whose index can only be 0.
	if p.Subflow() >= max(p.Subflows(), 1) {
		return nil, fmt.Errorf("%w: subflow %d of %d", ErrBadField, p.Subflow(), p.Subflows())
	}
	if err := checkReserved(TypeProbe, b[probeReserved:probeReserved+2], probeReserved); err != nil {
		return nil, err
	}
	return p, nil
}

// AppendProbe appends a probe to dst.
func AppendProbe(dst []byte, f ProbeFields) []byte {
	dst, b := grow(dst, ProbeLen)
	putCommon(b, TypeProbe, uint8(f.Kind), f.Src, f.Dst)
	binary.BigEndian.PutUint16(b[probeEntropy:], f.Entropy)
	binary.BigEndian.PutUint32(b[offFlow:], f.Flow)
	putTags(b, f.Tags)
	binary.BigEndian.PutUint32(b[offPSN:], uint32(f.PSN))
	b[probeSubflow], b[probeSubflows], b[probeReserved], b[probeReserved+1] = f.Subflow, f.Subflows, 0, 0
	return dst
}

// Fields returns the values of p.
func (p Probe) Fields() ProbeFields {
	return ProbeFields{Kind: p.Kind(), Entropy: p.Entropy(), Src: p.Src(), Dst: p.Dst(),
		Flow: p.Flow(), Tags: p.Tags(), PSN: p.PSN(), Subflow: p.Subflow(), Subflows: p.Subflows()}
}

// Kind returns the probe kind.
func (p Probe) Kind() ProbeKind { return ProbeKind(p[offFlags]) }

// Entropy returns the path selector.
func (p Probe) Entropy() uint16 { return binary.BigEndian.Uint16(p[probeEntropy:]) }

// Src returns the source host id (the data sender).
func (p Probe) Src() uint16 { return binary.BigEndian.Uint16(p[offSrc:]) }

// Dst returns the destination host id (the receiver).
func (p Probe) Dst() uint16 { return binary.BigEndian.Uint16(p[offDst:]) }

// Flow returns the flow id.
func (p Probe) Flow() uint32 { return binary.BigEndian.Uint32(p[offFlow:]) }

// Tags returns the destination and source tags.
func (p Probe) Tags() Tags { t, _ := Header(p).Tags(); return t }

// PSN returns the last PSN sent on the subflow before the probe.
func (p Probe) PSN() PSN { return PSN(binary.BigEndian.Uint32(p[offPSN:])) }

// Subflow returns the subflow index.
func (p Probe) Subflow() uint8 { return p[probeSubflow] }

// Subflows returns the subflow count.
func (p Probe) Subflows() uint8 { return p[probeSubflows] }

// Pause is a view of a priority flow control frame, sent by a switch port or
// a host to its link neighbour. It stops (or, with zero time, resumes) the
// neighbour's transmission of the classes in the mask, as an 802.1Qbb frame
// does; time is in microseconds rather than 512-bit quanta so a scaled-down
// link keeps the same meaning:
//
//	 0: ver|type   1: flags (zero)   2: class mask   3: reserved, zero
//	 4-5: src host (or 0)            6-7: dst host (or 0: link-local)
//	 8-9: pause time in microseconds (0: resume)
//	10-11: reserved, zero
type Pause []byte

// PauseFields holds the values of a PAUSE frame.
type PauseFields struct {
	Src, Dst  uint16 // 0 when link-local
	ClassMask uint8
	Micros    uint16
}

// ParsePause validates b as a PAUSE frame.
func ParsePause(b []byte) (Pause, error) {
	if err := checkFixed(b, TypePause, PauseLen); err != nil {
		return nil, err
	}
	if err := checkReserved(TypePause, b[offFlags:offFlags+1], offFlags); err != nil {
		return nil, err
	}
	if err := checkReserved(TypePause, b[pauseReserved3:pauseReserved3+1], pauseReserved3); err != nil {
		return nil, err
	}
	if err := checkReserved(TypePause, b[pauseReserved:pauseReserved+2], pauseReserved); err != nil {
		return nil, err
	}
	return Pause(b), nil
}

// AppendPause appends a link-local PAUSE frame (both hosts 0) to dst.
func AppendPause(dst []byte, classMask uint8, micros uint16) []byte {
	return AppendPauseFields(dst, PauseFields{ClassMask: classMask, Micros: micros})
}

// AppendPauseFields appends a PAUSE frame that names its hosts to dst.
func AppendPauseFields(dst []byte, f PauseFields) []byte {
	dst, b := grow(dst, PauseLen)
	putCommon(b, TypePause, 0, f.Src, f.Dst)
	b[pauseClassMask], b[pauseReserved3] = f.ClassMask, 0
	binary.BigEndian.PutUint16(b[pauseMicros:], f.Micros)
	b[pauseReserved], b[pauseReserved+1] = 0, 0
	return dst
}

// Fields returns the values of p.
func (p Pause) Fields() PauseFields {
	return PauseFields{Src: p.Src(), Dst: p.Dst(), ClassMask: p.ClassMask(), Micros: p.Micros()}
}

// Src returns the source host id, or 0.
func (p Pause) Src() uint16 { return binary.BigEndian.Uint16(p[offSrc:]) }

// Dst returns the destination host id, or 0 for the link neighbour.
func (p Pause) Dst() uint16 { return binary.BigEndian.Uint16(p[offDst:]) }

// ClassMask returns the classes the frame applies to.
func (p Pause) ClassMask() uint8 { return p[pauseClassMask] }

// Micros returns the pause time in microseconds; zero resumes.
func (p Pause) Micros() uint16 { return binary.BigEndian.Uint16(p[pauseMicros:]) }
