package wire_test

import (
	"fmt"
	"strings"

	"github.com/forgive-emu/forgive/wire"
)

// A sender builds a data packet, a switch with a full data queue trims it in
// place, and the receiver reads the missing range from the header alone.
func ExampleTrim() {
	buf := make([]byte, 0, 4200) // one buffer, reused for every packet
	pkt, err := wire.AppendData(buf, wire.DataFields{
		Flow: 7, PSN: 1001, Msg: 3, Offset: 8192, MsgLen: 1 << 20, Src: 1, Dst: 2,
	}, make([]byte, 4096))
	if err != nil {
		panic(err)
	}

	// The switch: route on the common header, trim when the queue is full.
	if t, err := wire.Peek(pkt); err == nil && t == wire.TypeData {
		pkt, _ = wire.Trim(pkt)
	}

	// The receiver.
	d, err := wire.ParseData(pkt)
	if err != nil {
		panic(err)
	}
	if d.Trimmed() {
		fmt.Printf("%d-byte header: PSN %d trimmed, bytes [%d,%d) of message %d missing\n",
			len(pkt), d.PSN(), d.Offset(), d.Offset()+uint32(d.PayloadLen()), d.Msg())
	}
	// Output: 40-byte header: PSN 1001 trimmed, bytes [8192,12288) of message 3 missing
}

// An ACK settles PSNs cumulatively and through its bitmap; the two FORGIVE
// flags ride on it.
func ExampleAckFields_Acked() {
	ack := wire.AppendAck(nil, wire.AckFields{
		Flags: wire.FlagEligible, Flow: 7, CumPSN: 10, SackBase: 12, Sack: 0b101,
	})
	a, err := wire.ParseAck(ack)
	if err != nil {
		panic(err)
	}
	f := a.Fields()
	var settled []string
	for p := wire.PSN(9); p <= 15; p++ {
		settled = append(settled, fmt.Sprintf("%d:%v", p, f.Acked(p)))
	}
	fmt.Println(strings.Join(settled, " "))
	fmt.Println("eligible:", a.Eligible(), "exhausted:", a.Exhausted())
	// Output:
	// 9:true 10:false 11:false 12:true 13:false 14:true 15:false
	// eligible: true exhausted: false
}
