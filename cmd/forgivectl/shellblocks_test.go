package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Every ```sh block of README.md and of the markdown files under docs/ is
// accounted for, so that no documented command rots unseen. A block is
//
//   - checked, when every line is one a checker covers: a forgivectl
//     command (TestDocumentedCommandsRun runs it with --dry-run), a
//     command of the Python package (TestDocumentedPythonCommandsRun runs
//     its --help), a go test, build, install or vet whose packages and
//     -bench and -run patterns name what the repository has, a go tool
//     the toolchain or go.mod provides, a cd into the repository, an
//     apt-get install -y of packages this machine has (without one, the
//     block is skipped naming it), a comment;
//   - run, when it has any other line: as pasted, with bash -e from the
//     repository's root, HOME a new directory, /tmp/ a directory of the
//     test's, within a hang guard; the blocks of a page run in order and
//     share that /tmp, as a reader's do, and a block must leave the
//     repository's tree as it found it. A block whose programs this
//     machine lacks is skipped, naming the package to install;
//   - marked, when it needs what a test cannot have: its first line is a
//     comment `# needs: WORD, WORD` of the words in needsWords, which say
//     what the reader must bring. A marked block is not run; its lines are
//     still checked where a checker covers them.
//
// An unmarked block the test can neither check nor run fails it.
func TestDocumentedShellBlocks(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(root)
	gc := newGoChecker(t, root)
	var pages [][]shBlock
	n := 0
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		blocks := shBlocks(f, string(b))
		pages = append(pages, blocks)
		n += len(blocks)
	}
	if n < 80 {
		t.Fatalf("found %d sh blocks; the extractor lost some", n)
	}
	counts := map[string]int{}
	for _, blocks := range pages {
		if len(blocks) == 0 {
			continue
		}
		tmp := t.TempDir() // the page's /tmp, shared by its blocks as a reader's is
		for _, b := range blocks {
			t.Run(strings.ReplaceAll(b.where(), "/", "_"), func(t *testing.T) {
				for _, w := range b.needs {
					if needsWords[w] == "" {
						t.Errorf("%s: `# needs: %s`: %q is none of the words needsWords explains", b.where(), strings.Join(b.needs, ", "), w)
					}
				}
				missing, uncovered := b.check(t, gc)
				switch {
				case len(b.needs) > 0:
					counts["marked"]++
					return
				case len(uncovered) == 0 && len(missing) == 0:
					counts["checked"]++
					return
				case len(uncovered) == 0:
					// Every line is checked, but it installs a package
					// this machine has not (CI installs them all).
					counts["skipped"]++
					t.Skipf("%s: not checked, this machine lacks %s", b.where(), strings.Join(missing, "; "))
				}
				if bad := unattended(b); len(bad) > 0 {
					t.Fatalf("%s: neither checked line by line (%s) nor safe to run unattended: it runs %s; mark it `# needs: WORD` (needsWords), or, if the program can only touch HOME, /tmp and the terminal, add it to runnablePrograms",
						b.where(), describe(uncovered), strings.Join(bad, ", "))
				}
				if len(missing) > 0 {
					counts["skipped"]++
					t.Skipf("%s: not run, this machine lacks %s", b.where(), strings.Join(missing, "; "))
				}
				counts["run"]++
				b.run(t, root, tmp, uncovered)
			})
		}
	}
	t.Logf("%d sh blocks: %d run, %d checked line by line, %d marked as needing what a test cannot have, %d skipped for a missing package",
		n, counts["run"], counts["checked"], counts["marked"], counts["skipped"])
}

// runnablePrograms are the programs an unmarked block may run: they read
// the repository and write only under HOME and /tmp, which the test
// moves, and to the terminal. A block with any other program (an install,
// a daemon, a container, a cluster's client) is marked; the test runs as
// root in CI, and a block run as root that it should not have run
// changes the machine.
var runnablePrograms = map[string]bool{}

func init() {
	for _, p := range strings.Fields(`go jq zcat python3 ls cat head tail grep sort wc echo printf tee export cd true test [`) {
		runnablePrograms[p] = true
	}
}

