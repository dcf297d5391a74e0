// Package layers decodes and serializes FORGIVE packets with gopacket.
//
// Importing it registers LayerTypeForgive on UDP port wire.DefaultPort
// (4793), so gopacket users decoding a capture see a Forgive layer after UDP.
// Next to gopacket's own layers package it is imported under another name,
// here flayers:
//
//	packet := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
//	if l := packet.Layer(flayers.LayerTypeForgive); l != nil {
//		f := l.(*flayers.Forgive)
//		switch f.Type {
//		case wire.TypeData:
//			fmt.Println(f.Data.PSN, f.Trimmed(), packet.ApplicationLayer().Payload())
//		case wire.TypeAck:
//			fmt.Println(f.Ack.CumPSN, f.Ack.Flags&wire.FlagExhausted != 0)
//		}
//	}
//
// One layer type covers every packet type: gopacket picks the next layer
// from the UDP port alone, so a single type is what both NewPacket and
// gopacket.DecodingLayerParser can reach. The Forgive struct carries the
// per-type field sets of package wire; Type selects the one that is set.
// The payload of a DATA packet is a gopacket.Payload layer after it.
//
// Packets sealed by the security sublayer (package tss) decode without a
// key: Sealed is set, the header fields read as for a plain packet, Domain,
// Nonce and HeaderTag hold the sublayer's fields, and an untrimmed DATA
// packet's payload layer is its ciphertext (Encrypted reports it), with
// PayloadTag after it. The tags are not checked; package tss opens packets.
//
// All parsing and encoding is package wire's: this package only adapts it to
// gopacket's interfaces. It is an analysis and test tool, outside the
// per-packet path of the emulator; package wire itself never imports
// gopacket.
package layers
