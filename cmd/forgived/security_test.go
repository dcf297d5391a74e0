package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/internal/cli"
	"github.com/forgive-emu/forgive/tss"
)

// --check reads the security section's key files as start-up does: a key
// of mode 0600 passes, one that others may read exits 2 naming the field.
func TestCheckSecuritySection(t *testing.T) {
	dir := t.TempDir()
	key := filepath.Join(dir, "domain1.key")
	if err := os.WriteFile(key, tss.FormatKeyFile(tss.Key{7}), 0o600); err != nil {
		t.Fatal(err)
	}
	doc := good + "security: {domains: [{id: 1, key_file: " + key + "}]}\n"
	if code, stdout, stderr := check(t, doc); code != cli.ExitOK || !strings.Contains(stdout, ": ok") {
		t.Fatalf("a 0600 key: exit %d\nstdout: %s\nstderr: %s", code, stdout, stderr)
	}
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := check(t, doc)
	if want := "security.domains[0].key_file: " + key + ": mode 0644 lets group or others at the key"; code != cli.ExitUsage || !strings.Contains(stderr, want) {
		t.Fatalf("a 0644 key: exit %d, want %d; stderr %q does not contain %q", code, cli.ExitUsage, stderr, want)
	}
}
