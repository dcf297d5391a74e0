package yamlconf

import (
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/internal/units"
)

type port struct {
	Name string     `yaml:"name"`
	Rate units.Rate `yaml:"rate"`
}

type conf struct {
	Seed  int    `yaml:"seed"`
	Ports []port `yaml:"ports"`
}

// Each problem names the path of its field, not a line number.
func TestProblemsNameTheirField(t *testing.T) {
	cases := map[string]string{
		"ports:\n  - {name: a, rate: 1Gbps}\n  - {name: b, rate: 10Gbs}\n": `ports[1].rate: "10Gbs": unknown unit`,
		"seed: 1\ncolour: blue\n": "colour: unknown field",
		"seed: many\n":            "seed: cannot unmarshal",
		"":                        "empty file",
	}
	for doc, want := range cases {
		var c conf
		errs := Decode([]byte(doc), &c)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), want) {
			t.Errorf("%q: got %v, want one problem containing %q", doc, errs, want)
		}
	}
	var c conf
	if errs := Decode([]byte("seed: 2\nports: [{name: x, rate: 5Mbps}]\n"), &c); errs != nil || c.Ports[0].Rate != 5e6 {
		t.Fatalf("valid file: %v %+v", errs, c)
	}
}
