package hostapi

import (
	"encoding/binary"
	"fmt"
)

// Version is the protocol version this package speaks. It travels in byte 3
// of every frame header and is agreed in the hello exchange.
const Version = 1

// Frame layout. Every SOCK_SEQPACKET message is one frame:
//
//	offset size field
//	0      3    magic "FGV"
//	3      1    version (1)
//	4      1    op code
//	5      1    flags: 0x01 reply, 0x02 error, 0x04 more
//	6      2    reserved, zero
//	8      8    request id, big-endian; 0 on daemon pushes
//	16     -    body: JSON, at most MaxBody bytes
const (
	HeaderLen = 16
	// MaxBody bounds the body of one frame. A request is always one frame;
	// a daemon message longer than this spans several frames (FlagMore).
	MaxBody = 64 << 10
	// MaxFrame is the largest frame either side sends.
	MaxFrame = HeaderLen + MaxBody
	// MaxMessage bounds a reassembled daemon message (a reply or a push
	// spanning frames), so a client never buffers without limit.
	MaxMessage = 64 << 20
)

var magic = [3]byte{'F', 'G', 'V'}

// Frame flags.
const (
	FlagReply  = 0x01 // the frame answers the request with the same id
	FlagError  = 0x02 // the body is an Error {code, message}
	FlagMore   = 0x04 // the message continues in the next frame with the same id
	knownFlags = FlagReply | FlagError | FlagMore
)

// Op is a frame's operation code.
type Op uint8

// Requests (client to daemon) and pushes (daemon to client, op >= 0x80).
const (
	OpHello            Op = 0x01
	OpRegisterMemory   Op = 0x02
	OpDeregisterMemory Op = 0x03
	OpCreateFlow       Op = 0x04
	OpDestroyFlow      Op = 0x05
	OpPostSend         Op = 0x06
	OpPostRecv         Op = 0x07
	OpBeginStep        Op = 0x08
	OpEndStep          Op = 0x09
	OpCounters         Op = 0x0A
	OpSteps            Op = 0x0B
	OpStatus           Op = 0x0C
	OpCompletion       Op = 0x81
)

var opNames = map[Op]string{
	OpHello:            "hello",
	OpRegisterMemory:   "register_memory",
	OpDeregisterMemory: "deregister_memory",
	OpCreateFlow:       "create_flow",
	OpDestroyFlow:      "destroy_flow",
	OpPostSend:         "post_send",
	OpPostRecv:         "post_recv",
	OpBeginStep:        "begin_step",
	OpEndStep:          "end_step",
	OpCounters:         "counters",
	OpSteps:            "steps",
	OpStatus:           "status",
	OpCompletion:       "completion",
}

func (o Op) String() string {
	if name, ok := opNames[o]; ok {
		return name
	}
	return fmt.Sprintf("op(0x%02x)", uint8(o))
}

// header is a decoded frame header.
type header struct {
	version  uint8
	op       Op
	flags    uint8
	reserved uint16
	id       uint64
}

// appendFrame appends one frame (header and body) to dst.
func appendFrame(dst []byte, op Op, flags uint8, id uint64, body []byte) []byte {
	dst = append(dst, magic[0], magic[1], magic[2], Version, byte(op), flags, 0, 0)
	dst = binary.BigEndian.AppendUint64(dst, id)
	return append(dst, body...)
}

// parseFrame splits a frame into header and body. Its errors are framing
// errors (ErrFraming): the peer does not speak this protocol, and the
// connection is closed. Everything a well-framed request gets wrong is
// answered instead.
func parseFrame(frame []byte) (header, []byte, error) {
	if len(frame) < HeaderLen {
		return header{}, nil, fmt.Errorf("%w: frame of %d bytes is shorter than the %d-byte header", ErrFraming, len(frame), HeaderLen)
	}
	if [3]byte(frame[:3]) != magic {
		return header{}, nil, fmt.Errorf("%w: bad magic %q", ErrFraming, frame[:3])
	}
	if len(frame) > MaxFrame {
		return header{}, nil, fmt.Errorf("%w: frame of %d bytes exceeds %d", ErrFraming, len(frame), MaxFrame)
	}
	h := header{
		version:  frame[3],
		op:       Op(frame[4]),
		flags:    frame[5],
		reserved: binary.BigEndian.Uint16(frame[6:8]),
		id:       binary.BigEndian.Uint64(frame[8:16]),
	}
	return h, frame[HeaderLen:], nil
}
