package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStartCPUProfileFromTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(CPUProfileDirEnv, dir)
	path, stop, err := StartCPUProfile("", "/run/lab/leaf1.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if want := filepath.Join(dir, "leaf1-"); !strings.HasPrefix(path, want) || !strings.HasSuffix(path, ".pprof") {
		t.Fatalf("profile path %q, want %sPID.pprof", path, want)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("profile %s: %v, size %v: want a written profile", path, err, st)
	}
}

func TestStartCPUProfileOff(t *testing.T) {
	t.Setenv(CPUProfileDirEnv, "")
	path, stop, err := StartCPUProfile("", "leaf1.yaml")
	if err != nil || path != "" {
		t.Fatalf("no flag, no environment: path %q, err %v; want neither", path, err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestStartCPUProfileBadFile(t *testing.T) {
	_, stop, err := StartCPUProfile(filepath.Join(t.TempDir(), "missing", "p.pprof"), "x.yaml")
	if err == nil || !strings.Contains(err.Error(), "cpu profile") {
		t.Fatalf("err %v, want a cpu profile error", err)
	}
	_ = stop()
}