// unattended are the programs of a block the test will not run
// unattended: any not in runnablePrograms, sudo, and go build or install
// with an -o outside /tmp.
func unattended(b shBlock) []string {
	var bad []string
	for _, l := range b.lines {
		for _, words := range shellCommands(l.text) {
			for len(words) > 0 && envAssignment.MatchString(words[0]) {
				words = words[1:]
			}
			if len(words) == 0 {
				continue
			}
			switch {
			case !runnablePrograms[words[0]]:
				bad = append(bad, words[0])
			case words[0] == "go":
				if i := slices.Index(words, "-o"); i > 0 && i+1 < len(words) && filepath.IsAbs(words[i+1]) && !strings.HasPrefix(words[i+1], "/tmp/") {
					bad = append(bad, "go "+words[1]+" -o "+words[i+1])
				}
			}
		}
	}
	return slices.Compact(bad)
}

// describe lists a block's lines as file lines.
func describe(lines []docLine) string {
	var out []string
	for _, u := range lines {
		out = append(out, fmt.Sprintf("line %d: %s", u.n, u.text))
	}
	return strings.Join(out, "; ")
}

// needsWords are the words of a `# needs:` line: what a block needs that
// the test cannot have, as the reader must read it.
var needsWords = map[string]string{
	"root":       "root: network namespaces, /etc, /usr/local, system users; the test never runs a block as root",
	"podman":     "podman with the images it builds, in the machine's own image store",
	"kubernetes": "a Kubernetes cluster and its kubectl",
	"slurm":      "a Slurm cluster (deploy/slurm/ci-test.sh starts a single-node one as root)",
	"systemd":    "systemd as the machine's init",
	"grafana":    "a running Grafana",
	"machines":   "more than one machine",
	"daemons":    "daemons started in the background on the page's fixed addresses and sockets, which runs beside other tests collide on; the integration tests run them on addresses of their own",
	"long":       "longer than a test may run: a sweep, a measurement, a lab or training on real processes",
	"history":    "an older commit checked out or built: a dated measurement's recipe",
	"internet":   "the internet: a repository or download no mirror of the machine serves (htsim's source)",
}

// A line of a block, joined over trailing backslashes, pipes and &&.
type docLine struct {
	n    int // line number in the file
	text string
}

// shBlock is one ```sh block.
type shBlock struct {
	file  string
	start int    // the opening fence's line
	text  string // the block's lines as written
	lines []docLine
	needs []string
}

func (b shBlock) where() string { return fmt.Sprintf("%s:%d", b.file, b.start) }

var needsLine = regexp.MustCompile(`^#\s*needs:\s*(.*)$`)

// shBlocks are the ```sh blocks of a markdown file.
func shBlocks(file, text string) []shBlock {
	var out []shBlock
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```sh" {
			if strings.HasPrefix(strings.TrimSpace(lines[i]), "```") { // skip any other block whole
				for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
				}
			}
			continue
		}
		b := shBlock{file: file, start: i + 1}
		var body []string
		for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
			body = append(body, lines[i])
		}
		b.text = strings.Join(body, "\n") + "\n"
		b.lines = joinLines(b.start+1, body)
		for _, l := range body {
			if strings.TrimSpace(l) == "" {
				continue
			}
			if m := needsLine.FindStringSubmatch(strings.TrimSpace(l)); m != nil {
				for w := range strings.SplitSeq(m[1], ",") {
					if w = strings.TrimSpace(w); w != "" {
						b.needs = append(b.needs, w)
					}
				}
			}
			break
		}
		out = append(out, b)
	}
	return out
}

