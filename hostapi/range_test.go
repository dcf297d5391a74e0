package hostapi_test

import (
	"encoding/json"
	"testing"

	"github.com/forgive-emu/forgive/hostapi"
)

// A Range is [Start, End) in Go and {"off","len"} on the wire, converted
// there and nowhere else.
func TestRangeTravelsAsOffLen(t *testing.T) {
	r := hostapi.Range{Start: 8192, End: 12288}
	b, err := json.Marshal(r)
	if err != nil || string(b) != `{"off":8192,"len":4096}` {
		t.Fatalf("Marshal = %s, %v", b, err)
	}
	var back hostapi.Range
	if err := json.Unmarshal(b, &back); err != nil || back != r || back.Len() != 4096 {
		t.Fatalf("Unmarshal = %+v, %v", back, err)
	}
	if err := json.Unmarshal([]byte(`{"off":18446744073709551615,"len":2}`), &back); err == nil {
		t.Fatalf("a range past 2^64 decoded as %+v", back)
	}
	if (hostapi.Range{Start: 5, End: 3}).Len() != 0 {
		t.Fatal("an inverted range has bytes")
	}
}
