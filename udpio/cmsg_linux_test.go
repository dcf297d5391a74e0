package udpio

import (
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
	"pgregory.net/rapid"
)

// kernelTOS builds the control message Linux attaches under IP_RECVTOS: level
// IPPROTO_IP, type IP_TOS, one byte of data (ip_cmsg_recv_tos).
func kernelTOS(level, typ int32, data ...byte) []byte {
	b := make([]byte, unix.CmsgSpace(len(data)))
	h := unix.Cmsghdr{Level: level, Type: typ}
	h.SetLen(unix.CmsgLen(len(data)))
	putCmsghdr(b, h)
	copy(b[unix.CmsgLen(0):], data)
	return b
}

// putCmsghdr writes h with x/sys's own layout, as an independent check of
// the encoding/binary reading in parseTOS.
func putCmsghdr(b []byte, h unix.Cmsghdr) {
	copy(b, unsafe.Slice((*byte)(unsafe.Pointer(&h)), unix.SizeofCmsghdr))
}

func TestParseTOSReadsTheKernelsOneByteMessage(t *testing.T) {
	tos, ok := parseTOS(kernelTOS(unix.IPPROTO_IP, unix.IP_TOS, 0xBA))
	if !ok || tos != 0xBA {
		t.Fatalf("parseTOS = %#x, %v; want 0xba, true", tos, ok)
	}
}

func TestParseTOSSkipsOtherMessages(t *testing.T) {
	oob := append(kernelTOS(unix.IPPROTO_IP, unix.IP_TTL, 64, 0, 0, 0),
		kernelTOS(unix.IPPROTO_IP, unix.IP_TOS, 0x03)...)
	tos, ok := parseTOS(oob)
	if !ok || tos != 0x03 {
		t.Fatalf("parseTOS = %#x, %v; want 0x03, true", tos, ok)
	}
}

func TestParseTOSReportsAbsence(t *testing.T) {
	for name, oob := range map[string][]byte{
		"empty":       nil,
		"short":       {1, 2, 3},
		"other level": kernelTOS(unix.SOL_SOCKET, unix.IP_TOS, 7),
		"no data":     kernelTOS(unix.IPPROTO_IP, unix.IP_TOS),
	} {
		if tos, ok := parseTOS(oob); ok {
			t.Errorf("%s: parseTOS = %#x, true; want false", name, tos)
		}
	}
}

// What WriteBatch puts on each sendmsg must read back as the same byte.
func TestSendControlMessageRoundTrips(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		tos := rapid.Byte().Draw(t, "tos")
		b := make([]byte, tosCmsgSpace)
		putTOSHeader(b)
		setTOSValue(b, tos)
		got, ok := parseTOS(b)
		if !ok || got != tos {
			t.Fatalf("parseTOS(send cmsg for %#x) = %#x, %v", tos, got, ok)
		}
	})
}

// parseTOS reads kernel output, but a wrong length must never take it out of
// bounds: whatever the bytes, it returns.
func FuzzParseTOS(f *testing.F) {
	f.Add(kernelTOS(unix.IPPROTO_IP, unix.IP_TOS, 0xBA))
	f.Add(append(kernelTOS(unix.IPPROTO_IP, unix.IP_TTL, 1, 0, 0, 0), kernelTOS(unix.IPPROTO_IP, unix.IP_TOS, 2)...))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 1, 0, 0, 0})
	f.Fuzz(func(t *testing.T, oob []byte) {
		tos, ok := parseTOS(oob)
		if !ok && tos != 0 {
			t.Fatalf("parseTOS reported no TOS but returned %#x", tos)
		}
	})
}
