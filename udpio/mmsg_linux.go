package udpio

import (
	"encoding/binary"
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"
)

// batch is the kernel-facing image of up to len(hdrs) messages: the mmsghdr
// array that recvmmsg and sendmmsg take, with the iovecs, socket addresses
// and control buffers it points into. One batch is allocated per direction
// per Conn and reused for every call, which is what keeps the per-packet path
// free of allocations (x/net/ipv4's ReadBatch allocates a *net.UDPAddr and
// its IP for every datagram it returns).
type batch struct {
	hdrs []unix.Mmsghdr
	// iovs holds two iovecs per slot: a received datagram uses iovs[i],
	// a sent one the one or two (Msg.Tail) from iovs[2i] on, and a
	// segmented send its datagrams' iovecs one after another.
	iovs   []unix.Iovec
	names  []sockaddr4
	oob    []byte // len(hdrs) slots of oobLen bytes
	oobLen int
	// segs[i] is how many datagrams message i carries: 1, or more when
	// it is segmented (prepareSendSegmented).
	segs []int
}

// sockaddr4 holds a struct sockaddr_in as raw bytes: family in host order,
// port in network order, then the address.
type sockaddr4 [unix.SizeofSockaddrInet4]byte

func newBatch(size, oobLen int) *batch {
	b := &batch{
		hdrs:   make([]unix.Mmsghdr, size),
		iovs:   make([]unix.Iovec, 2*size),
		names:  make([]sockaddr4, size),
		oob:    make([]byte, size*oobLen),
		oobLen: oobLen,
		segs:   make([]int, size),
	}
	for i := range b.hdrs {
		h := &b.hdrs[i].Hdr
		h.Iov = &b.iovs[i]
		h.SetIovlen(1)
		h.Name = &b.names[i][0]
		h.Control = &b.oob[i*oobLen]
	}
	return b
}

// slotOOB returns the control buffer of slot i.
func (b *batch) slotOOB(i int) []byte {
	return b.oob[i*b.oobLen : (i+1)*b.oobLen]
}

// setBuf points iovec i at buf. An empty buf is legal (a zero-length
// datagram on send, a truncated one on receive).
func (b *batch) setBuf(i int, buf []byte) {
	b.iovs[i].Base = unsafe.SliceData(buf)
	b.iovs[i].SetLen(len(buf))
}

// setMsgIovs points the iovecs from j on at m's datagram, Buf[:N] then
// Tail, and returns how many it used (1 or 2).
func (b *batch) setMsgIovs(j int, m *Msg) int {
	b.setBuf(j, m.Buf[:m.N])
	if len(m.Tail) == 0 {
		return 1
	}
	b.setBuf(j+1, m.Tail)
	return 2
}

// ptr is the address of the mmsghdr array as the syscall takes it.
func (b *batch) ptr() uintptr {
	return uintptr(unsafe.Pointer(&b.hdrs[0]))
}

// prepareRecv resets the fields the kernel overwrites on receive.
func (b *batch) prepareRecv(msgs []Msg) {
	for i := range msgs {
		b.setBuf(i, msgs[i].Buf)
		h := &b.hdrs[i].Hdr
		h.Namelen = unix.SizeofSockaddrInet4
		h.SetControllen(b.oobLen)
		h.Flags = 0
		b.hdrs[i].Len = 0
	}
}

// finishRecv copies what the kernel reported for the first n slots into msgs.
func (b *batch) finishRecv(msgs []Msg, n int) {
	for i := range n {
		h := &b.hdrs[i].Hdr
		m := &msgs[i]
		m.N = min(int(b.hdrs[i].Len), len(m.Buf))
		m.Tail = nil
		m.Truncated = h.Flags&unix.MSG_TRUNC != 0
		m.Addr = decodeSockaddr4(b.names[i][:min(int(h.Namelen), len(b.names[i]))])
		m.TOS, _ = parseTOS(b.slotOOB(i)[:min(int(h.Controllen), b.oobLen)])
	}
}

// prepareSend fills slots for msgs and returns how many were packed before
// the first invalid message (all of them, with a nil error, if none is).
func (b *batch) prepareSend(msgs []Msg) (int, error) {
	for i := range msgs {
		m := &msgs[i]
		if m.N < 0 || m.N > len(m.Buf) {
			return i, errorf(ErrInvalidMsg, "length %d outside buffer of %d bytes", m.N, len(m.Buf))
		}
		if !encodeSockaddr4(&b.names[i], m.Addr) {
			return i, errorf(ErrInvalidMsg, "destination %v is not an IPv4 address and port", m.Addr)
		}
		h := &b.hdrs[i].Hdr
		h.Iov = &b.iovs[2*i] // a segmented send may have moved it
		h.SetIovlen(b.setMsgIovs(2*i, m))
		h.Namelen = unix.SizeofSockaddrInet4
		h.SetControllen(tosCmsgSpace) // the TOS byte only, never a UDP_SEGMENT
		setTOSValue(b.slotOOB(i), m.TOS)
		b.segs[i] = 1
	}
	return len(msgs), nil
}

func encodeSockaddr4(sa *sockaddr4, ap netip.AddrPort) bool {
	addr := ap.Addr().Unmap()
	if !addr.Is4() || ap.Port() == 0 {
		return false
	}
	binary.NativeEndian.PutUint16(sa[0:2], unix.AF_INET)
	binary.BigEndian.PutUint16(sa[2:4], ap.Port())
	a4 := addr.As4()
	copy(sa[4:8], a4[:])
	return true
}

func decodeSockaddr4(b []byte) netip.AddrPort {
	if len(b) < 8 || binary.NativeEndian.Uint16(b[0:2]) != unix.AF_INET {
		return netip.AddrPort{}
	}
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte(b[4:8])), binary.BigEndian.Uint16(b[2:4]))
}
