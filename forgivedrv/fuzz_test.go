package forgivedrv

import (
	"errors"
	"reflect"
	"testing"
)

// Any file either parses into a configuration whose engine config is
// valid and that encodes back to the same engine config, or is refused
// with ErrConfig; nothing panics.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(minimal))
	f.Add([]byte(minimal + "cc: none\nreliability: {mode: gbn}\nforgive: {p: 0.5}\ndscp: {gradient: 26}\nseed: 7\n"))
	f.Add([]byte(minimal + "seed: 1.5\n"))
	f.Add([]byte(minimal + "reliability: {peer_windows: [{first: 1, last: 2, window: 1MB}, {first: 4, last: 4, window: 4096}], peer_window_period: 6}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v is not ErrConfig", err)
			}
			return
		}
		n, err := c.NIC()
		if err != nil {
			t.Fatalf("parsed but NIC() fails: %v", err)
		}
		out, err := c.Marshal("")
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseConfig(out)
		if err != nil {
			t.Fatalf("the encoded config does not parse: %v\n%s", err, out)
		}
		if bn, _ := back.NIC(); !reflect.DeepEqual(bn, n) {
			t.Fatalf("the encoded config means something else:\n%s", out)
		}
	})
}
