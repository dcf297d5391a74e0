package wire

import "testing"

func BenchmarkAppendData(b *testing.B) {
	payload := testPayload(4096)
	buf := make([]byte, 0, DataLen+len(payload))
	b.ReportAllocs()
	b.SetBytes(int64(DataLen + len(payload)))
	for b.Loop() {
		var err error
		if buf, err = AppendData(buf[:0], testData, payload); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParseData(b *testing.B) {
	pkt, err := AppendData(nil, testData, testPayload(4096))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseData(pkt); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendAck(b *testing.B) {
	buf := make([]byte, 0, AckLen)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendAck(buf[:0], testAck)
	}
}

func BenchmarkParseAck(b *testing.B) {
	pkt := AppendAck(nil, testAck)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ParseAck(pkt); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTrim measures a switch trimming a full data packet in place; the
// flag is cleared between iterations so every Trim does the real work.
func BenchmarkTrim(b *testing.B) {
	pkt, err := AppendData(nil, testData, testPayload(4096))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		pkt[1] &^= DataTrimmed
		if _, err := Trim(pkt); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkValidate cycles through one packet of every type, as a receiver
// sees a mix.
func BenchmarkValidate(b *testing.B) {
	var pkts [][]byte
	for _, s := range samples(b) {
		pkts = append(pkts, s.b)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, err := Validate(pkts[i]); err != nil {
			b.Fatal(err)
		}
		i = (i + 1) % len(pkts)
	}
}
