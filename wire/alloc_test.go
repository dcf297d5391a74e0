package wire

import (
	"testing"

	"github.com/forgive-emu/forgive/internal/race"
)

// "no allocation per packet": parsing returns views of the caller's buffer,
// appending into a buffer with capacity writes in place, and a switch trims
// in place.
func TestZeroAllocs(t *testing.T) {
	payload := testPayload(4096)
	buf := make([]byte, 0, DataLen+len(payload))
	pkts := map[Type][]byte{}
	for _, s := range samples(t) {
		if s.name != "trimmed DATA" {
			pkts[s.typ] = s.b
		}
	}
	untrimmed := append([]byte(nil), pkts[TypeData]...)

	cases := []struct {
		name string
		f    func()
	}{
		{"Peek", func() { _, _ = Peek(pkts[TypeAck]) }},
		{"Validate", func() { _, _ = Validate(pkts[TypeData]) }},
		{"Inspect", func() {
			for _, b := range pkts {
				_, _ = Inspect(b)
			}
		}},
		{"ParseData", func() { _, _ = ParseData(pkts[TypeData]) }},
		{"ParseAck", func() { _, _ = ParseAck(pkts[TypeAck]) }},
		{"ParseNack", func() { _, _ = ParseNack(pkts[TypeNack]) }},
		{"ParseCNP", func() { _, _ = ParseCNP(pkts[TypeCNP]) }},
		{"ParseProbe", func() { _, _ = ParseProbe(pkts[TypeProbe]) }},
		{"ParsePause", func() { _, _ = ParsePause(pkts[TypePause]) }},
		{"Fields", func() { _ = Data(pkts[TypeData]).Fields(); _ = Ack(pkts[TypeAck]).Fields() }},
		{"AppendData", func() { _, _ = AppendData(buf[:0], testData, payload) }},
		{"AppendDataHeader", func() { _, _ = AppendDataHeader(buf[:0], testData, len(payload)) }},
		{"AppendAck", func() { _ = AppendAck(buf[:0], testAck) }},
		{"AppendNack", func() { _ = AppendNack(buf[:0], testNack) }},
		{"AppendCNP", func() { _ = AppendCNP(buf[:0], 1, 2, 3, 4) }},
		{"AppendProbe", func() { _ = AppendProbe(buf[:0], testProbe) }},
		{"AppendPause", func() { _ = AppendPause(buf[:0], 1, 2) }},
		{"AppendPauseFields", func() { _ = AppendPauseFields(buf[:0], testPause) }},
		{"Trim", func() {
			untrimmed[1] &^= DataTrimmed
			if _, err := Trim(untrimmed); err != nil {
				panic(err)
			}
		}},
		{"Acked", func() { _ = testAck.Acked(103) }},
	}
	for _, c := range cases {
		n := testing.AllocsPerRun(100, c.f)
		if race.Enabled {
			t.Logf("%s: %v allocations per run, not asserted under -race", c.name, n)
			continue
		}
		if n != 0 {
			t.Errorf("%s: %v allocations per run, want 0", c.name, n)
		}
	}
	if race.Enabled {
		t.Skip("the race detector allocates on its own: this gate holds without -race")
	}
}
