package yamlconf

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

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

type quantities struct {
	Rate  units.Rate      `yaml:"rate"`
	Size  units.Size      `yaml:"size"`
	Delay units.Duration  `yaml:"delay"`
	Opt   *units.Duration `yaml:"opt"`
	List  []units.Size    `yaml:"list"`
}

// The quantities decode through their UnmarshalText, which knows no YAML;
// Decode says where a bad one was: its field, line and column.
func TestQuantityErrorsNameFieldLineAndColumn(t *testing.T) {
	cases := []struct {
		doc        string
		path       string
		line, col  int
		want       error
		valueQuote string
	}{
		{"rate: 1Gbps\nsize:   10Gbs\n", "size", 2, 9, units.ErrUnit, `"10Gbs"`},
		{"rate: 10Gbs\nsize: 10Gbs\n", "rate", 1, 7, units.ErrUnit, `"10Gbs"`},
		{"rate: 1Gbps\nlist: [1KiB, 2KiB, 0.5B]\n", "list[2]", 2, 20, units.ErrNotWhole, `"0.5B"`},
		{"opt: -1s\n", "opt", 1, 6, units.ErrNegative, `"-1s"`},
		{"delay: 5\n", "delay", 1, 8, units.ErrSyntax, `"5"`},
	}
	for _, c := range cases {
		var q quantities
		errs := Decode([]byte(c.doc), &q)
		if len(errs) != 1 {
			t.Errorf("%q: %d problems %v, want one", c.doc, len(errs), errs)
			continue
		}
		err := errs[0]
		var pe Positioned
		if !errors.As(err, &pe) || !errors.Is(err, c.want) {
			t.Errorf("%q: %v is not a positioned %v", c.doc, err, c.want)
			continue
		}
		if line, col := pe.Position(); line != c.line || col != c.col {
			t.Errorf("%q: at line %d column %d, want %d:%d", c.doc, line, col, c.line, c.col)
		}
		if want := c.path + ": " + c.valueQuote + ": "; !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%q: %q, want prefix %q", c.doc, err, want)
		}
	}
	var q quantities
	if errs := Decode([]byte("rate: 1.5Gb/s\nsize: 4096\ndelay: 2us\nopt: ~\nlist: [1KiB]\n"), &q); errs != nil {
		t.Fatal(errs)
	}
	if q.Rate != 1.5e9 || q.Size != 4096 || q.Delay.Std() != 2*time.Microsecond || q.Opt != nil || len(q.List) != 1 || q.List[0] != 1024 {
		t.Fatalf("decoded %+v", q)
	}
	b, err := Encode("", q)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "rate: 1500Mbps\n") || !strings.Contains(string(b), "size: 4KiB\n") {
		t.Errorf("encoded as\n%s", b)
	}
	var back quantities
	if errs := Decode(b, &back); errs != nil || back.Rate != q.Rate || back.Size != q.Size || back.Delay != q.Delay {
		t.Fatalf("round trip through\n%s gave %+v, %v", b, back, errs)
	}
}

// A list or a mapping where a quantity belongs is refused, naming the field.
func TestQuantityRefusesAList(t *testing.T) {
	var q quantities
	for doc, path := range map[string]string{
		"size: 1KiB\nrate: [1, 2]\n": "rate",
		"delay: {a: 1}\n":            "delay",
		"list: [1KiB, [2]]\n":        "list[1]",
	} {
		errs := Decode([]byte(doc), &q)
		if len(errs) != 1 || !errors.Is(errs[0], ErrNotScalar) || !strings.HasPrefix(errs[0].Error(), path+": ") {
			t.Errorf("%q: got %v, want one problem naming %s", doc, errs, path)
		}
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

// viaNode is how Encode wrote a file before it encoded the value once:
// into a yaml.Node, with the comment on the document, and that node to
// text.
func viaNode(comment string, v any) ([]byte, error) {
	var doc yaml.Node
	if err := doc.Encode(v); err != nil {
		return nil, err
	}
	doc.HeadComment = comment
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Encoding the value once writes the same bytes as encoding it through a
// node with the comment on the document, for any comment (every kind of
// YAML line break, blank lines, leading and trailing space, a '#') and
// any value.
func TestEncodeOnceIsEncodeThroughANode(t *testing.T) {
	breaks := []string{"\n", "\r", "\r\n", "\u0085", "\u2028", "\u2029"}
	pieces := []string{"a", "colour: blue", " ", "#", "- x", "", "é", "'q'", "{", "x"}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		var comment strings.Builder
		for range rng.IntN(6) {
			if rng.IntN(3) == 0 {
				comment.WriteString(breaks[rng.IntN(len(breaks))])
			} else {
				comment.WriteString(pieces[rng.IntN(len(pieces))])
			}
		}
		c := conf{Seed: rng.IntN(1000) - 500}
		for j := range rng.IntN(4) {
			c.Ports = append(c.Ports, port{Name: fmt.Sprintf("p%d", j), Rate: units.Rate(rng.IntN(4)) * 100e9})
		}
		if rng.IntN(2) == 0 {
			c.Prios = map[uint8]uint8{uint8(rng.IntN(8)): uint8(rng.IntN(8)), 3: 1}
		}
		got, err := Encode(comment.String(), c)
		if err != nil {
			t.Fatalf("%q: %v", comment.String(), err)
		}
		want, err := viaNode(comment.String(), c)
		if err != nil {
			t.Fatalf("%q: %v", comment.String(), err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("case %d, comment %q:\ngot  %q\nwant %q", i, comment.String(), got, want)
		}
	}
}
