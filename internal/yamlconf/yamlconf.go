// Package yamlconf decodes the project's YAML configuration files strictly
// (unknown keys are errors) and rewrites the decoder's line-numbered
// complaints so that each names the path of its field, as a person editing
// the file thinks of it: `ports[2].rate: "10Gbs": unknown unit`.
package yamlconf

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// Positioned is an error that knows where in the file its value was, such
// as a units.Error or a bad enumeration value.
type Positioned interface {
	error
	Position() (line, column int)
}

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
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		return Locate(&root, err)
	}
	return nil
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
