// Package wire defines the FORGIVE packet formats: an Ultra-Ethernet-style
// transport header carried in UDP, with 32-bit packet sequence numbers (PSNs),
// selective acknowledgements, retransmission requests with a reason code, an
// entropy field for multipath spraying, packet trimming, and the two FORGIVE
// flags on the receiver's feedback.
//
// Each packet type is a view over a []byte with accessors (Data, Ack, Nack,
// CNP, Probe, Pause, Connect), in the style of gVisor's header package. A Parse function
// validates a packet and returns its view; an Append function encodes one from
// a Fields struct into the caller's buffer. Nothing reflects and nothing
// allocates per packet: a view aliases the caller's buffer, Append allocates
// only when the buffer lacks capacity, and a switch trims a packet in place
// with Trim.
//
// # Ownership and imports
//
// Package wire owns the byte layout and its validation, and nothing else: no
// state, no policy. It is sans-I/O. It must not import net, os, syscall or
// os/exec, must not read or wait on the real clock, starts
// no goroutine and uses no global randomness. It must not import gopacket
// either: the gopacket layer lives in the sub-package wire/layers, and the
// Wireshark dissector in deploy/wireshark/forgive.lua.
//
// # Encapsulation
//
// Every packet is one UDP datagram to DefaultPort (4793), the port Wireshark
// assigns to Ultra Ethernet PDS; RoCEv2's 4791 is avoided so captures are not
// mistaken for InfiniBand BTH:
//
//	Ethernet | IPv4 (DSCP: class, ECN) | UDP (dst 4793) | FORGIVE header | payload
//
// All multi-byte fields are big-endian. Bit 0 in the diagrams below is the
// most significant bit of byte 0. A field marked Reserved=0 is sent as zero,
// and a packet with a non-zero reserved field or an undefined flag bit is
// refused (ErrBadField), so every packet a parser accepts has exactly one
// encoding; a future layout takes a new version.
//
// # Common header
//
// Every packet starts with the same 8 bytes, and a switch routes on the
// destination host without reading further (Peek checks only these):
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Ver=2 |  Type |     Flags     |         Type-specific         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Source host          |        Destination host       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Ver is Version (2); any other is refused with ErrBadVersion. Type is one of
// DATA 1, ACK 2, NACK 3, CNP 4, PROBE 5, PAUSE 6, CONNECT 7, ACCEPT 8; any
// other is refused with ErrUnknownType. Host ids are the emulator's addresses of NICs; 0 means "the
// link neighbour" on a PAUSE.
//
// # Flow tags
//
// Every type but PAUSE carries the flow id at bytes 8-11 and two flow tags
// (Tags) right after it: bytes 12-15 the destination tag, the one the
// receiving end of the flow chose, and bytes 16-19 the source tag, the
// sending end's own; the PSN, where a type has one, is at bytes 20-23.
// Header.Tags and Header.SetTags read and write them for any type. Each
// end's first PSN is InitialPSN of its own tag. docs/wire.md ("Flow
// identity") gives the handshake and the checks built on them.
//
// # DATA (type 1): 40-byte header, then the payload
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Ver=2 | Type=1|0 0 0 T A R L F|            Entropy            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Source host          |        Destination host       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      Flow (queue pair) id                     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Destination tag (the receiving end's flow tag)        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            Source tag (the sending end's flow tag)            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                              PSN                              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                           Message id                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Offset (bytes into the message)                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Message length (bytes)                    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Payload length        |    Subflows   |   Reserved=0  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    Payload (Payload length bytes) ...         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
//	Flags  F first packet of the message     0x01  DataFirst
//	       L last packet of the message      0x02  DataLast
//	       R retransmission                  0x04  DataRetx
//	       A acknowledge at once             0x08  DataAckReq
//	       T trimmed by a switch             0x10  DataTrimmed
//
// Entropy selects the path: switches hash it for ECMP, as Ultra Ethernet's
// entropy value, so a sender spraying a flow over Subflows ordered subflows
// gives each subflow its own entropy (0 or 1 subflows: a single path). The PSN
// numbers the flow's packets. The payload carries bytes
// [Offset, Offset+Payload length) of message Message id, whose whole length is
// Message length; a packet whose range ends beyond Message length is refused.
// Payload length must equal the number of bytes after the header
// (ErrBadLength); it is at most MaxPayload.
//
// # Trimmed DATA (type 1 with T set): exactly 40 bytes
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Ver=2 | Type=1|0 0 0 1 A R L F|            Entropy            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Source host          |        Destination host       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      Flow (queue pair) id                     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Destination tag (the receiving end's flow tag)        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            Source tag (the sending end's flow tag)            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                              PSN                              |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                           Message id                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Offset (bytes into the message)                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                     Message length (bytes)                    |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|     Payload length as sent    |    Subflows   |   Reserved=0  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// A switch whose data queue is full trims the packet in place with Trim: the
// datagram is cut to its first 40 bytes and T is set, and nothing else
// changes. PSN, Offset and Payload length as sent survive, so the receiver
// knows the missing range [Offset, Offset+Payload length) of the message at
// once. A trimmed packet that still carries payload bytes is refused
// (ErrBadLength), and trimming a trimmed packet fails (ErrNotData). A trimmed
// header keeps its DSCP and ECN bits unless the switch remarks them; the
// switch queues it by the T flag, on its strict-priority queue.
//
// # ACK (type 2): 40 bytes
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Ver=2 | Type=2|0 0 0 P R X E C|           Reserved=0          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Source host          |        Destination host       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      Flow (queue pair) id                     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Destination tag (the receiving end's flow tag)        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            Source tag (the sending end's flow tag)            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Cumulative PSN                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         SACK base PSN                         |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                   SACK bitmap (bits 63..32)                   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                    SACK bitmap (bits 31..0)                   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                           Echoed PSN                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
//	Flags  C ECN-Echo: the acknowledged packet arrived CE-marked  0x01  FlagECNEcho
//	       E FORGIVE exemption-eligible                            0x02  FlagEligible
//	       X FORGIVE budget-exhausted                              0x04  FlagExhausted
//	       R acknowledges a retransmission                         0x08  AckRetx
//	       P answers a probe                                       0x10  AckProbe
//
// Every PSN before Cumulative PSN is settled. Bit i of the 64-bit SACK bitmap,
// counting from its least significant bit, says PSN SACK base+i is settled
// (AckFields.Acked). Echoed PSN names the packet that triggered the ACK, for
// RTT samples.
//
// # NACK (type 3): 40 bytes
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Ver=2 | Type=3|0 0 0 0 0 X E C|     Reason    |    Priority   |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Source host          |        Destination host       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      Flow (queue pair) id                     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Destination tag (the receiving end's flow tag)        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            Source tag (the sending end's flow tag)            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      First PSN requested                      |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|           PSN count           |           Reserved=0          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                           Message id                          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                Offset (bytes into the message)                |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                         Length (bytes)                        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Flags C, E and X mean what they mean on an ACK. Priority is 0 (normal) or 1
// (high). A NACK requests PSN count packets from First PSN, and names the
// bytes [Offset, Offset+Length) of message Message id; a count of 0 lets the
// byte range alone name the request (a re-segmented retransmission). Reason
// codes follow the Ultra Ethernet PDS NACK codes:
//
//	0x01  NackTrimmed         a switch trimmed the packet
//	0x02  NackTrimmedLastHop  trimmed at the receiver's last hop
//	0x0B  NackOutOfWindow     PSN outside the receive window (PSN_OOR_WINDOW)
//	0x12  NackGap             inferred from a gap (PKT_NOT_RCVD)
//	0x1A  NackProbe           inferred from a probe (RCVR_INFER_LOSS)
//
// Any other reason or priority is refused with ErrBadField.
//
// # CNP (type 4): 24 bytes
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Ver=2 | Type=4|    Flags=0    |           Reserved=0          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Source host          |        Destination host       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      Flow (queue pair) id                     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Destination tag (the receiving end's flow tag)        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            Source tag (the sending end's flow tag)            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                  PSN of the CE-marked packet                  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// The receiver of a CE-marked packet (DCQCN's notification point) sends a CNP
// to its sender, at most once per flow per CNP interval, naming the marked
// packet's PSN.
//
// # PROBE (type 5): 28 bytes
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Ver=2 | Type=5|      Kind     |  Entropy (the subflow's path) |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|          Source host          |        Destination host       |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|                      Flow (queue pair) id                     |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         Destination tag (the receiving end's flow tag)        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|            Source tag (the sending end's flow tag)            |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|         PSN: last sent on the subflow before the probe        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|    Subflow    |    Subflows   |           Reserved=0          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
//	Kind  1 ProbeTail      after a subflow's last packet
//	      2 ProbeRetx      sent with each retransmission
//	      3 ProbePeriodic  every few packets of a subflow
//
// A subflow is delivered in order, so when a probe arrives, every packet sent
// on its subflow up to PSN has either arrived or been lost without a trim
// (Ordered Chaos, PFLD). Subflow must be below Subflows, or 0 when Subflows is
// 0. A probe travels in its data's class and with its entropy, behind its data.
//
// # CONNECT (type 7) and ACCEPT (type 8): 20 bytes
//
// The common header with flags and bytes 2-3 zero, the flow id and the two
// tags (Connect, ConnectFields). A CONNECT's source tag is its sender's
// own, never 0; its destination tag is the peer's, 0 while unknown. An
// ACCEPT answers a CONNECT: its destination tag is the CONNECT's source
// tag, its source tag the answering end's; neither is 0.
//
// # PAUSE (type 6): 12 bytes
//
//	 0                   1                   2                   3
//	 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	| Ver=2 | Type=6|    Flags=0    |   Class mask  |   Reserved=0  |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|        Source host or 0       |        Dest. host or 0        |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//	|   Pause time (microseconds)   |           Reserved=0          |
//	+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+-+
//
// Priority flow control between link neighbours, as an 802.1Qbb frame: stop
// sending the classes whose bits are set in Class mask for Pause time
// microseconds; a time of 0 resumes them. Microseconds replace 512-bit quanta
// so a scaled-down link keeps the meaning of a pause.
//
// # ECN and DSCP
//
// ECN lives in the IP header, not here: data and probes are sent ECT(0), a
// switch sets CE along its RED ramp instead of dropping, and the receiver
// echoes a mark with a CNP (and C on its ACKs). The DSCP carries the traffic
// class, which picks the switch queue and tells gradient all-reduce traffic
// from the rest. The suggested values (DSCPData, DSCPControl, DSCPCNP;
// DefaultDSCP, DefaultECN) are:
//
//	DATA, PROBE      CS0 = 0 by default, configurable per traffic class; ECT(0)
//	ACK, NACK, PAUSE EF  = 46, strict priority; Not-ECT
//	CNP              CS6 = 48, strict priority; Not-ECT
//	trimmed DATA     keeps its DSCP and ECN unless a switch remarks them
//
// # The FORGIVE flags
//
// FORGIVE adds no packet type. Its only wire change is E and X on every ACK and
// NACK. E (exemption-eligible) is fixed when the flow is created: gradient
// all-reduce payload on a step whose loss tolerance p is above 0. X
// (budget-exhausted) is set while the receiving rank's forgiven plus
// outstanding bytes plus one packet exceed its loss budget for the step. A
// sender ignores congestion signals (CNPs and trims) while its latest report
// has E set and X clear.
//
// # Settled
//
// A PSN is settled when the receiver holds its bytes or has forgiven them.
// After forgiving a trimmed range the receiver acknowledges past the hole, so
// a cumulative or selective acknowledgement does not prove that the bytes
// arrived; the application learns the forgiven ranges from its completion.
//
// # PSN arithmetic
//
// PSNs wrap modulo 2^32 and compare by serial-number arithmetic (RFC 1982):
// p is before q when the signed 32-bit distance q-p is positive. Two PSNs
// exactly 2^31 apart have no order; a send window keeps live PSNs far closer.
package wire
