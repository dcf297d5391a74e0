package scenario

import (
	"errors"
	"fmt"
	"strings"
)

// Lines starting with # between directives are comments.

// ErrScenario is wrapped by every error in a scenario.
var ErrScenario = errors.New("sim: scenario")

// Directive is one command of a scenario.
type Directive struct {
	Line  int      // 1-based line of the command
	Cmd   string   // the command
	Args  []Arg    // its arguments, in order
	Input []string // lines between the command and ----
	Want  string   // the expected output, each line newline-terminated
}

// Arg is one key=value argument (a bare key has an empty value).
type Arg struct{ Key, Val string }

// Parse reads a scenario.
func Parse(text string) ([]Directive, error) {
	lines := strings.Split(text, "\n")
	var ds []Directive
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		d := Directive{Line: i + 1}
		fields := strings.Fields(l)
		d.Cmd = fields[0]
		for _, f := range fields[1:] {
			k, v, _ := strings.Cut(f, "=")
			d.Args = append(d.Args, Arg{Key: k, Val: v})
		}
		for i++; ; i++ {
			if i >= len(lines) {
				return nil, fmt.Errorf("%w: line %d: %s has no ---- line", ErrScenario, d.Line, d.Cmd)
			}
			if strings.TrimSpace(lines[i]) == "----" {
				break
			}
			d.Input = append(d.Input, strings.TrimSpace(lines[i]))
		}
		var want strings.Builder
		for i++; i < len(lines) && lines[i] != ""; i++ {
			want.WriteString(lines[i])
			want.WriteByte('\n')
		}
		d.Want = want.String()
		ds = append(ds, d)
	}
	return ds, nil
}

// Format writes ds back with outs as their expected outputs: what a
// test's -update flag stores.
func Format(header string, ds []Directive, outs []string) string {
	var b strings.Builder
	b.WriteString(header)
	for i, d := range ds {
		if i > 0 || header != "" {
			b.WriteByte('\n')
		}
		b.WriteString(d.Cmd)
		for _, a := range d.Args {
			b.WriteByte(' ')
			b.WriteString(a.Key)
			if a.Val != "" {
				b.WriteByte('=')
				b.WriteString(a.Val)
			}
		}
		b.WriteByte('\n')
		for _, in := range d.Input {
			b.WriteString(in)
			b.WriteByte('\n')
		}
		b.WriteString("----\n")
		b.WriteString(outs[i])
	}
	return b.String()
}

// Header returns the comment lines before a scenario's first directive,
// so an update keeps them.
func Header(text string) string {
	var b strings.Builder
	if !strings.HasPrefix(strings.TrimSpace(text), "#") {
		return ""
	}
	for _, l := range strings.SplitAfter(text, "\n") {
		t := strings.TrimSpace(l)
		if t != "" && !strings.HasPrefix(t, "#") {
			break
		}
		b.WriteString(l)
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}
