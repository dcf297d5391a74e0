// Package yamlconf decodes the project's YAML configuration files strictly
// (unknown keys are errors) and rewrites the decoder's line-numbered
// complaints so that each names the path of its field, as a person editing
// the file thinks of it: `ports[2].rate: "10Gbs": unknown unit`.
package yamlconf

import (
	"bytes"
	"encoding"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Positioned is an error that knows where in the file its value was, such
// as a bad enumeration value (a ValueError).
type Positioned interface {
	error
	Position() (line, column int)
}

// ValueError is a bad scalar found while decoding, with the position of
// its node, so that Decode names its field.
type ValueError struct {
	Line, Column int
	Err          error
}

func (e *ValueError) Error() string { return e.Err.Error() }
func (e *ValueError) Unwrap() error { return e.Err }

// Position implements Positioned.
func (e *ValueError) Position() (line, column int) { return e.Line, e.Column }

// At reports err at node n.
func At(n *yaml.Node, err error) *ValueError { return &ValueError{n.Line, n.Column, err} }

// Quoted reports err at node n, quoting the node's text.
func Quoted(n *yaml.Node, err error) *ValueError { return At(n, fmt.Errorf("%q: %w", n.Value, err)) }

var (
	lineMsg      = regexp.MustCompile(`^line (\d+): (.*)$`)
	unknownField = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
	badValue     = regexp.MustCompile("`([^`]*)`")
)

// Decode decodes data into v. It returns nil, or one error per problem,
// each starting with the path of its field.
func Decode(data []byte, v any) []error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return []error{err}
	}
	if len(root.Content) == 0 {
		return []error{errors.New("empty file")}
	}
	if errs := notScalars(&root, reflect.TypeOf(v)); errs != nil {
		return errs
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		var pe Positioned
		if !errors.As(err, &pe) {
			if at := textError(&root, reflect.TypeOf(v), err); at != nil {
				err = at
			}
		}
		return Locate(&root, err)
	}
	return wholeNumbers(&root, reflect.TypeOf(v))
}

// ErrNotInteger is a number with a fraction written where the field holds
// an integer. The YAML decoder would truncate it (seed: 1.5 is seed 1).
var ErrNotInteger = errors.New("want an integer")

// ErrNotScalar reports a list or a mapping where a single value belongs.
var ErrNotScalar = errors.New("want a single value, not a list or mapping")

