package archtest

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/forgive-emu/forgive/"

// sansIO lists the packages that must import no I/O and read no real clock,
// with the project packages each may import ("arrows point down only").
var sansIO = map[string][]string{
	"wire":        {},
	"reliability": {"wire"},
	"congestion":  {"internal/units"},
	"budget":      {"internal/splitmix"},
	"switchcore":  {"wire", "internal/splitmix", "internal/units", "internal/pfcwd"},
	"nic":         {"wire", "reliability", "congestion", "budget", "internal/splitmix", "internal/units", "internal/pfcwd"},
	// SplitMix64, the one copy the engines share.
	"internal/splitmix": {},
	// The PFC watchdogs' leaky bucket, the one copy the NIC and the switch
	// share.
	"internal/pfcwd": {},
	// The quantities' types (units.Rate is every engine's link rate),
	// which decode through encoding.TextUnmarshaler and know no YAML.
	"internal/units": {},
	"tss":            {"wire"},
	// The collective compiler: arithmetic on a spec, no project imports.
	"collective": {},
	// The host API's semantics over a NIC engine, which the daemon and the
	// simulator share; hostapi is there for its types.
	"hostapi/nicapi": {"hostapi", "nic", "budget"},
	// The simulator's script language: it builds fabrics with sim and
	// sets the engines' configs, and reads quantities with internal/units;
	// simrun and the tests own the files and the wall clock.
	"sim/scenario": {"sim", "nic", "switchcore", "budget", "reliability", "internal/units"},
}

// forbiddenImports are the packages through which real I/O happens.
var forbiddenImports = map[string]bool{
	"net": true, "os": true, "syscall": true, "os/exec": true, "os/signal": true,
	"net/http": true, "golang.org/x/sys/unix": true, "golang.org/x/net/ipv4": true,
	"github.com/google/gopacket": true, // decoding captures is an adapter's job (wire/layers)
	"go.yaml.in/yaml/v3":         true, // it imports os; decoding files is a config loader's job
}

// forbiddenTime are the time functions that read or wait on the real clock.
var forbiddenTime = map[string]bool{
	"Now": true, "Sleep": true, "After": true, "Since": true, "Until": true,
	"Tick": true, "NewTimer": true, "NewTicker": true, "AfterFunc": true,
}

// applicationSide lists packages above the engines that still must not
// reach into them: the host API speaks its own types, and the daemon
// adapts ("hostapi must not import nic, reliability, congestion, budget or
// fabric"); udpio is a socket layer that knows no protocol.
var applicationSide = map[string][]string{
	"hostapi": {},
	"udpio":   {},
}

func TestApplicationSideImports(t *testing.T) {
	for pkg, allowed := range applicationSide {
		checkImports(t, pkg, func(rest string) bool { return !contains(allowed, rest) }, "it must stay independent of the engines")
	}
}

// checkImports reports every import of this module by pkg that bad refuses.
func checkImports(t *testing.T, pkg string, bad func(rest string) bool, why string) {
	t.Helper()
	for name, f := range parseDir(t, filepath.Join("..", "..", pkg)) {
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			if rest, ok := strings.CutPrefix(path, module); ok && bad(rest) {
				t.Errorf("%s: %s imports %s; %s", name, pkg, rest, why)
			}
		}
	}
}

func TestSansIOPackages(t *testing.T) {
	root := filepath.Join("..", "..")
	for pkg, allowed := range sansIO {
		dir := filepath.Join(root, pkg)
		if _, err := os.Stat(dir); os.IsNotExist(err) {
			continue // not written yet
		}
		files := parseDir(t, dir)
		if len(files) == 0 {
			continue
		}
		for name, f := range files {
			for _, v := range violations(pkg, name, f, allowed) {
				t.Error(v)
			}
		}
	}
}

func parseDir(t *testing.T, dir string) map[string]*ast.File {
	t.Helper()
	files := map[string]*ast.File{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != dir {
			return filepath.SkipDir // sub-packages (e.g. wire/layers) are adapters, checked on their own
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files[path] = f
		return nil
	})
	if err != nil {
		t.Fatalf("parse %s: %v", dir, err)
	}
	return files
}

