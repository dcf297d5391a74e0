package archtest

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The layer tables: README.md's and docs/architecture.md's "## Layers"
// code blocks, one row a line, the highest first. A row starts with its
// packages (paths with a slash, "lab/" for lab and every package under it
// that no other entry names) and ends with a description. A package
// imports only packages on its row or below it.
var layerDocs = []string{"README.md", "docs/architecture.md"}

// TestLayerTablesMatchTheImports fails when a layer table and the imports
// disagree: a package no entry covers, an entry that names no package, or
// an import of a package on a higher row.
func TestLayerTablesMatchTheImports(t *testing.T) {
	root := filepath.Join("..", "..")
	imports := moduleImports(t, root)
	for _, doc := range layerDocs {
		rows, err := layerTable(root, doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range layerErrors(rows, imports) {
			t.Errorf("%s: %s", doc, e)
		}
	}
}

// TestLayerCheckCatchesDisagreement feeds the check a table and imports
// that disagree in each way it reports.
func TestLayerCheckCatchesDisagreement(t *testing.T) {
	rows := [][]string{{"cmd/a"}, {"eng/", "gone/"}, {"wire/"}}
	imports := map[string][]string{
		"cmd/a":    {"eng"},
		"eng":      {"wire"},
		"eng/sub":  {"cmd/a"}, // up two rows
		"wire":     nil,
		"stranger": nil, // in no row
	}
	got := strings.Join(layerErrors(rows, imports), "\n")
	for _, want := range []string{
		"eng/sub imports cmd/a, on a higher row",
		"stranger is in no row",
		"gone/ names no package",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the check did not report %q; it reported:\n%s", want, got)
		}
	}
	if n := len(layerErrors(rows[:2], map[string][]string{"cmd/a": {"eng"}, "eng": nil, "gone": nil})); n != 0 {
		t.Errorf("%d errors for a table that agrees with the imports", n)
	}
}

// layerTable reads the rows of doc's "## Layers" code block.
func layerTable(root, doc string) ([][]string, error) {
	b, err := os.ReadFile(filepath.Join(root, doc))
	if err != nil {
		return nil, err
	}
	_, after, ok := strings.Cut(string(b), "\n## Layers\n")
	if !ok {
		return nil, fmt.Errorf("%s: no \"## Layers\" section", doc)
	}
	_, after, ok = strings.Cut(after, "```\n")
	block, _, ok2 := strings.Cut(after, "```")
	if !ok || !ok2 {
		return nil, fmt.Errorf("%s: no code block under \"## Layers\"", doc)
	}
	var rows [][]string
	for line := range strings.SplitSeq(block, "\n") {
		var row []string
		for _, f := range strings.Fields(line) {
			if !strings.Contains(f, "/") || !isDir(filepath.Join(root, strings.TrimSuffix(f, "/"))) {
				break // the description
			}
			row = append(row, f)
		}
		if len(row) > 0 {
			rows = append(rows, row)
		}
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("%s: the layer table names no package", doc)
	}
	return rows, nil
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// layerErrors checks imports (package to the project packages it
// imports, paths relative to the module) against rows.
func layerErrors(rows [][]string, imports map[string][]string) []string {
	// rowOf is the row of the longest entry that is pkg or, ending in a
	// slash, a directory above it.
	rowOf := func(pkg string) (row int, entry string) {
		row = -1
		for i, r := range rows {
			for _, e := range r {
				dir := strings.TrimSuffix(e, "/")
				match := pkg == dir || strings.HasSuffix(e, "/") && strings.HasPrefix(pkg, e)
				if match && len(e) > len(entry) {
					row, entry = i, e
				}
			}
		}
		return row, entry
	}
	var errs []string
	used := map[string]bool{}
	pkgs := make([]string, 0, len(imports))
	for p := range imports {
		pkgs = append(pkgs, p)
	}
	slices.Sort(pkgs)
	for _, p := range pkgs {
		row, entry := rowOf(p)
		if row < 0 {
			errs = append(errs, fmt.Sprintf("package %s is in no row", p))
			continue
		}
		used[entry] = true
		for _, q := range imports[p] {
			if qr, _ := rowOf(q); qr >= 0 && qr < row {
				errs = append(errs, fmt.Sprintf("%s imports %s, on a higher row (%d above %d)", p, q, qr+1, row+1))
			}
		}
	}
	for _, r := range rows {
		for _, e := range r {
			if !used[e] {
				errs = append(errs, fmt.Sprintf("entry %s names no package", e))
			}
		}
	}
	return errs
}

// moduleImports maps every package of the module (path relative to the
// module, from its non-test files, whatever their build tags) to the
// project packages it imports.
func moduleImports(t *testing.T, root string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, filepath.Dir(path))
		if err != nil {
			return err
		}
		pkg := filepath.ToSlash(rel)
		if _, ok := out[pkg]; !ok {
			out[pkg] = nil
		}
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if rest, ok := strings.CutPrefix(p, module); ok && !slices.Contains(out[pkg], rest) {
				out[pkg] = append(out[pkg], rest)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) < 10 {
		t.Fatalf("found %d packages under %s: the walk is wrong", len(out), root)
	}
	return out
}
