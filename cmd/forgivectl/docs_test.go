package main

import (
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// A documented command line: where it is written and its words.
type docCommand struct {
	where string // file:line
	line  string // as written
	args  []string
}

// placeholders are the words the docs write for a value the reader
// chooses, with the value the test runs them with.
var placeholders = map[string]string{
	"N":        "4",
	"ID":       "t0xyz1",
	"NAME":     "fgv-t0xyz1-leaf1",
	"TOPOLOGY": "leaf-spine-2x4-2spines",
	"SOCKET":   "/run/forgive/t0xyz1/host1.sock",
}

// Every forgivectl command line in README.md and docs/ (code blocks and
// inline code, `forgivectl ...` and `go run ./cmd/forgivectl ...`) runs
// through cobra with --dry-run: a documented command whose flags, topology,
// profile, trace or policy stop working fails here.
func TestDocumentedCommandsRun(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(root) // the docs' paths (traces/..., profiles/...) are relative to the repository
	files := []string{"README.md"}
	err = filepath.WalkDir("docs", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	// docs/profiles.md's my.yaml: the default profile with the override
	// the text gives.
	base, err := os.ReadFile("profiles/loopback.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mine := strings.Replace(string(base), "\noverrides: {}\n", "\noverrides: {reliability.window: 28KiB}\n", 1)
	if mine == string(base) {
		t.Fatal("profiles/loopback.yaml has no empty overrides line to replace")
	}
	myProfile := filepath.Join(t.TempDir(), "my.yaml")
	if err := os.WriteFile(myProfile, []byte(mine), 0o644); err != nil {
		t.Fatal(err)
	}
	placeholders := maps.Clone(placeholders)
	placeholders["my.yaml"] = myProfile
	// docs/lab.md's shards and merge: /tmp/s1 and /tmp/s2 stand for the
	// two shards of a sweep, SHARD... for that sweep run whole, DIR for a
	// directory to write.
	shards := runShards(t, 2)
	placeholders["/tmp/s1"], placeholders["/tmp/s2"] = shards[0], shards[1]
	whole := filepath.Join(t.TempDir(), "whole")
	if code, out := forgivectl(t, append(append([]string{}, tinySweep...), "--out", whole)...); code != 0 {
		t.Fatalf("the whole sweep: exit %d\n%s", code, out)
	}
	placeholders["SHARD..."], placeholders["DIR"] = whole, filepath.Join(t.TempDir(), "out")

	var cmds []docCommand
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, extractCommands(f, string(b))...)
	}
	if len(cmds) < 20 {
		t.Fatalf("found %d documented commands; the extractor lost some", len(cmds))
	}
	for _, c := range cmds {
		args := make([]string, 0, len(c.args)+1)
		args = append(args, "--"+dryRunFlag)
		for _, a := range c.args {
			if v, ok := placeholders[a]; ok {
				a = v
			}
			args = append(args, a)
		}
		code, out := forgivectl(t, args...)
		if code != 0 {
			t.Errorf("%s: `%s` (run as forgivectl %s): exit %d\n%s", c.where, c.line, strings.Join(args, " "), code, out)
			continue
		}
		if !strings.Contains(out, "dry run") && !strings.Contains(out, "Usage:") {
			t.Errorf("%s: `%s` printed no dry-run report:\n%s", c.where, c.line, out)
		}
	}
	t.Logf("%d documented commands ran with --dry-run", len(cmds))
}

var inlineCode = regexp.MustCompile("`([^`]+)`")

// extractCommands finds every forgivectl command line of a markdown file:
// each line of a fenced code block (joined over trailing backslashes,
// comments dropped) and each inline code span outside the blocks.
func extractCommands(file, text string) []docCommand {
	var out []docCommand
	lines := strings.Split(text, "\n")
	fenced := false
	var para []string // the current paragraph, for spans that wrap
	paraStart := 0
	flush := func() {
		joined := strings.Join(para, " ")
		for _, m := range inlineCode.FindAllStringSubmatch(joined, -1) {
			if c, ok := parseCommand(m[1]); ok {
				c.where = file + ":" + itoa(paraStart+1)
				out = append(out, c)
			}
		}
		para = para[:0]
	}
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			flush()
			fenced = !fenced
			continue
		}
		if !fenced {
			if strings.TrimSpace(l) == "" {
				flush()
			} else {
				if len(para) == 0 {
					paraStart = i
				}
				para = append(para, l)
			}
			continue
		}
		start := i
		for strings.HasSuffix(strings.TrimRight(l, " "), `\`) && i+1 < len(lines) {
			i++
			l = strings.TrimSuffix(strings.TrimRight(l, " "), `\`) + " " + lines[i]
		}
		if j := strings.Index(l, " #"); j >= 0 {
			l = l[:j]
		}
		if c, ok := parseCommand(l); ok {
			c.where = file + ":" + itoa(start+1)
			out = append(out, c)
		}
	}
	flush()
	return out
}

// parseCommand recognises `[sudo] forgivectl ARGS` and `[sudo] go run
// ./cmd/forgivectl ARGS`, stopping at a shell operator.
func parseCommand(s string) (docCommand, bool) {
	words := splitWords(strings.TrimPrefix(strings.TrimSpace(s), "$ "))
	if len(words) > 0 && words[0] == "sudo" {
		words = words[1:]
	}
	switch {
	case len(words) >= 1 && words[0] == "forgivectl":
		words = words[1:]
	case len(words) >= 3 && words[0] == "go" && words[1] == "run" && words[2] == "./cmd/forgivectl":
		words = words[3:]
	default:
		return docCommand{}, false
	}
	if i := slices.IndexFunc(words, func(w string) bool {
		return w == "&" || w == "|" || w == "&&" || w == ";" || w == ">" || w == "||"
	}); i >= 0 {
		words = words[:i]
	}
	return docCommand{line: strings.TrimSpace(s), args: words}, true
}

// splitWords splits a command line into words as a shell would for the
// plain words and quotes the docs use.
func splitWords(s string) []string {
	var out []string
	var cur strings.Builder
	var quote rune
	in := false
	for _, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, in = r, true
		case r == ' ' || r == '\t':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	if in {
		out = append(out, cur.String())
	}
	return out
}

func itoa(i int) string { return strconv.Itoa(i) }

// The extractor finds commands in every form the docs write them, and
// nothing else.
func TestExtractCommands(t *testing.T) {
	md := "Run `forgivectl lab\n--steps 3` or `go run ./cmd/forgivectl status`; `cmd/forgivectl` is a directory.\n" +
		"\n```sh\n" +
		"go run ./cmd/forgivectl lab   # the default\n" +
		"sudo forgivectl lab --placement netns \\\n    --ranks 4\n" +
		"install -m 755 forgivectl /usr/local/bin/\n" +
		"forgivectl netns-exec fgv-x-leaf1 -- curl -s 'http://a/b c' | head\n" +
		"```\n"
	var got []string
	for _, c := range extractCommands("x.md", md) {
		got = append(got, c.where+" "+strings.Join(c.args, "|"))
	}
	want := []string{
		"x.md:1 lab|--steps|3", // inline, over a line break
		"x.md:1 status",
		"x.md:5 lab",
		"x.md:6 lab|--placement|netns|--ranks|4",
		"x.md:9 netns-exec|fgv-x-leaf1|--|curl|-s|http://a/b c",
	}
	if !slices.Equal(got, want) {
		t.Errorf("extracted\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
