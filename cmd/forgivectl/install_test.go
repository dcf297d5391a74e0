package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Every program a shell block of README.md or docs/ runs, and every module
// a Python block imports, comes from Go's tree (go, the three binaries, a
// test binary, a script of the repository), from what every Debian system
// has (coreutils, the shell's builtins, apt-get), or from a Debian package
// that an `apt-get install -y` line of the same page or of README.md
// names: a newcomer who pastes the page's install line has every command
// the page gives. A program the tables below do not know fails the test
// until it is placed.
func TestDocumentedProgramsAreInstalled(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	files := docFiles(t)
	texts := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		texts[f] = string(b)
	}
	readme := installLists(texts["README.md"])
	checked := 0
	for _, f := range files {
		lists := installLists(texts[f])
		for _, bad := range lists.withoutYes {
			t.Errorf("%s: `%s` has no -y: pasted into a script it stops at apt's question", f, bad)
		}
		named := func(pkg string) bool { return lists.pkgs[pkg] || readme.pkgs[pkg] }
		for _, u := range blockPrograms(f, texts[f]) {
			checked++
			pkg, why := programPackage(u.prog)
			switch {
			case why != "":
				continue
			case pkg == "":
				t.Errorf("%s: `%s` runs %s, which this test does not place: add it to programPackages (its Debian package) or to baseSystem", u.where, u.line, u.prog)
			case !named(pkg):
				t.Errorf("%s: `%s` runs %s, from the Debian package %s, which no `apt-get install -y` line of %s or README.md names", u.where, u.line, u.prog, pkg, f)
			}
		}
		for _, u := range pythonImports(f, texts[f]) {
			checked++
			if pythonStdlib[u.prog] || u.prog == "forgive" {
				continue
			}
			if pkg := debianPackage(u.prog); !named(pkg) {
				t.Errorf("%s: `%s` imports %s, from the Debian package %s, which no `apt-get install -y` line of %s or README.md names", u.where, u.line, u.prog, pkg, f)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("checked %d programs and imports; the extractor lost some", checked)
	}
	t.Logf("%d programs and imports of %d pages placed", checked, len(files))
}

// A program (or module) a documented line uses.
type use struct {
	where, line, prog string
}

type lists struct {
	pkgs       map[string]bool
	withoutYes []string
}

var aptInstall = regexp.MustCompile("apt-get install([^\n`#|;&]*)")

// installLists are the packages of every `apt-get install` of a page, in
// its blocks and its inline code; withoutYes the lines that lack -y.
func installLists(text string) lists {
	l := lists{pkgs: map[string]bool{}}
	for _, m := range aptInstall.FindAllStringSubmatch(text, -1) {
		yes := false
		for _, w := range strings.Fields(m[1]) {
			switch {
			case w == "-y" || w == "--yes" || w == "-qqy" || w == "-yqq":
				yes = true
			case strings.HasPrefix(w, "-"), strings.HasPrefix(w, "$"):
			default:
				l.pkgs[w] = true
			}
		}
		if !yes {
			l.withoutYes = append(l.withoutYes, strings.TrimSpace(m[0]))
		}
	}
	return l
}

// fencedBlocks calls fn with each line (joined over trailing backslashes
// and over a trailing pipe or &&) of every fenced block of the language
// lang, and its line number.
func fencedBlocks(text, lang string, fn func(line string, n int)) {
	lines := strings.Split(text, "\n")
	fenced, in := false, false
	for i := 0; i < len(lines); i++ {
		l := strings.TrimSpace(lines[i])
		if strings.HasPrefix(l, "```") {
			fenced = !fenced
			in = fenced && l == "```"+lang
			continue
		}
		if !in {
			continue
		}
		start, joined := i, lines[i]
		for i+1 < len(lines) {
			tr := strings.TrimRight(joined, " ")
			if strings.HasSuffix(tr, `\`) {
				joined = strings.TrimSuffix(tr, `\`) + " " + lines[i+1]
			} else if strings.HasSuffix(tr, "|") || strings.HasSuffix(tr, "&&") {
				joined = tr + " " + lines[i+1]
			} else {
				break
			}
			i++
		}
		fn(joined, start+1)
	}
}

// blockPrograms are the programs every line of a page's sh blocks runs.
func blockPrograms(file, text string) []use {
	var out []use
	for _, b := range shBlocks(file, text) {
		for _, l := range b.lines {
			for _, cmd := range shellCommands(l.text) {
				for _, p := range commandPrograms(cmd) {
					out = append(out, use{where: file + ":" + itoa(l.n), line: strings.TrimSpace(l.text), prog: p})
				}
			}
		}
	}
	return out
}

var pyImport = regexp.MustCompile(`^\s*(?:import\s+([\w.]+)|from\s+([\w.]+)\s+import)`)

// pythonImports are the top-level modules every python block of a page
// imports.
func pythonImports(file, text string) []use {
	var out []use
	fencedBlocks(text, "python", func(line string, n int) {
		if m := pyImport.FindStringSubmatch(line); m != nil {
			mod := m[1] + m[2]
			if strings.HasPrefix(mod, ".") {
				return
			}
			top, _, _ := strings.Cut(mod, ".")
			out = append(out, use{where: file + ":" + itoa(n), line: strings.TrimSpace(line), prog: top})
		}
	})
	return out
}

// shellCommands splits a shell line into its simple commands' words: at
// | || && ; & and the parentheses of $( ) and subshells, dropping
// redirections and a comment, keeping quoted words whole.
func shellCommands(line string) [][]string {
	var cmds [][]string
	var cur []string
	type frame struct {
		cur   []string // the interrupted command's words
		word  string   // and its word so far
		quote rune
		slot  int // the inner command's place in cmds
	}
	var outer []frame // the commands a $( ) interrupts, innermost last
	var word strings.Builder
	inWord, redirect := false, false
	var quote rune
	endWord := func() {
		if inWord {
			if !redirect {
				cur = append(cur, word.String())
			}
			redirect = false
			word.Reset()
			inWord = false
		}
	}
	endCmd := func() {
		endWord()
		if len(cur) > 0 {
			cmds = append(cmds, cur)
		}
		cur = nil
	}
	rs := []rune(line)
	for i := 0; i < len(rs); i++ {
		r := rs[i]
		switch {
		case quote == '\'':
			if r == quote {
				quote = 0
			} else {
				word.WriteRune(r)
			}
		case quote == '"' && r == '"':
			quote = 0
		case quote == '"' && !(r == '$' && i+1 < len(rs) && rs[i+1] == '('):
			word.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '$' && i+1 < len(rs) && rs[i+1] == '(': // a command inside the word
			outer = append(outer, frame{cur: cur, word: word.String() + "$()", quote: quote, slot: len(cmds)})
			cmds = append(cmds, nil) // the inner command's place: it runs before the outer one
			cur, quote, inWord = nil, 0, false
			word.Reset()
			i++
		case r == ')' && len(outer) > 0:
			endWord()
			f := outer[len(outer)-1]
			outer = outer[:len(outer)-1]
			cmds[f.slot] = cur
			cur, quote, inWord = f.cur, f.quote, true
			word.WriteString(f.word)
		case r == '#' && !inWord:
			endCmd()
			return compact(cmds)
		case r == ' ' || r == '\t':
			endWord()
		case r == '|' || r == '&' || r == ';' || r == '(' || r == ')' || r == '`':
			if r == '&' && i+1 < len(rs) && rs[i+1] == '>' { // &> FILE
				endWord()
				redirect = true
				i++
				continue
			}
			endCmd()
		case r == '>' || r == '<':
			endWord()
			redirect = true
			for i+1 < len(rs) && (rs[i+1] == '>' || rs[i+1] == '&') {
				i++
			}
		case r >= '0' && r <= '9' && !inWord && i+1 < len(rs) && rs[i+1] == '>': // 2> FILE
		default:
			word.WriteRune(r)
			inWord = true
		}
	}
	endCmd()
	return compact(cmds)
}

// compact drops the empty commands.
func compact(cmds [][]string) [][]string {
	return slices.DeleteFunc(cmds, func(c []string) bool { return len(c) == 0 })
}

// commandPrograms are the programs a simple command runs: its first word
// after assignments, wrappers (sudo, nice -n N, timeout D, env) and the
// shell's keywords, and the programs it runs in a namespace (ip netns
// exec NS PROG, forgivectl netns-exec NS -- PROG).
func commandPrograms(words []string) []string {
	for len(words) > 0 {
		w := words[0]
		switch {
		case envAssignment.MatchString(w):
			words = words[1:]
		case w == "sudo" || w == "env" || w == "exec" || w == "time" || w == "command" || w == "!" ||
			w == "do" || w == "then" || w == "else" || w == "if" || w == "while" || w == "{" || w == "}":
			words = words[1:]
		case w == "nice" && len(words) > 2 && words[1] == "-n":
			words = words[3:]
		case w == "timeout" && len(words) > 1:
			words = words[2:]
		case w == "for" || w == "done" || w == "fi" || w == "in":
			return nil // for NAME in WORDS: no program
		default:
			progs := []string{w}
			switch filepath.Base(w) {
			case "ip":
				if len(words) > 4 && words[1] == "netns" && words[2] == "exec" {
					progs = append(progs, commandPrograms(words[4:])...)
				}
			case "forgivectl":
				if len(words) > 2 && words[1] == "netns-exec" {
					if i := slices.Index(words, "--"); i > 0 {
						progs = append(progs, commandPrograms(words[i+1:])...)
					}
				}
			}
			return progs
		}
	}
	return nil
}

// goTree are the programs Go and the repository provide.
var goTree = map[string]bool{"go": true, "gofmt": true, "forgivectl": true, "forgived": true, "trimswitch": true, "simrun": true}

// baseSystem are the programs every Debian system has: the shell's
// builtins and the Essential and required packages' (coreutils, grep,
// sed, findutils, tar, gzip, apt, passwd's useradd).
var baseSystem = map[string]bool{}

func init() {
	for _, p := range strings.Fields(`cd pwd export set unset source . read wait echo printf test [ true false kill
		cat ln mkdir install rm cp mv ls head tail sort tee sleep wc date env nice timeout chmod chown touch
		mktemp dirname basename cut tr uniq diff cmp grep sed awk find xargs tar gzip zcat id uname nproc df du
		apt-get apt dpkg useradd`) {
		baseSystem[p] = true
	}
}

// programPackages are the Debian packages of the other programs the docs
// run.
var programPackages = map[string]string{
	"python3": "python3",
	"ip":      "iproute2", "tc": "iproute2",
	"ping":   "iputils-ping",
	"curl":   "curl",
	"jq":     "jq",
	"tshark": "tshark",
	"podman": "podman", "buildah": "buildah",
	"git":    "git",
	"squeue": "slurm-client", "sbatch": "slurm-client", "srun": "slurm-client", "scontrol": "slurm-client",
	"taskset":       "util-linux",
	"/usr/bin/time": "time",
	"valgrind":      "valgrind",
	"make":          "make",
}

// external are the programs no Debian package gives a reader: they come
// with what the page is about.
var external = map[string]string{
	"kubectl":   "a Kubernetes cluster's client: docs/cluster.md is for a cluster's users",
	"systemctl": "systemd, the init of the machines deploy/systemd's units are for",
}

// programPackage places a documented program: its Debian package, or why
// it needs none.
func programPackage(prog string) (pkg, why string) {
	base := filepath.Base(prog)
	switch {
	case strings.HasPrefix(prog, "~/forgive-venv/bin/"):
		return "python3-venv", "" // the venv README.md makes
	case strings.HasPrefix(prog, "$") || strings.Contains(prog, "$("):
		return "", "a variable's program"
	case goTree[base] && (base == prog || strings.HasPrefix(prog, "/") || strings.HasPrefix(prog, "./")):
		return "", "Go's tree"
	case strings.HasSuffix(base, ".test"):
		return "", "a test binary go test -c wrote"
	case baseSystem[prog]:
		return "", "the base system"
	case external[prog] != "":
		return "", external[prog]
	}
	if strings.Contains(prog, "/") && !strings.HasPrefix(prog, "/") && !strings.HasPrefix(prog, "~") {
		if _, err := os.Stat(prog); err == nil {
			return "", "a script of the repository"
		}
	}
	if prog == "/usr/bin/python3" {
		return "python3", ""
	}
	return programPackages[prog], ""
}

// pythonStdlib are the standard library's modules the docs' Python blocks
// import.
var pythonStdlib = map[string]bool{}

func init() {
	for _, m := range strings.Fields(`json os sys math re time struct socket subprocess pathlib collections
		itertools functools dataclasses typing argparse csv gzip io tempfile shutil hashlib random statistics`) {
		pythonStdlib[m] = true
	}
}

// The splitter finds every program of the forms the docs write.
func TestShellCommandPrograms(t *testing.T) {
	for _, c := range []struct {
		line string
		want []string
	}{
		{`go test ./x -run '^$' -bench 'A|B' >> out.txt   # a comment | not a pipe`, []string{"go"}},
		{`jq '{dashboard: .}' f.json | curl -sf -d @- http://x/`, []string{"jq", "curl"}},
		{`systemctl daemon-reload && systemctl enable --now trimswitch`, []string{"systemctl", "systemctl"}},
		{`FORGIVE_BIN_DIR=/tmp/b nice -n 10 /usr/bin/python3 -m forgive.tolerance 2>&1 | tee log`, []string{"/usr/bin/python3", "tee"}},
		{`ip netns exec fgv-x-host1 ping 10.77.0.1`, []string{"ip", "ping"}},
		{`forgivectl netns-exec fgv-x-leaf1 -- curl -s 127.0.0.1:9464/metrics`, []string{"forgivectl", "curl"}},
		{`for s in 1 2; do ln -s $(pwd)/a /tmp/$s; done`, []string{"pwd", "ln"}},
		{`echo "$(go env GOPATH)/bin" | tee x`, []string{"go", "echo", "tee"}},
		{`cd python && FORGIVE_BIN_DIR=/tmp/pybin /usr/bin/python3 -m pytest -q tests`, []string{"cd", "/usr/bin/python3"}},
		{`timeout 600 deploy/slurm/ci-test.sh`, []string{"deploy/slurm/ci-test.sh"}},
	} {
		var got []string
		for _, cmd := range shellCommands(c.line) {
			got = append(got, commandPrograms(cmd)...)
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("%s: programs %q, want %q", c.line, got, c.want)
		}
	}
	l := installLists("```sh\napt-get install -y --no-install-recommends jq curl   # tools\n```\nwith `apt-get install buildah podman`")
	if !l.pkgs["jq"] || !l.pkgs["curl"] || !l.pkgs["podman"] || l.pkgs["-y"] || len(l.withoutYes) != 1 {
		t.Errorf("install lists %v, without -y %q", l.pkgs, l.withoutYes)
	}
}
