package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A documented command line: where it is written and its words.
type docCommand struct {
	where  string // file:line
	line   string // as written
	args   []string
	module string // a Python command's module (forgive.tolerance); empty for forgivectl's
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
//
// The commands run in a forgivectl built as a reader builds it, without
// the race detector (plainForgivectl): some 200 commands, reading the
// results they score, took this package past go test's 10 minutes under
// -race on a loaded machine, and the package's other tests run the same
// code in-process under it.
func TestDocumentedCommandsRun(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(root) // the docs' paths (traces/..., profiles/...) are relative to the repository
	forgivectl := func(t *testing.T, args ...string) (int, string) { return plainForgivectl(t, args...) }
	files := docFiles(t)
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
	var shards []string
	for i := 1; i <= 2; i++ {
		dir := filepath.Join(t.TempDir(), "shard")
		if code, out := forgivectl(t, append(append([]string{}, tinySweep...), "--shard", itoa(i)+"/2", "--out", dir)...); code != 0 {
			t.Fatalf("shard %d/2: exit %d\n%s", i, code, out)
		}
		shards = append(shards, dir)
	}
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
		cmds = append(cmds, extractCommands(f, string(b), parseCommand)...)
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

// docFiles are README.md and every markdown file under docs/, relative to
// the repository (the working directory).
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	err := filepath.WalkDir("docs", func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".md") {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// Every command line of the Python package in README.md and docs/
// (`python3 -m forgive.MODULE ...`, `forgive-tolerance ...`) is checked
// against the package installed as README.md installs it, offline: python/
// goes into a virtual environment of this machine's python3 with `pip
// install --no-build-isolation`, and each documented command's `--help`
// must exit 0 with a usage that lists every flag the documented line
// gives.
func TestDocumentedPythonCommandsRun(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	var cmds []docCommand
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cmds = append(cmds, extractCommands(f, string(b), parsePythonCommand)...)
	}
	if len(cmds) < 4 {
		t.Fatalf("found %d documented Python commands; the extractor lost some", len(cmds))
	}
	python := "/usr/bin/python3" // Debian's, as the docs say
	if _, err := os.Stat(python); err != nil {
		if python, err = exec.LookPath("python3"); err != nil {
			t.Skip("no python3 on this machine: the Python commands are not checked")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run := func(name string, args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
		return string(out), err
	}
	if out, err := run(python, "-c", "import ensurepip, venv"); err != nil {
		t.Skipf("%s has no venv module (Debian: apt-get install python3-venv): the Python commands are not checked\n%s", python, out)
	}
	// A copy of the package, so that building it leaves nothing in python/.
	tmp := t.TempDir()
	src := filepath.Join(tmp, "src")
	if err := os.CopyFS(filepath.Join(src, "forgive"), os.DirFS("python/forgive")); err != nil {
		t.Fatal(err)
	}
	pyproject, err := os.ReadFile("python/pyproject.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "pyproject.toml"), pyproject, 0o644); err != nil {
		t.Fatal(err)
	}
	venv := filepath.Join(tmp, "venv")
	if out, err := run(python, "-m", "venv", "--system-site-packages", venv); err != nil {
		t.Fatalf("python3 -m venv --system-site-packages: %v\n%s", err, out)
	}
	if out, err := run(filepath.Join(venv, "bin", "pip"), "install", "-q", "--no-build-isolation", src); err != nil {
		if m := missingModule(out); m != "" {
			t.Skipf("%s lacks the module %s to build python/ offline (Debian: apt-get install -y %s): the Python commands are not checked\n%s",
				python, m, debianPackage(m), out)
		}
		t.Fatalf("pip install --no-build-isolation ./python: %v\n%s", err, out)
	}
	var missing []string // what a command's --help lacked: a module of this Python's, not the package's fault
	for _, c := range cmds {
		var out string
		var err error
		if strings.HasPrefix(c.args[0], "forgive-") { // a console script
			out, err = run(filepath.Join(venv, "bin", c.args[0]), "--help")
		} else {
			out, err = run(filepath.Join(venv, "bin", "python"), "-m", c.module, "--help")
		}
		if m := missingModule(out); err != nil && m != "" {
			missing = append(missing, fmt.Sprintf("%s: `%s` needs the module %s (Debian: apt-get install -y %s)", c.where, c.line, m, debianPackage(m)))
			continue
		}
		if err != nil || !strings.HasPrefix(out, "usage: ") {
			t.Errorf("%s: `%s`: --help: %v\n%s", c.where, c.line, err, out)
			continue
		}
		for _, a := range c.args[1:] {
			flag, _, _ := strings.Cut(a, "=")
			if !strings.HasPrefix(flag, "--") {
				continue
			}
			if !regexp.MustCompile(`(^|[^\w-])` + regexp.QuoteMeta(flag) + `([^\w-]|$)`).MatchString(out) {
				t.Errorf("%s: `%s`: %s is not in its --help:\n%s", c.where, c.line, flag, out)
			}
		}
	}
	t.Logf("%d documented Python commands checked against the installed package", len(cmds)-len(missing))
	if len(missing) > 0 {
		t.Skipf("%d of the %d documented Python commands were not checked: %s lacks a module they import before their usage\n%s",
			len(missing), len(cmds), python, strings.Join(missing, "\n"))
	}
}

var noModule = regexp.MustCompile(`ModuleNotFoundError: No module named '([\w.]+)'`)

// missingModule is the top-level module a Python traceback in out says is
// not installed, or "".
func missingModule(out string) string {
	m := noModule.FindStringSubmatch(out)
	if m == nil {
		return ""
	}
	top, _, _ := strings.Cut(m[1], ".")
	return top
}

// debianPackage is the Debian package that installs a Python module for
// Debian's python3: python3-NAME, but for the modules named otherwise.
func debianPackage(module string) string {
	if p, ok := map[string]string{"PIL": "python3-pil", "yaml": "python3-yaml", "sklearn": "python3-sklearn", "_tkinter": "python3-tk"}[module]; ok {
		return p
	}
	return "python3-" + strings.ToLower(strings.ReplaceAll(module, "_", "-"))
}

// A traceback's missing module names the package to install.
func TestMissingModuleNamesItsPackage(t *testing.T) {
	for _, c := range []struct{ out, module, pkg string }{
		{"Traceback ...\nModuleNotFoundError: No module named 'numpy'\n", "numpy", "python3-numpy"},
		{"ModuleNotFoundError: No module named 'torch.nn'", "torch", "python3-torch"},
		{"ModuleNotFoundError: No module named 'PIL'", "PIL", "python3-pil"},
		{"usage: python3 -m forgive.patterns [-h]", "", ""},
		{"ModuleNotFoundError: import of numpy halted; None in sys.modules", "", ""},
	} {
		m := missingModule(c.out)
		if m != c.module || (m != "" && debianPackage(m) != c.pkg) {
			t.Errorf("%q: module %q package %q, want %q %q", c.out, m, debianPackage(m), c.module, c.pkg)
		}
	}
}

var inlineCode = regexp.MustCompile("`([^`]+)`")

// extractCommands finds every command line of a markdown file that parse
// recognises: each line of a fenced code block (joined over trailing
// backslashes, comments dropped) and each inline code span outside the
// blocks.
func extractCommands(file, text string, parse func(string) (docCommand, bool)) []docCommand {
	var out []docCommand
	lines := strings.Split(text, "\n")
	fenced := false
	var para []string // the current paragraph, for spans that wrap
	paraStart := 0
	flush := func() {
		joined := strings.Join(para, " ")
		for _, m := range inlineCode.FindAllStringSubmatch(joined, -1) {
			if c, ok := parse(m[1]); ok {
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
		if c, ok := parse(l); ok {
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
	return docCommand{line: strings.TrimSpace(s), args: untilOperator(words)}, true
}

// untilOperator cuts words at the first shell operator.
func untilOperator(words []string) []string {
	if i := slices.IndexFunc(words, func(w string) bool {
		return w == "&" || w == "|" || w == "&&" || w == ";" || w == ">" || w == "||"
	}); i >= 0 {
		return words[:i]
	}
	return words
}

// consoleScripts are the Python package's commands (python/pyproject.toml).
var consoleScripts = map[string]string{
	"forgive-tolerance": "forgive.tolerance",
	"forgive-hostapi":   "forgive.hostapi",
}

var envAssignment = regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`)

// parsePythonCommand recognises `[sudo] [VAR=value ...] PYTHON -m
// forgive.MODULE ARGS`, where PYTHON is any path to python3 or python, and
// `[sudo] [VAR=value ...] [PATH/]forgive-SCRIPT ARGS` for the package's
// console scripts, stopping at a shell operator. args[0] is the module or
// the script's name.
func parsePythonCommand(s string) (docCommand, bool) {
	words := splitWords(strings.TrimPrefix(strings.TrimSpace(s), "$ "))
	if len(words) > 0 && words[0] == "sudo" {
		words = words[1:]
	}
	for len(words) > 0 && envAssignment.MatchString(words[0]) {
		words = words[1:]
	}
	if words = untilOperator(words); len(words) == 0 {
		return docCommand{}, false
	}
	prog := filepath.Base(words[0])
	if module, ok := consoleScripts[prog]; ok {
		return docCommand{line: strings.TrimSpace(s), args: append([]string{prog}, words[1:]...), module: module}, true
	}
	if (prog == "python3" || prog == "python") && len(words) >= 3 && words[1] == "-m" && strings.HasPrefix(words[2], "forgive.") {
		return docCommand{line: strings.TrimSpace(s), args: words[2:], module: words[2]}, true
	}
	return docCommand{}, false
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
	for _, c := range extractCommands("x.md", md, parseCommand) {
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

// The Python extractor finds the package's commands in the forms the docs
// write them, and nothing else.
func TestExtractPythonCommands(t *testing.T) {
	md := "Run `python3 -m forgive.hostapi --socket SOCKET status`, not `python3 -m pytest tests`.\n" +
		"\n```sh\n" +
		"cd python && /usr/bin/python3 -m pytest tests   # not the package's\n" +
		"~/forgive-venv/bin/forgive-tolerance --seeds 1 \\\n    --out /tmp/x   # a trial\n" +
		"sudo FORGIVE_BIN_DIR=/tmp/b /usr/bin/python3 -m forgive.tolerance --out=../docs | tee log\n" +
		"forgive-hostapid --help\n" +
		"python3 -m forgive\n" +
		"```\n"
	var got []string
	for _, c := range extractCommands("x.md", md, parsePythonCommand) {
		got = append(got, c.where+" "+c.module+" "+strings.Join(c.args, "|"))
	}
	want := []string{
		"x.md:1 forgive.hostapi forgive.hostapi|--socket|SOCKET|status", // inline, found as the block opens
		"x.md:5 forgive.tolerance forgive-tolerance|--seeds|1|--out|/tmp/x",
		"x.md:7 forgive.tolerance forgive.tolerance|--out=../docs",
	}
	if !slices.Equal(got, want) {
		t.Errorf("extracted\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
