package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/internal/cli"
	"github.com/forgive-emu/forgive/tss"
)

func runCtl(args ...string) (int, string, string) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// keygen writes a key file of mode 0600 that forgived reads, a new key
// each time; it refuses to overwrite without --force, and --dry-run
// writes nothing.
func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "domain.key")
	if code, out, errs := runCtl("keygen", "--dry-run", path); code != cli.ExitOK || !strings.Contains(out, "would write") {
		t.Fatalf("dry run: exit %d, %q %q", code, out, errs)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the dry run wrote %s: %v", path, err)
	}
	if code, out, errs := runCtl("keygen", path); code != cli.ExitOK {
		t.Fatalf("exit %d, %q %q", code, out, errs)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("mode %04o, want 0600", st.Mode().Perm())
	}
	b, _ := os.ReadFile(path)
	k1, err := tss.ParseKeyFile(b)
	if err != nil {
		t.Fatalf("the written file does not parse: %v\n%s", err, b)
	}
	if code, _, errs := runCtl("keygen", path); code != cli.ExitUsage || !strings.Contains(errs, "exists") {
		t.Errorf("overwrite without --force: exit %d, %q", code, errs)
	}
	if code, _, errs := runCtl("keygen", "--force", path); code != cli.ExitOK {
		t.Fatalf("--force: exit %d, %q", code, errs)
	}
	b, _ = os.ReadFile(path)
	k2, err := tss.ParseKeyFile(b)
	if err != nil || k2 == k1 {
		t.Errorf("--force: key %x (was %x), %v; want a new key", k2, k1, err)
	}
	if code, _, _ := runCtl("keygen", filepath.Join(dir, "no", "such", "key")); code != cli.ExitUsage {
		t.Errorf("missing directory: exit %d, want %d", code, cli.ExitUsage)
	}
	left, _ := filepath.Glob(filepath.Join(dir, ".keygen-*"))
	if len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}
}