var (
	unmarshaler     = reflect.TypeFor[yaml.Unmarshaler]()
	textUnmarshaler = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// decodesText reports whether the decoder hands a scalar of type t to its
// UnmarshalText (units.Rate, units.Size, ...).
func decodesText(t reflect.Type) bool {
	return !reflect.PointerTo(t).Implements(unmarshaler) && reflect.PointerTo(t).Implements(textUnmarshaler)
}

// wholeNumbers reports every integer field written with a fraction. Types
// that decode themselves (units.Size, ...) check their own text.
func wholeNumbers(root *yaml.Node, t reflect.Type) []error {
	var out []error
	walkValues(root, t, func(n *yaml.Node, t reflect.Type, path string) {
		if decodesText(t) || !isInteger(t) || n.Kind != yaml.ScalarNode || n.ShortTag() != "!!float" {
			return
		}
		if f, err := strconv.ParseFloat(n.Value, 64); err != nil || f != math.Trunc(f) {
			out = append(out, fmt.Errorf("%s: %q: %w", orLine(path, n.Line), n.Value, ErrNotInteger))
		}
	})
	return out
}

// notScalars reports every list or mapping written where a type that
// decodes from text (units.Rate, ...) belongs.
func notScalars(root *yaml.Node, t reflect.Type) []error {
	var out []error
	walkValues(root, t, func(n *yaml.Node, t reflect.Type, path string) {
		if n.Kind != yaml.ScalarNode && decodesText(t) {
			out = append(out, fmt.Errorf("%s: %w", orLine(path, n.Line), At(n, ErrNotScalar)))
		}
	})
	return out
}

// textError finds where the value was that made the decoder stop with err,
// when err came from a type's UnmarshalText and so does not say: the
// first scalar, in the order the decoder reads them, whose text its type
// refuses with the same error. It returns nil when no scalar does.
func textError(root *yaml.Node, t reflect.Type, err error) *ValueError {
	var found *ValueError
	walkValues(root, t, func(n *yaml.Node, t reflect.Type, _ string) {
		if found != nil || !decodesText(t) || n.Kind != yaml.ScalarNode || n.ShortTag() == "!!null" {
			return
		}
		u := reflect.New(t).Interface().(encoding.TextUnmarshaler)
		if e := u.UnmarshalText([]byte(n.Value)); e != nil && e.Error() == err.Error() {
			found = At(n, err)
		}
	})
	return found
}

// walkValues walks the document beside the Go type it is decoded into and
// calls f with each scalar, and each list or mapping where a type that
// decodes from text belongs, with the type it decodes into and its path.
// It does not look inside types that decode themselves from a node
// (yaml.Unmarshaler).
func walkValues(root *yaml.Node, t reflect.Type, f func(n *yaml.Node, t reflect.Type, path string)) {
	var walk func(n *yaml.Node, t reflect.Type, path string)
	walk = func(n *yaml.Node, t reflect.Type, path string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if reflect.PointerTo(t).Implements(unmarshaler) {
			return
		}
		if decodesText(t) && (n.Kind == yaml.MappingNode || n.Kind == yaml.SequenceNode) {
			f(n, t, path)
			return
		}
		switch n.Kind {
		case yaml.DocumentNode:
			for _, c := range n.Content {
				walk(c, t, path)
			}
		case yaml.AliasNode:
			// The anchor may sit where no integer is wanted: check the
			// value again where the alias uses it. (The decoder has
			// already refused cycles and excessive aliasing.)
			if n.Alias != nil {
				walk(n.Alias, t, path)
			}
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				k, v := n.Content[i], n.Content[i+1]
				switch t.Kind() {
				case reflect.Struct:
					if ft, ok := fieldType(t, k.Value); ok {
						walk(v, ft, join(path, k.Value))
					}
				case reflect.Map:
					walk(k, t.Key(), join(path, k.Value))
					walk(v, t.Elem(), join(path, k.Value))
				}
			}
		case yaml.SequenceNode:
			if t.Kind() == reflect.Slice || t.Kind() == reflect.Array {
				for i, c := range n.Content {
					walk(c, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
				}
			}
		case yaml.ScalarNode:
			f(n, t, path)
		}
	}
	walk(root, t, "")
}

func isInteger(t reflect.Type) bool {
	switch t.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// fieldType finds the field of struct t that YAML key name decodes into,
// looking through inlined structs.
func fieldType(t reflect.Type, name string) (reflect.Type, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		tag, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if tag == "-" || !f.IsExported() {
			continue
		}
		if strings.Contains(opts, "inline") {
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				if inner, ok := fieldType(ft, name); ok {
					return inner, true
				}
			}
			continue
		}
		if tag == "" {
			tag = strings.ToLower(f.Name)
		}
		if tag == name {
			return f.Type, true
		}
	}
	return nil, false
}

// Locate rewrites a decoding error so that each problem names its field.
func Locate(root *yaml.Node, err error) []error {
	var pe Positioned
	if errors.As(err, &pe) {
		line, col := pe.Position()
		return []error{fmt.Errorf("%s: %w", PathAt(root, line, col), err)}
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return []error{err}
	}
	var out []error
	for _, msg := range te.Errors {
		out = append(out, errors.New(locateMsg(root, msg)))
	}
	return out
}

