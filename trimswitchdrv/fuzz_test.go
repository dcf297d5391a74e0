package trimswitchdrv

import (
	"errors"
	"os"
	"reflect"
	"testing"
)

// Any file either parses into a configuration that encodes back to the
// same engine configuration, or is refused with ErrConfig; nothing panics.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(fullConfig))
	if b, err := os.ReadFile("../cmd/trimswitch/testdata/two-port.yaml"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("seed: 1.5\nports: [{name: a, local: 127.0.0.1:1, neighbor: 127.0.0.2:2, rate: 0, data_queue: 1KiB}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data)
		if err != nil {
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("error %v is not ErrConfig", err)
			}
			return
		}
		out, err := c.Marshal("")
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseConfig(out)
		if err != nil {
			t.Fatalf("the encoded config does not parse: %v\n%s", err, out)
		}
		if !reflect.DeepEqual(back.Core(), c.Core()) {
			t.Fatalf("the encoded config means something else:\n%s", out)
		}
	})
}
