package trimswitchdrv

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/forgive-emu/forgive/udpio"
)

// The capture writes what a tap on each captured port's link would see, in
// both directions: a UDP socket has no Ethernet or IP header to record, so
// each record gets synthesised Ethernet, IPv4 and UDP headers around the
// datagram, with the real addresses and ports and the real TOS byte (the
// DSCP and the ECN codepoint, CE included). MAC addresses are made from the
// IPv4 address (02:00:a:b:c:d, locally administered) so that each endpoint
// is recognisable. Timestamps are nanoseconds: the instant the driver read
// the datagram, or wrote it.

const (
	ethLen     = 14
	ipv4Len    = 20
	udpLen     = 8
	headerLen  = ethLen + ipv4Len + udpLen
	snapLen    = 65535
	captureBuf = 1 << 20
)

// capture is a pcap file being written. Readers (ingress) and the
// transmitting goroutine (egress) write to it under its mutex.
type capture struct {
	mu    sync.Mutex
	file  *os.File
	buf   *bufio.Writer
	w     *pcapgo.Writer
	frame []byte
	ipID  uint16
	err   error // the first write error; later records are skipped
}

func openCapture(path string) (*capture, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("trimswitchdrv: capture: %w", err)
	}
	c := &capture{file: f, buf: bufio.NewWriterSize(f, captureBuf), frame: make([]byte, 0, snapLen)}
	c.w = pcapgo.NewWriterNanos(c.buf)
	if err := c.w.WriteFileHeader(snapLen, layers.LinkTypeEthernet); err != nil {
		f.Close()
		return nil, fmt.Errorf("trimswitchdrv: capture: %w", err)
	}
	return c, nil
}

// ingress records a datagram that arrived on p from src.
func (c *capture) ingress(ts time.Time, p *port, src netip.AddrPort, tos byte, payload []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.record(ts, src, p.local, tos, payload)
}

// egress records datagrams p sends to its neighbour.
func (c *capture) egress(ts time.Time, p *port, msgs []udpio.Msg) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range msgs {
		c.record(ts, p.local, msgs[i].Addr, msgs[i].TOS, msgs[i].Buf[:msgs[i].N])
	}
}

func (c *capture) record(ts time.Time, src, dst netip.AddrPort, tos byte, payload []byte) {
	if c.err != nil {
		return
	}
	payload = payload[:min(len(payload), snapLen-headerLen)]
	c.ipID++
	c.frame = appendFrame(c.frame[:0], src, dst, tos, c.ipID, payload)
	ci := gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(c.frame), Length: len(c.frame)}
	c.err = c.w.WritePacket(ci, c.frame)
}

// close flushes and closes the file.
func (c *capture) close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	err := c.err
	if ferr := c.buf.Flush(); err == nil {
		err = ferr
	}
	if cerr := c.file.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("trimswitchdrv: capture: %w", err)
	}
	return nil
}

// appendFrame appends an Ethernet/IPv4/UDP frame carrying payload.
func appendFrame(b []byte, src, dst netip.AddrPort, tos byte, id uint16, payload []byte) []byte {
	s4, d4 := src.Addr().As4(), dst.Addr().As4()
	// Ethernet: destination and source MAC, EtherType IPv4.
	b = append(b, 0x02, 0x00, d4[0], d4[1], d4[2], d4[3])
	b = append(b, 0x02, 0x00, s4[0], s4[1], s4[2], s4[3])
	b = binary.BigEndian.AppendUint16(b, 0x0800)
	// IPv4: no options, don't fragment, TTL 64, UDP.
	ip := len(b)
	b = append(b, 0x45, tos)
	b = binary.BigEndian.AppendUint16(b, uint16(ipv4Len+udpLen+len(payload)))
	b = binary.BigEndian.AppendUint16(b, id)
	b = binary.BigEndian.AppendUint16(b, 0x4000)
	b = append(b, 64, 17, 0, 0) // TTL, protocol, checksum placeholder
	b = append(b, s4[:]...)
	b = append(b, d4[:]...)
	binary.BigEndian.PutUint16(b[ip+10:], ipChecksum(b[ip:ip+ipv4Len]))
	// UDP: a zero checksum means "none" in IPv4.
	b = binary.BigEndian.AppendUint16(b, src.Port())
	b = binary.BigEndian.AppendUint16(b, dst.Port())
	b = binary.BigEndian.AppendUint16(b, uint16(udpLen+len(payload)))
	b = binary.BigEndian.AppendUint16(b, 0)
	return append(b, payload...)
}

// ipChecksum is the RFC 1071 one's-complement sum of an IPv4 header whose
// checksum field is zero.
func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i+1 < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xFFFF {
		sum = sum&0xFFFF + sum>>16
	}
	return ^uint16(sum)
}
