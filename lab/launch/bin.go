package launch

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Module is the import path of this project's module.
const Module = "github.com/forgive-emu/forgive"

// ErrNoBinary means a binary could be neither found nor built.
var ErrNoBinary = errors.New("launch: binary not found")

// Binaries returns the paths of the project's commands (for example
// "forgived" and "trimswitch"). It looks, in order: in dir when given; in
// the source tree the working directory is in, building with `go build`
// into the user cache (incremental, so a second run costs nothing); beside
// the running executable; on PATH.
func Binaries(ctx context.Context, dir string, names ...string) (map[string]string, error) {
	if dir != "" {
		return lookIn(dir, names)
	}
	if root, ok := sourceRoot(); ok {
		return build(ctx, root, names)
	}
	if exe, err := os.Executable(); err == nil {
		if m, err := lookIn(filepath.Dir(exe), names); err == nil {
			return m, nil
		}
	}
	out := map[string]string{}
	for _, n := range names {
		p, err := exec.LookPath(n)
		if err != nil {
			return nil, fmt.Errorf("%w: %s (not beside forgivectl, not on PATH, and not in a source tree)", ErrNoBinary, n)
		}
		out[n] = p
	}
	return out, nil
}

func lookIn(dir string, names []string) (map[string]string, error) {
	out := map[string]string{}
	for _, n := range names {
		p := filepath.Join(dir, n)
		if st, err := os.Stat(p); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			return nil, fmt.Errorf("%w: %s in %s", ErrNoBinary, n, dir)
		}
		out[n] = p
	}
	return out, nil
}

// sourceRoot finds the module root above the working directory.
func sourceRoot() (string, bool) {
	dir, err := os.Getwd()
	if err != nil {
		return "", false
	}
	for {
		if f, err := os.Open(filepath.Join(dir, "go.mod")); err == nil {
			sc := bufio.NewScanner(f)
			ok := sc.Scan() && strings.TrimSpace(sc.Text()) == "module "+Module
			f.Close()
			return dir, ok
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", false
		}
		dir = parent
	}
}

func build(ctx context.Context, root string, names []string) (map[string]string, error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	// One directory per source tree: two checkouts building at once (a
	// lab in one, tests in another) must not replace each other's binaries.
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(cache, "forgive-emu", "bin", hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	args := []string{"build", "-o", dir + string(filepath.Separator)}
	for _, n := range names {
		args = append(args, "./cmd/"+n)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%w: go build in %s: %v\n%s", ErrNoBinary, root, err, out)
	}
	return lookIn(dir, names)
}
