package udpio

import (
	"encoding/binary"

	"golang.org/x/sys/unix"
)

// The IPv4 TOS byte travels in control messages in both directions:
// IP_RECVTOS makes the kernel attach an IPPROTO_IP/IP_TOS message to every
// received datagram, and an IPPROTO_IP/IP_TOS message on sendmsg sets the
// byte for that one datagram. golang.org/x/net/ipv4.ControlMessage has no TOS
// field, so both are handled here as raw bytes.

// cmsgHeaderLen is the size of struct cmsghdr: a length word of the
// platform's long size followed by two int32s (level and type).
const cmsgHeaderLen = unix.SizeofCmsghdr

// cmsgLenWord is the size of cmsghdr.cmsg_len (size_t on Linux).
const cmsgLenWord = unix.SizeofCmsghdr - 8

// Sizes of the control buffers kept per message slot.
var (
	// tosCmsgSpace holds one IP_TOS message carrying an int, as sent.
	tosCmsgSpace = unix.CmsgSpace(4)
	// recvOOBSpace leaves room for more than the one-byte IP_TOS message the
	// kernel attaches today, so that enabling another option later does not
	// silently truncate the control data (MSG_CTRUNC).
	recvOOBSpace = 2 * unix.CmsgSpace(16)
)

// cmsgAlign rounds n up to the alignment the kernel uses between control
// messages (sizeof(long)).
func cmsgAlign(n int) int {
	return (n + unix.SizeofPtr - 1) &^ (unix.SizeofPtr - 1)
}

// parseTOS finds the IP_TOS control message in oob and returns its byte. It
// reads the headers with encoding/binary rather than by pointer conversion so
// that malformed input (which a fuzzer, not the kernel, produces) can only
// make it return false.
func parseTOS(oob []byte) (tos byte, ok bool) {
	data, ok := findCmsg(oob, unix.IPPROTO_IP, unix.IP_TOS)
	if !ok {
		return 0, false
	}
	return tosValue(data)
}

// findCmsg returns the data of the first control message of level and typ
// in oob. Malformed input makes it return false.
func findCmsg(oob []byte, wantLevel, wantType int32) ([]byte, bool) {
	for len(oob) >= cmsgHeaderLen {
		length := cmsgLength(oob)
		if length < cmsgHeaderLen || length > uint64(len(oob)) {
			return nil, false
		}
		level := int32(binary.NativeEndian.Uint32(oob[cmsgLenWord:]))
		typ := int32(binary.NativeEndian.Uint32(oob[cmsgLenWord+4:]))
		if level == wantLevel && typ == wantType {
			return oob[cmsgAlign(cmsgHeaderLen):length], true
		}
		next := cmsgAlign(int(length))
		if next >= len(oob) {
			break
		}
		oob = oob[next:]
	}
	return nil, false
}

// cmsgLength reads cmsg_len, whose width follows the platform word.
func cmsgLength(b []byte) uint64 {
	if cmsgLenWord == 8 {
		return binary.NativeEndian.Uint64(b)
	}
	return uint64(binary.NativeEndian.Uint32(b))
}

// tosValue decodes the payload of an IP_TOS message: Linux delivers one byte
// on receive, while senders (this package included) pass an int.
func tosValue(data []byte) (byte, bool) {
	switch {
	case len(data) >= 4:
		return byte(binary.NativeEndian.Uint32(data)), true
	case len(data) >= 1:
		return data[0], true
	}
	return 0, false
}

// putTOSHeader writes the header of an IP_TOS control message carrying an
// int into b, which must be tosCmsgSpace long. It is done once per slot; only
// the value changes per packet (setTOSValue).
func putTOSHeader(b []byte) {
	length := uint64(unix.CmsgLen(4))
	if cmsgLenWord == 8 {
		binary.NativeEndian.PutUint64(b, length)
	} else {
		binary.NativeEndian.PutUint32(b, uint32(length))
	}
	binary.NativeEndian.PutUint32(b[cmsgLenWord:], uint32(unix.IPPROTO_IP))
	binary.NativeEndian.PutUint32(b[cmsgLenWord+4:], uint32(unix.IP_TOS))
}

// setTOSValue stores tos as the int payload of a message built by putTOSHeader.
func setTOSValue(b []byte, tos byte) {
	binary.NativeEndian.PutUint32(b[cmsgAlign(cmsgHeaderLen):], uint32(tos))
}
