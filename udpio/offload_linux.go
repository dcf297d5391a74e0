package udpio

import (
	"encoding/binary"
	"errors"
	"net/netip"

	"golang.org/x/sys/unix"
)

// Segmentation offload (Options.Offload).
//
// Sending: a run of consecutive messages of WriteBatch with one
// destination, one TOS byte and one size, the run's last possibly shorter,
// at most maxSegments of them and maxSegmentedBytes in all, leaves as one
// message of sendmmsg whose iovecs are the datagrams' own buffers (no
// copy) and whose control data carries, beside IP_TOS, a UDP_SEGMENT
// message with the size: the kernel builds one large packet and cuts it
// into the datagrams at the device, or hands it whole to a receiver on
// loopback. Segments of one send share their IP header, so the TOS byte
// is one of the grouping keys: ECN and DSCP stay exact per datagram.
//
// Receiving: UDP_GRO on the socket lets the kernel deliver a run of
// datagrams of one flow as one buffer, with a UDP_GRO control message
// giving the segment size. On loopback that is the sender's large packet,
// never cut; on a device with GRO, inet_gro_receive merges only packets
// whose IP headers agree in TOS (a difference flushes the held packet), so
// either way every datagram of a coalesced buffer carried the TOS byte the
// buffer is received with. ReadBatch reads coalesced buffers into the
// Conn's own memory (groSlots buffers of groBufSize) and copies each
// datagram into a Msg of the caller, keeping what does not fit for the
// next read.
//
// Fallback: a kernel without UDP_GRO refuses the option at Listen, and
// the Conn receives as without Offload. A kernel or device without GSO
// fails the first segmented send with EIO, ENOPROTOOPT or EINVAL
// (udp_send_skb: no checksum offload); the Conn then turns GSO off for
// good and sends the same messages again, one datagram each.
// Conn.Offload reports what is on.
//
// Segments over the path MTU: the kernel does not IP-fragment the
// segments of a GSO send, so udp_send_skb refuses a send whose segment
// size with the IP and UDP headers exceeds the route's MTU, with
// EMSGSIZE, while the same datagram sent alone is fragmented and goes
// through. A sealed 4 KiB DATA packet (4,196 bytes) on a veth of MTU
// 4,164 is such a segment. The Conn then lowers its segment limit to that
// size and sends the same messages again: runs of datagrams of the limit
// or longer go one datagram each, shorter runs stay segmented. The limit
// only falls (a socket here talks to one neighbour, over one route);
// Conn.SegmentLimit reports it. Before "udp: gso: do not drop small
// packets when PMTU reduces" (Linux 6.14 and its stable backports, 2025)
// the kernel said EINVAL for this, and the rule above turns GSO off.
//
// quic-go (sys_conn_oob.go) and wireguard-go (conn/bind_std.go) do the
// same on their UDP paths; this is written for this package's batches.

const (
	// maxSegments is the kernel's UDP_MAX_SEGMENTS: the most datagrams
	// one segmented send may carry (64 up to Linux 6.x, more since; the
	// older bound is used everywhere).
	maxSegments = 64
	// maxSegmentedBytes bounds the payload of one segmented send: an IPv4
	// packet of at most 65,535 bytes with its 20-byte IP and 8-byte UDP
	// headers.
	maxSegmentedBytes = 65535 - 20 - 8
	// groBufSize is a receive buffer for one coalesced datagram, which the
	// kernel keeps under 64 KiB.
	groBufSize = 1 << 16
	// groSlots bounds the coalesced datagrams one recvmmsg takes, and so
	// the memory a Conn keeps for them (groSlots x 64 KiB).
	groSlots = 16
)

// segCmsgSpace holds one UDP_SEGMENT message carrying a uint16.
var segCmsgSpace = unix.CmsgSpace(2)

// Offload reports whether segmentation offload is on for sending (GSO)
// and for receiving (GRO). Both are off without Options.Offload; either
// turns off where the kernel lacks it (GSO on its first refused send).
func (c *Conn) Offload() (gso, gro bool) { return c.gso.Load(), c.gro.Load() }

// OffloadFailure returns the error that turned GSO off, nil if none did.
func (c *Conn) OffloadFailure() error {
	if p := c.gsoFailure.Load(); p != nil {
		return *p
	}
	return nil
}

// SegmentLimit returns the smallest datagram size the kernel refused to
// segment (EMSGSIZE: a segment over the path MTU), which the Conn no
// longer segments; 0 while it has refused none.
func (c *Conn) SegmentLimit() int { return int(c.gsoLimit.Load()) }

