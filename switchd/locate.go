package switchd

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/forgive-emu/forgive/internal/units"
)

// The YAML decoder reports where a problem is by line (and, for the
// quantities this package decodes itself, column), while a person editing
// the file wants the field: `ports[2].rate`. locate turns one into the
// other by walking the document's node tree, which knows both.

var (
	lineMsg      = regexp.MustCompile(`^line (\d+): (.*)$`)
	unknownField = regexp.MustCompile(`^field (\S+) not found in type \S+$`)
	badValue     = regexp.MustCompile("`([^`]*)`")
)

// locate rewrites a decoding error so that each problem names its field.
func locate(root *yaml.Node, err error) error {
	var ue *units.Error
	if errors.As(err, &ue) {
		return configErrorf("%s: %w", pathAt(root, ue.Line, ue.Column), ue)
	}
	var ve *valueError
	if errors.As(err, &ve) {
		return configErrorf("%s: %w", pathAt(root, ve.line, ve.column), ve)
	}
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return configErrorf("%w", err)
	}
	ce := &ConfigError{}
	for _, msg := range te.Errors {
		ce.Problems = append(ce.Problems, errors.New(locateMsg(root, msg)))
	}
	return ce
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

// pathAt returns the path of the value node at line:column.
func pathAt(root *yaml.Node, line, column int) string {
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
