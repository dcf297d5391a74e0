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
	Seed  int             `yaml:"seed"`
	Ports []port          `yaml:"ports"`
	Prios map[uint8]uint8 `yaml:"prios"`
}

// Each problem names the path of its field, not a line number.
func TestProblemsNameTheirField(t *testing.T) {
	cases := map[string]string{
		"ports:\n  - {name: a, rate: 1Gbps}\n  - {name: b, rate: 10Gbs}\n": `ports[1].rate: "10Gbs": unknown unit`,
		"seed: 1\ncolour: blue\n": "colour: unknown field",
		"seed: many\n":            "seed: cannot unmarshal",
		"":                        "empty file",
		"seed: 1.5\n":             `seed: "1.5": want an integer`,
		"ports: [{name: &x 1.5, rate: 1Gbps}]\nseed: *x\n": `seed: "1.5": want an integer`,
		"prios: {24.5: 3}\n":                            `prios.24.5: "24.5": want an integer`,
		"prios: {24: 3.5}\n":                            `prios.24: "3.5": want an integer`,
		"ports: [{name: a, rate: 1Gbps}]\nseed: 2.25\n": `seed: "2.25": want an integer`,
	}
	for doc, want := range cases {
		var c conf
		errs := Decode([]byte(doc), &c)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), want) {
			t.Errorf("%q: got %v, want one problem containing %q", doc, errs, want)
		}
	}
	var c conf
	if errs := Decode([]byte("seed: 2.0\nports: []\n"), &c); errs != nil || c.Seed != 2 {
		t.Fatalf("a whole number written with a point: %v %+v", errs, c)
	}
	if errs := Decode([]byte("seed: 2\nports: [{name: x, rate: 5Mbps}]\n"), &c); errs != nil || c.Ports[0].Rate != 5e6 {
		t.Fatalf("valid file: %v %+v", errs, c)
	}
}

// A comment is written by the encoder: a line break in it (any of YAML's)
// starts another comment line and never a key.
func TestEncodeKeepsCommentsComments(t *testing.T) {
	for _, comment := range []string{"plain", "x\ncolour: blue", "x\rcolour: blue", "x\r\ncolour: blue", "x\u2028colour: blue", "x\u0085colour: blue"} {
		b, err := Encode(comment, conf{Seed: 7})
		if err != nil {
			t.Fatal(err)
		}
		var c conf
		if errs := Decode(b, &c); errs != nil || c.Seed != 7 {
			t.Errorf("%q: decoding\n%s\ngave %v %+v", comment, b, errs, c)
		}
		if !strings.HasPrefix(string(b), "# ") {
			t.Errorf("%q: no head comment in\n%s", comment, b)
		}
	}
}