// gsoUnsupported says whether a send failed because of its UDP_SEGMENT.
func gsoUnsupported(err error) bool {
	return errors.Is(err, unix.EIO) || errors.Is(err, unix.ENOPROTOOPT) || errors.Is(err, unix.EINVAL)
}

// gsoOverMTU says whether a segmented send failed because its segments
// exceed the path MTU (udp_send_skb: EMSGSIZE).
func gsoOverMTU(err error) bool { return errors.Is(err, unix.EMSGSIZE) }

// limitSegments stops segmenting datagrams of size bytes or more, and
// reports whether that lowered the limit (a send refused again at the same
// limit is not retried: the error is then the caller's).
func (c *Conn) limitSegments(size int) bool {
	if l := c.gsoLimit.Load(); l == 0 || int64(size) < l {
		c.gsoLimit.Store(int64(size))
		return true
	}
	return false
}

func (c *Conn) disableGSO(err error) {
	c.gsoFailure.Store(&err)
	c.gso.Store(false)
}

// putSegmentHeader writes the header of a UDP_SEGMENT control message into
// b (segCmsgSpace long), once per slot.
func putSegmentHeader(b []byte) {
	length := uint64(unix.CmsgLen(2))
	if cmsgLenWord == 8 {
		binary.NativeEndian.PutUint64(b, length)
	} else {
		binary.NativeEndian.PutUint32(b, uint32(length))
	}
	binary.NativeEndian.PutUint32(b[cmsgLenWord:], uint32(unix.SOL_UDP))
	binary.NativeEndian.PutUint32(b[cmsgLenWord+4:], uint32(unix.UDP_SEGMENT))
}

// setSegmentValue stores the segment size of a UDP_SEGMENT message.
func setSegmentValue(b []byte, size int) {
	binary.NativeEndian.PutUint16(b[cmsgAlign(cmsgHeaderLen):], uint16(size))
}

// prepareSendSegmented fills the batch for msgs, one message of sendmmsg
// per run of datagrams that can be segmented together (see the top of the
// file), and returns how many messages it made and how many datagrams it
// packed before the first invalid one (all, with a nil error, if none is).
// The datagrams' iovecs follow one another (one each, two with a Tail);
// message h carries segs[h] datagrams. A run of datagrams limit bytes or
// longer is not segmented (limit 0: no bound).
func (b *batch) prepareSendSegmented(msgs []Msg, limit int) (hdrs, packed int, err error) {
	h, i, j := 0, 0, 0 // message, datagram, iovec
	for i < len(msgs) {
		m := &msgs[i]
		if m.N < 0 || m.N > len(m.Buf) {
			return h, i, errorf(ErrInvalidMsg, "length %d outside buffer of %d bytes", m.N, len(m.Buf))
		}
		if !encodeSockaddr4(&b.names[h], m.Addr) {
			return h, i, errorf(ErrInvalidMsg, "destination %v is not an IPv4 address and port", m.Addr)
		}
		first, firstIov, size := i, j, m.Len()
		total := size
		j += b.setMsgIovs(j, m)
		i++
		for size > 0 && (limit == 0 || size < limit) && i < len(msgs) && i-first < maxSegments {
			n := &msgs[i]
			l := n.Len()
			if n.N < 0 || l <= 0 || l > size || n.N > len(n.Buf) || total+l > maxSegmentedBytes ||
				n.TOS != m.TOS || n.Addr != m.Addr {
				break
			}
			j += b.setMsgIovs(j, n)
			total += l
			i++
			if l < size {
				break // a shorter datagram ends the run
			}
		}
		k := i - first
		hdr := &b.hdrs[h].Hdr
		hdr.Iov = &b.iovs[firstIov]
		hdr.SetIovlen(j - firstIov)
		hdr.Namelen = unix.SizeofSockaddrInet4
		oob := b.slotOOB(h)
		setTOSValue(oob, m.TOS)
		if k > 1 {
			setSegmentValue(oob[tosCmsgSpace:], size)
			hdr.SetControllen(tosCmsgSpace + segCmsgSpace)
		} else {
			hdr.SetControllen(tosCmsgSpace)
		}
		b.segs[h] = k
		h++
	}
	return h, len(msgs), nil
}

// sentMsgs is how many datagrams the first n messages carry.
func (b *batch) sentMsgs(n int) int {
	s := 0
	for _, k := range b.segs[:n] {
		s += k
	}
	return s
}