// violations lists every way file f of package pkg breaks the rules.
func violations(pkg, name string, f *ast.File, allowed []string) []string {
	var out []string
	timeName := ""
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if forbiddenImports[path] {
			out = append(out, fmt.Sprintf("%s: sans-I/O package %s imports %q", name, pkg, path))
		}
		if rest, ok := strings.CutPrefix(path, module); ok && !contains(allowed, rest) {
			out = append(out, fmt.Sprintf("%s: %s imports %s, which is not below it in the layer diagram", name, pkg, rest))
		}
		if path == "time" {
			timeName = "time"
			if imp.Name != nil {
				timeName = imp.Name.Name
			}
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GoStmt:
			out = append(out, fmt.Sprintf("%s: sans-I/O package %s starts a goroutine", name, pkg))
		case *ast.SelectorExpr:
			if id, ok := n.X.(*ast.Ident); ok && timeName != "" && id.Name == timeName && forbiddenTime[n.Sel.Name] {
				out = append(out, fmt.Sprintf("%s: sans-I/O package %s calls time.%s; take now as an argument", name, pkg, n.Sel.Name))
			}
		}
		return true
	})
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestCheckerCatchesViolations proves the checker can fail: a file that
// breaks every rule must produce one error per rule.
func TestCheckerCatchesViolations(t *testing.T) {
	src := `package bad
import (
	"net"
	clock "time"
	"github.com/forgive-emu/forgive/nic"
)
func f() { _ = clock.Now(); go f(); _ = net.IPv4len; _ = nic.X }
`
	f, err := parser.ParseFile(token.NewFileSet(), "bad.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := violations("wire", "bad.go", f, nil)
	want := []string{`imports "net"`, "imports nic", "starts a goroutine", "calls time.Now"}
	if len(got) != len(want) {
		t.Fatalf("got %d violations, want %d: %q", len(got), len(want), got)
	}
	for _, w := range want {
		found := false
		for _, g := range got {
			found = found || strings.Contains(g, w)
		}
		if !found {
			t.Errorf("no violation mentions %q in %q", w, got)
		}
	}
}

// driverForbidden lists, for each daemon's driver, the engine packages it
// must reach only through its engine's config ("forgivedrv reaches the engine
// only through nic's own config").
var driverForbidden = map[string][]string{
	"forgivedrv":    {"reliability", "congestion", "switchcore"},
	"trimswitchdrv": {"nic", "reliability", "congestion", "budget"},
}

func TestDriversReachTheirEngineOnly(t *testing.T) {
	for pkg, forbidden := range driverForbidden {
		checkImports(t, pkg, func(rest string) bool { return contains(forbidden, rest) }, "it reaches the protocol through its engine's config")
	}
}

// simulatorPath lists the packages of the simulator's placement, which
// must not pull in the daemon's logger, metrics or sockets: they reach
// the host API through hostapi/nicapi, not through forgivedrv.
var simulatorPath = []string{"lab/simhost", "hostapi/nicapi"}

// daemonOnly are the import paths (by prefix) that only a daemon needs.
var daemonOnly = []string{"go.uber.org/zap", "github.com/prometheus/", module + "udpio", module + "forgivedrv"}

func TestSimulatorPathImportsNoDaemon(t *testing.T) {
	for _, pkg := range simulatorPath {
		for _, v := range daemonImports(t, pkg) {
			t.Errorf("%s imports %s (through %s); the simulator's placement must not", pkg, v[0], v[1])
		}
	}
}

// TestDaemonImportsAreFound proves the walk can fail: forgivedrv itself pulls
// in every daemon-only package but itself.
func TestDaemonImportsAreFound(t *testing.T) {
	found := map[string]bool{}
	for _, v := range daemonImports(t, "forgivedrv") {
		for _, d := range daemonOnly {
			found[d] = found[d] || strings.HasPrefix(v[0], d)
		}
	}
	for _, d := range daemonOnly[:3] {
		if !found[d] {
			t.Errorf("the walk from forgivedrv did not find %s", d)
		}
	}
}

// daemonImports walks the project's imports from pkg (its non-test files,
// transitively) and returns each daemon-only import with the project
// package that makes it.
func daemonImports(t *testing.T, pkg string) [][2]string {
	t.Helper()
	var out [][2]string
	seen := map[string]bool{pkg: true}
	queue := []string{pkg}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, f := range parseDir(t, filepath.Join("..", "..", p)) {
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				for _, d := range daemonOnly {
					if strings.HasPrefix(path, d) {
						out = append(out, [2]string{path, p})
					}
				}
				if rest, ok := strings.CutPrefix(path, module); ok && !seen[rest] {
					seen[rest] = true
					queue = append(queue, rest)
				}
			}
		}
	}
	return out
}