// locateMsg rewrites one "line N: ..." message of the YAML decoder.
func locateMsg(root *yaml.Node, msg string) string {
	m := lineMsg.FindStringSubmatch(msg)
	if m == nil {
		return msg
	}
	line, _ := strconv.Atoi(m[1])
	rest := m[2]
	if f := unknownField.FindStringSubmatch(rest); f != nil {
		return fmt.Sprintf("%s: unknown field", keyPathAt(root, line, f[1]))
	}
	value := ""
	if v := badValue.FindStringSubmatch(rest); v != nil {
		value = strings.TrimSuffix(v[1], "...")
	}
	return fmt.Sprintf("%s: %s", valuePathAt(root, line, value), rest)
}

// visit walks the tree depth first, calling f with each value node (not
// mapping keys) and its path; for mapping keys it calls key.
func visit(n *yaml.Node, path string, f func(n *yaml.Node, path string), key func(k *yaml.Node, path string)) {
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			visit(c, path, f, key)
		}
		return
	case yaml.MappingNode:
		f(n, path)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := join(path, k.Value)
			key(k, p)
			visit(v, p, f, key)
		}
	case yaml.SequenceNode:
		f(n, path)
		for i, c := range n.Content {
			visit(c, fmt.Sprintf("%s[%d]", path, i), f, key)
		}
	default:
		f(n, path)
	}
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func noKey(*yaml.Node, string) {}

// PathAt returns the path of the value node at line:column.
func PathAt(root *yaml.Node, line, column int) string {
	found := ""
	visit(root, "", func(n *yaml.Node, path string) {
		if found == "" && n.Kind == yaml.ScalarNode && n.Line == line && n.Column == column {
			found = path
		}
	}, noKey)
	return orLine(found, line)
}

// keyPathAt returns the path of mapping key name on the given line.
func keyPathAt(root *yaml.Node, line int, name string) string {
	found := ""
	visit(root, "", func(*yaml.Node, string) {}, func(k *yaml.Node, path string) {
		if found == "" && k.Line == line && k.Value == name {
			found = path
		}
	})
	return orLine(found, line)
}

// valuePathAt returns the path of the value on the given line that the
// decoder complained about: the scalar whose text it quoted, else the
// deepest value on the line.
func valuePathAt(root *yaml.Node, line int, value string) string {
	quoted, deepest := "", ""
	visit(root, "", func(n *yaml.Node, path string) {
		if n.Line != line {
			return
		}
		if quoted == "" && value != "" && n.Kind == yaml.ScalarNode && strings.HasPrefix(n.Value, value) {
			quoted = path
		}
		deepest = path
	}, noKey)
	if quoted != "" {
		return quoted
	}
	return orLine(deepest, line)
}

func orLine(path string, line int) string {
	if path == "" {
		return fmt.Sprintf("line %d", line)
	}
	return path
}

// Encode writes v as a YAML document with two-space indentation under a
// head comment (none when empty). The encoder writes the comment, so a
// line break in it starts another comment line: text from a topology or a
// profile can never become a key of the file.
//
// The value is encoded once, straight to text. Encoding it into a
// yaml.Node first, to hang the comment on the document, would encode it
// to text, parse that text and encode the tree again: at thousands of
// ranks, where the lab writes a file for every host and switch, most of a
// simulated fabric's build. The comment is the encoder's own rendering of
// it above a mapping of one key, the key taken off.
func Encode(comment string, v any) ([]byte, error) {
	var b bytes.Buffer
	if comment != "" {
		head, err := encode(&yaml.Node{Kind: yaml.MappingNode, HeadComment: comment, Content: []*yaml.Node{
			{Kind: yaml.ScalarNode, Value: "k"}, {Kind: yaml.ScalarNode, Value: "v"}}})
		if err != nil {
			return nil, fmt.Errorf("yamlconf: encode the comment: %w", err)
		}
		h, ok := bytes.CutSuffix(head, []byte("k: v\n"))
		if !ok {
			return nil, fmt.Errorf("yamlconf: encode the comment: unexpected %q", head)
		}
		b.Write(h)
	}
	body, err := encode(v)
	if err != nil {
		return nil, fmt.Errorf("yamlconf: encode %T: %w", v, err)
	}
	b.Write(body)
	return b.Bytes(), nil
}

// encode writes one YAML document with two-space indentation.
func encode(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