// groBatch is the receive side of offload: coalesced datagrams read into
// the Conn's memory, and the cursor of the datagrams not yet handed out.
type groBatch struct {
	b    *batch
	bufs []byte // len(b.hdrs) buffers of groBufSize
	// What the last recvmmsg returned, per slot: length, segment size
	// (0: not coalesced), source, TOS byte, truncation.
	lens  []int
	sizes []int
	addrs []netip.AddrPort
	toss  []byte
	trunc []bool
	n     int // slots filled
	slot  int // the slot being split
	off   int // its bytes already handed out
	// coalesced counts the buffers that held more than one datagram.
	coalesced uint64
	// views: split hands out views of bufs instead of copies
	// (Options.ReceiveViews).
	views bool
}

func newGROBatch(slots int) *groBatch {
	g := &groBatch{
		b:     newBatch(slots, recvOOBSpace),
		bufs:  make([]byte, slots*groBufSize),
		lens:  make([]int, slots),
		sizes: make([]int, slots),
		addrs: make([]netip.AddrPort, slots),
		toss:  make([]byte, slots),
		trunc: make([]bool, slots),
	}
	for i := range slots {
		g.b.setBuf(i, g.buf(i))
	}
	return g
}

func (g *groBatch) buf(i int) []byte { return g.bufs[i*groBufSize : (i+1)*groBufSize] }

// pending says whether datagrams of the last recvmmsg are left.
func (g *groBatch) pending() bool { return g.slot < g.n }

// prepare readies the slots for a recvmmsg that fills up to want Msgs and
// returns how many slots to offer.
func (g *groBatch) prepare(want int) int {
	count := min(want, len(g.b.hdrs))
	for i := range count {
		h := &g.b.hdrs[i].Hdr
		h.Namelen = unix.SizeofSockaddrInet4
		h.SetControllen(g.b.oobLen)
		h.Flags = 0
		g.b.hdrs[i].Len = 0
	}
	g.n, g.slot, g.off = 0, 0, 0
	return count
}

// finish records what the kernel reported for the first n slots.
func (g *groBatch) finish(n int) {
	for i := range n {
		h := &g.b.hdrs[i].Hdr
		g.lens[i] = min(int(g.b.hdrs[i].Len), groBufSize)
		g.trunc[i] = h.Flags&unix.MSG_TRUNC != 0
		g.addrs[i] = decodeSockaddr4(g.b.names[i][:min(int(h.Namelen), len(g.b.names[i]))])
		oob := g.b.slotOOB(i)[:min(int(h.Controllen), g.b.oobLen)]
		g.toss[i], _ = parseTOS(oob)
		g.sizes[i] = parseGRO(oob)
		if g.sizes[i] > 0 && g.lens[i] > g.sizes[i] {
			g.coalesced++
		}
	}
	g.n = n
}

// split copies the pending datagrams into msgs, in the order they were
// sent, and returns how many it filled; with views, each Msg's Buf becomes
// its datagram where it lies instead. Every datagram of a coalesced
// buffer is segment size long but the last, which may be shorter.
func (g *groBatch) split(msgs []Msg) int {
	k := 0
	for k < len(msgs) && g.slot < g.n {
		i := g.slot
		length, size := g.lens[i], g.sizes[i]
		if size <= 0 || size > length {
			size = length
		}
		seg := min(size, length-g.off)
		m := &msgs[k]
		short := false
		if g.views {
			// The capacity ends with the datagram: nothing written
			// through the view reaches the next one.
			m.Buf, m.N = g.buf(i)[g.off:g.off+seg:g.off+seg], seg
		} else {
			m.N = copy(m.Buf, g.buf(i)[g.off:g.off+seg])
			short = seg > len(m.Buf)
		}
		m.Tail = nil
		g.off += seg
		m.Truncated = short || (g.trunc[i] && g.off >= length)
		m.Addr, m.TOS = g.addrs[i], g.toss[i]
		k++
		if g.off >= length {
			g.slot++
			g.off = 0
		}
	}
	return k
}

// parseGRO returns the segment size of a UDP_GRO control message in oob,
// 0 when there is none (the datagram was not coalesced).
func parseGRO(oob []byte) int {
	data, ok := findCmsg(oob, unix.SOL_UDP, unix.UDP_GRO)
	if !ok || len(data) < 4 {
		return 0
	}
	return int(int32(binary.NativeEndian.Uint32(data)))
}

// enableGRO sets UDP_GRO on the socket (opt replaces the option number in
// tests) and reports whether the kernel took it.
func enableGRO(fd, opt int) bool {
	if opt == 0 {
		opt = unix.UDP_GRO
	}
	return unix.SetsockoptInt(fd, unix.SOL_UDP, opt, 1) == nil
}