// joinLines joins a block's lines as the shell reads them: over a
// trailing backslash, a trailing pipe or &&, and a quote left open (a jq
// program or python3 -c over several lines); first is the first line's
// number.
func joinLines(first int, body []string) []docLine {
	var out []docLine
	var cur strings.Builder
	start := 0
	var quote rune
	for i, l := range body {
		if cur.Len() == 0 {
			start = first + i
		}
		cur.WriteString(l)
	scan:
		for j, r := range l {
			switch {
			case quote == 0 && r == '#' && (j == 0 || l[j-1] == ' '):
				break scan // a comment: its quotes are not the shell's
			case quote == 0 && (r == '\'' || r == '"'):
				quote = r
			case quote == r:
				quote = 0
			}
		}
		tr := strings.TrimRight(l, " ")
		switch {
		case quote != 0:
			cur.WriteString("\n")
			continue
		case strings.HasSuffix(tr, `\`):
			s := strings.TrimSuffix(strings.TrimRight(cur.String(), " "), `\`)
			cur.Reset()
			cur.WriteString(s + " ")
			continue
		case strings.HasSuffix(tr, "|") || strings.HasSuffix(tr, "&&"):
			cur.WriteString(" ")
			continue
		}
		out = append(out, docLine{n: start, text: cur.String()})
		cur.Reset()
	}
	if cur.Len() > 0 {
		out = append(out, docLine{n: start, text: cur.String()})
	}
	return out
}

// check reports what the machine lacks to run the block (a package
// named by an apt-get install line and not installed, or a program not on
// PATH) and the lines no checker covers; it fails t for a covered line
// that names something the repository does not have.
func (b shBlock) check(t *testing.T, gc *goChecker) (missing []string, uncovered []docLine) {
	t.Helper()
	dir := "." // the block's working directory, as cd lines move it
	for _, l := range b.lines {
		where := fmt.Sprintf("%s:%d", b.file, l.n)
		if _, ok := parseCommand(l.text); ok {
			continue // TestDocumentedCommandsRun
		}
		if _, ok := parsePythonCommand(l.text); ok {
			continue // TestDocumentedPythonCommandsRun
		}
		covered := true
		for _, words := range shellCommands(l.text) {
			for len(words) > 0 && envAssignment.MatchString(words[0]) {
				words = words[1:]
			}
			if len(words) == 0 {
				covered = false // an assignment the rest of the block uses
				continue
			}
			switch {
			case words[0] == "go":
				if !gc.check(t, where, dir, words) {
					covered = false
				}
			case words[0] == "cd" && len(words) == 2 && !strings.ContainsAny(words[1], "$~") && !filepath.IsAbs(words[1]):
				next := filepath.Join(dir, words[1])
				if fi, err := os.Stat(next); err != nil || !fi.IsDir() {
					if len(b.needs) == 0 {
						t.Errorf("%s: `%s`: %s is no directory of the repository", where, l.text, words[1])
					}
					// A marked block may make its own directories (a clone
					// of another project); what it runs there is the
					// reader's to bring, and is not checked.
					return slices.Compact(missing), append(uncovered, b.lines...)
				}
				dir = next
			case len(words) > 2 && words[0] == "apt-get" && words[1] == "install":
				for _, p := range words[2:] {
					if !strings.HasPrefix(p, "-") && !debInstalled(p) {
						missing = append(missing, fmt.Sprintf("the package %s (apt-get install -y %s)", p, p))
					}
				}
			default:
				covered = false
			}
		}
		if !covered {
			uncovered = append(uncovered, l)
		}
	}
	if len(uncovered) > 0 && len(b.needs) == 0 {
		for _, l := range b.lines {
			for _, words := range shellCommands(l.text) {
				for _, prog := range commandPrograms(words) {
					if goTree[filepath.Base(prog)] || strings.HasPrefix(prog, "$") || strings.Contains(prog, "/") || baseSystem[prog] {
						continue
					}
					if !onBlockPath(t, prog) {
						pkg, _ := programPackage(prog)
						missing = append(missing, fmt.Sprintf("%s (apt-get install -y %s)", prog, pkg))
					}
				}
			}
		}
	}
	return slices.Compact(missing), uncovered
}

// debInstalled says whether dpkg has the Debian package installed; on a
// machine without dpkg, no package is.
func debInstalled(pkg string) bool {
	out, err := exec.Command("dpkg-query", "-W", "-f=${Status}", pkg).Output()
	return err == nil && strings.HasSuffix(strings.TrimSpace(string(out)), " installed")
}

// run runs the block as pasted into bash -e from the repository's root,
// with /tmp/ moved to tmp and HOME to a directory of its own, and fails t
// if it fails or changes the repository's tree. apt-get install lines,
// whose packages check found installed, are not run.
func (b shBlock) run(t *testing.T, root, tmp string, uncovered []docLine) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	if err := os.Mkdir(home, 0o755); err != nil {
		t.Fatal(err)
	}
	var script strings.Builder
	for l := range strings.SplitSeq(strings.TrimSuffix(b.text, "\n"), "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "apt-get install") {
			l = ": " + l
		}
		script.WriteString(strings.ReplaceAll(l, "/tmp/", tmp+"/") + "\n")
	}
	before := gitStatus(t, root)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute) // a hang guard
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script.String())
	cmd.Dir = root
	cmd.Env = blockEnv(t, home)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // whatever the block left in the background
	}
	var lines []string
	for _, u := range uncovered {
		lines = append(lines, fmt.Sprintf("%d: %s", u.n, u.text))
	}
	if err != nil {
		t.Fatalf("%s: the block (run for %s) failed: %v\n%s", b.where(), strings.Join(lines, "; "), err, out.String())
	}
	if after := gitStatus(t, root); after != before {
		t.Errorf("%s: the block changed the repository's tree:\nbefore:\n%s\nafter:\n%s", b.where(), before, after)
	}
	if b.file == "README.md" && strings.Contains(b.text, "~/.profile") {
		checkShellPath(t, home)
	}
	t.Logf("%s ran: %s", b.where(), strings.Join(lines, "; "))
}

// onBlockPath says whether prog is an executable file in a directory of
// the PATH the block runs with (blockEnv), not the test's own: a program
// only this process finds (a pyenv shim before /usr/bin) would be
// missing when the block runs.
func onBlockPath(t *testing.T, prog string) bool {
	t.Helper()
	for _, dir := range filepath.SplitList(blockPath(t)) {
		if fi, err := os.Stat(filepath.Join(dir, prog)); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return true
		}
	}
	return false
}

// blockPath is a reader's PATH for a block: the system's, with Go's.
func blockPath(t *testing.T) string {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(goBin) + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
}

// blockEnv is a reader's environment for a block: their PATH with Go's,
// a HOME of the test's, the module and build caches of this machine (so
// nothing is downloaded) and no proxy.
func blockEnv(t *testing.T, home string) []string {
	t.Helper()
	env := []string{"HOME=" + home, "LANG=C.UTF-8", "GOPROXY=off", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod", "PATH=" + blockPath(t)}
	for _, k := range []string{"GOCACHE", "GOMODCACHE"} {
		v, err := exec.Command("go", "env", k).Output()
		if err != nil {
			t.Fatal(err)
		}
		env = append(env, k+"="+strings.TrimSpace(string(v)))
	}
	return env
}

// checkShellPath checks README.md's PATH advice: after its block, a login
// shell and an interactive non-login shell of a HOME it wrote find go and
// the binaries go install put in $HOME/go/bin.
func checkShellPath(t *testing.T, home string) {
	t.Helper()
	for _, mode := range []string{"-lc", "-ic"} {
		cmd := exec.Command("bash", mode, "command -v go && command -v forgivectl")
		cmd.Env = []string{"HOME=" + home, "PATH=/usr/bin:/bin", "TERM=dumb"}
		cmd.Stdin = nil
		out, err := cmd.CombinedOutput()
		if err != nil || !strings.Contains(string(out), filepath.Join(home, "go", "bin", "forgivectl")) {
			t.Errorf("bash %s in a HOME README.md's install block wrote finds no go and forgivectl: %v\n%s", mode, err, out)
		}
	}
}

// gitStatus is the repository's git status, untracked files included;
// in a tree that is no git repository (a source archive), a listing of
// every file with its size and modification time.
func gitStatus(t *testing.T, root string) string {
	t.Helper()
	cmd := exec.Command("git", "status", "--porcelain", "--untracked-files=all")
	cmd.Dir = root
	out, err := cmd.Output()
	if err == nil {
		return string(out)
	}
	var b strings.Builder
	werr := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		fmt.Fprintf(&b, "%s %d %d\n", path, fi.Size(), fi.ModTime().UnixNano())
		return nil
	})
	if werr != nil {
		t.Fatalf("git status: %v; listing the tree: %v", err, werr)
	}
	return b.String()
}

// goChecker checks documented go commands against the repository without
// building anything: the packages they name exist, and their -bench and
// -run patterns name benchmarks and tests those packages have.
type goChecker struct {
	root  string
	tools map[string]bool // go tool NAME: the toolchain's and go.mod's
}

func newGoChecker(t *testing.T, root string) *goChecker {
	t.Helper()
	gc := &goChecker{root: root, tools: map[string]bool{}}
	for _, n := range strings.Fields("pprof trace nm objdump addr2line buildid test2json covdata doc") { // built when first run, so go tool does not list them
		gc.tools[n] = true
	}
	out, err := exec.Command("go", "tool").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range strings.Fields(string(out)) {
		gc.tools[filepath.Base(n)] = true
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if _, tools, ok := strings.Cut(string(mod), "\ntool ("); ok {
		tools, _, _ = strings.Cut(tools, ")")
		for _, p := range strings.Fields(tools) {
			gc.tools[filepath.Base(p)] = true
		}
	}
	return gc
}

var goFuncs = regexp.MustCompile(`(?m)^func ((?:Test|Benchmark)\w*)\(`)

// check checks one go command run from dir; it reports whether a checker
// covers it (go run of a program other than forgivectl is run instead).
func (gc *goChecker) check(t *testing.T, where, dir string, words []string) bool {
	t.Helper()
	if len(words) < 2 {
		return false
	}
	switch words[1] {
	case "tool":
		if len(words) < 3 || !gc.tools[words[2]] {
			t.Errorf("%s: `%s`: no such go tool in the toolchain or go.mod", where, strings.Join(words, " "))
		}
		return true
	case "test", "build", "install", "vet", "list":
	default:
		return false
	}
	var pkgs []string
	patterns := map[string]string{}
	for i := 2; i < len(words); i++ {
		w := words[i]
		switch {
		case w == "-bench" || w == "-run":
			if i+1 < len(words) {
				patterns[w] = words[i+1]
				i++
			}
		case strings.HasPrefix(w, "-bench=") || strings.HasPrefix(w, "-run="):
			k, v, _ := strings.Cut(w, "=")
			patterns[k] = v
		case w == "-o" || w == "-benchtime" || w == "-count" || w == "-filter" || w == "-timeout":
			i++
		case strings.HasPrefix(w, "./") || w == ".":
			pkgs = append(pkgs, w)
		}
	}
	var funcs []string
	for _, p := range pkgs {
		rel := strings.TrimSuffix(p, "/...")
		path := filepath.Join(dir, rel)
		if fi, err := os.Stat(path); err != nil || !fi.IsDir() {
			t.Errorf("%s: `%s`: %s is no package directory of the repository", where, strings.Join(words, " "), p)
			continue
		}
		if strings.HasSuffix(p, "/...") {
			continue
		}
		tests, _ := filepath.Glob(filepath.Join(path, "*_test.go"))
		for _, f := range tests {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range goFuncs.FindAllStringSubmatch(string(b), -1) {
				funcs = append(funcs, m[1])
			}
		}
	}
	for flag, pat := range patterns {
		prefix := map[string]string{"-bench": "Benchmark", "-run": "Test"}[flag]
		if pat == "^$" || pat == "XXX" || pat == "." || len(pkgs) == 0 || slices.ContainsFunc(pkgs, func(p string) bool { return strings.HasSuffix(p, "/...") }) {
			continue
		}
		top, _, _ := strings.Cut(pat, "/") // sub-benchmarks are not checked
		for alt := range strings.SplitSeq(strings.Trim(top, "'\""), "|") {
			re, err := regexp.Compile(alt)
			if err != nil {
				t.Errorf("%s: `%s`: %s %q: %v", where, strings.Join(words, " "), flag, alt, err)
				continue
			}
			if !slices.ContainsFunc(funcs, func(f string) bool {
				return strings.HasPrefix(f, prefix) && re.MatchString(f)
			}) {
				t.Errorf("%s: `%s`: %s %q names no %s function of %s", where, strings.Join(words, " "), flag, alt, prefix, strings.Join(pkgs, " "))
			}
		}
	}
	return true
}

// The block extractor reads a marker and joins continued lines; the go
// checker finds a benchmark a pattern names, and fails on one it does not.
func TestShBlocks(t *testing.T) {
	md := "text\n```sh\n# needs: root, long\nforgivectl lab \\\n  --steps 2\n```\n```json\n{}\n```\n```sh\nls\n```\n"
	got := shBlocks("x.md", md)
	if len(got) != 2 || got[0].start != 2 || !slices.Equal(got[0].needs, []string{"root", "long"}) ||
		len(got[0].lines) != 2 || got[0].lines[1].text != "forgivectl lab    --steps 2" || got[1].needs != nil || got[1].start != 10 {
		t.Errorf("shBlocks: %+v", got)
	}
	md = "```sh\nzcat r.json.gz | jq -r '.runs[]\n  | .policy # not a comment'  # a comment's ' quote\nuseradd x && go build -o /usr/local/bin/ ./cmd/...\n```\n"
	b := shBlocks("y.md", md)[0]
	if len(b.lines) != 2 || b.lines[0].text != "zcat r.json.gz | jq -r '.runs[]\n  | .policy # not a comment'  # a comment's ' quote" || b.lines[1].n != 4 {
		t.Errorf("joinLines: %+v", b.lines)
	}
	if bad := unattended(b); !slices.Equal(bad, []string{"useradd", "go build -o /usr/local/bin/"}) {
		t.Errorf("unattended: %q, want useradd and the build into /usr/local/bin", bad)
	}
}

// commandStarts are the first words of a line that reads as a command a
// reader would paste: a block of README.md or docs/ holding one belongs in
// an sh block, where TestDocumentedShellBlocks runs, checks or marks it.
var commandStarts = regexp.MustCompile(`^(\$ |sudo |(forgivectl|forgived|trimswitch|simrun|go|git|cd|tshark|ip|apt-get|pip|python3|bash|curl|kubectl|podman|sbatch|srun|systemctl|taskset|benchstat|for|make) |\./|/tmp/|\(cd )`)

// A fenced block without a language holds output, trees and diagrams,
// never a command: a command there would escape every documented-command
// test. (TestNoCommandsOutsideShellBlocksFindsThem holds the matcher.)
func TestNoCommandsOutsideShellBlocks(t *testing.T) {
	t.Chdir("../..")
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, where := range commandsInBareBlocks(f, string(b)) {
			t.Errorf("%s: a command in a block without a language; open the block with ```sh (and `# needs: WORD` if a test cannot run it), and put its output in a block of its own", where)
		}
	}
}

// commandsInBareBlocks names the lines of text's language-less fenced
// blocks that read as commands.
func commandsInBareBlocks(file, text string) []string {
	var out []string
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		fence := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(fence, "```") {
			continue
		}
		bare := fence == "```"
		for i++; i < len(lines) && !strings.HasPrefix(strings.TrimSpace(lines[i]), "```"); i++ {
			if bare && commandStarts.MatchString(strings.TrimSpace(lines[i])) {
				out = append(out, fmt.Sprintf("%s:%d", file, i+1))
			}
		}
	}
	return out
}

func TestNoCommandsOutsideShellBlocksFindsThem(t *testing.T) {
	page := "text\n```\ngo test ./sim\n```\n```sh\ngo test ./sim\n```\n```\nforgived: bad config\ncmd/forgived  binaries\n$ forgivectl lab\n```\n"
	got := commandsInBareBlocks("p.md", page)
	want := []string{"p.md:3", "p.md:11"}
	if !slices.Equal(got, want) {
		t.Fatalf("commands found at %v, want %v", got, want)
	}
}
