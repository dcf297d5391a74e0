package forgivedrv

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/forgive-emu/forgive/tss"
)

// kubeletSecret lays out a Secret volume as kubelet's atomic writer does
// (a tmpfs directory of mode 1777 holding NAME -> ..data/NAME, ..data ->
// ..TIMESTAMP and the directory ..TIMESTAMP with the file, mode 0400), and
// returns the volume's directory and the path a pod names: dir/NAME.
func kubeletSecret(t *testing.T, name string) (dir, path string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "keys")
	ts := "..2026_12_07_04_30_00.123456789"
	if err := os.MkdirAll(filepath.Join(dir, ts), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, ts, name), tss.FormatKeyFile(testKey), 0o400); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(ts, filepath.Join(dir, kubeletData)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(kubeletData+"/"+name, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	return dir, filepath.Join(dir, name)
}

func loadKey(path string) error {
	_, err := ParseConfig([]byte(minimal + "security: {domains: [{id: 7, key_file: " + path + "}]}\n"))
	return err
}

// A Secret's key reaches a pod only through kubelet's links, which
// forgived once refused as it refuses any link. It accepts exactly that
// layout, checking each link and directory on the way, and still refuses
// every near miss: a link to anything else, a ..data of another owner or
// pointing outside the volume, a link straight at the timestamped
// directory's file from a sticky directory.
func TestKeyFromKubeletSecretAccepted(t *testing.T) {
	_, path := kubeletSecret(t, "domain.key")
	if err := loadKey(path); err != nil {
		t.Fatalf("kubelet's atomic-writer layout: %v", err)
	}
	refused := func(name, path, want string) {
		t.Helper()
		err := loadKey(path)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want ErrConfig naming %q", name, err, want)
		}
	}
	// NAME -> ..data/OTHER: not kubelet's link for NAME.
	dir, _ := kubeletSecret(t, "domain.key")
	if err := os.Symlink(kubeletData+"/domain.key", filepath.Join(dir, "renamed.key")); err != nil {
		t.Fatal(err)
	}
	refused("a link named differently from its target", filepath.Join(dir, "renamed.key"), "a symbolic link")
	// NAME -> ..TIMESTAMP/NAME directly: the layout is NAME -> ..data/NAME.
	dir, _ = kubeletSecret(t, "domain.key")
	direct := filepath.Join(dir, "direct.key")
	if err := os.Symlink("..2026_12_07_04_30_00.123456789/domain.key", direct); err != nil {
		t.Fatal(err)
	}
	refused("a link past ..data", direct, "a symbolic link")
	// ..data pointing at an absolute directory elsewhere.
	dir, path = kubeletSecret(t, "domain.key")
	if err := os.Remove(filepath.Join(dir, kubeletData)); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(dir, "..2026_12_07_04_30_00.123456789"), filepath.Join(dir, kubeletData)); err != nil {
		t.Fatal(err)
	}
	refused("..data to an absolute path", path, "a symbolic link")
	// The file of a Secret the daemon does not own, or readable by others.
	dir, path = kubeletSecret(t, "domain.key")
	if err := os.Chmod(filepath.Join(dir, "..2026_12_07_04_30_00.123456789", "domain.key"), 0o444); err != nil {
		t.Fatal(err)
	}
	refused("defaultMode 0444", path, "lets group or others at the key")
	// The timestamped directory writable by others.
	dir, path = kubeletSecret(t, "domain.key")
	if err := os.Chmod(filepath.Join(dir, "..2026_12_07_04_30_00.123456789"), 0o777|os.ModeSticky); err != nil {
		t.Fatal(err)
	}
	refused("a sticky world-writable ..TIMESTAMP", path, "writable by group or others")
	if os.Geteuid() != 0 {
		t.Log("not root: the cases of links of another uid need lchown; CI runs as root")
		return
	}
	dir, path = kubeletSecret(t, "domain.key")
	if err := os.Lchown(filepath.Join(dir, kubeletData), 65534, 65534); err != nil {
		t.Fatal(err)
	}
	refused("..data owned by uid 65534", path, "a symbolic link")
	_, path = kubeletSecret(t, "domain.key")
	if err := os.Lchown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	refused("the key's link owned by uid 65534", path, "owned by uid 65534")
	dir, path = kubeletSecret(t, "domain.key")
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	refused("the volume owned by uid 65534", path, "is owned by uid 65534")
}

// "A directory symlink owned by another uid in the key's path is
// accepted." Every component of the path is checked as sshd's StrictModes
// checks a user's keys: a link on the way owned by another uid is
// refused, though its target is the daemon's own good directory; the
// same link owned by root passes; a directory reached through a link is
// checked as any other.
func TestKeyPathComponentsChecked(t *testing.T) {
	good := writeKey(t, tss.FormatKeyFile(testKey), 0o600)
	base := t.TempDir()
	link := filepath.Join(base, "via")
	if err := os.Symlink(filepath.Dir(good), link); err != nil {
		t.Fatal(err)
	}
	through := filepath.Join(link, filepath.Base(good))
	if err := loadKey(through); err != nil {
		t.Fatalf("through a link of the daemon's own: %v", err)
	}
	// A link on the way to a world-writable directory.
	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(open, "k"), tss.FormatKeyFile(testKey), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	toOpen := filepath.Join(base, "toopen")
	if err := os.Symlink(open, toOpen); err != nil {
		t.Fatal(err)
	}
	if err := loadKey(filepath.Join(toOpen, "k")); err == nil || !strings.Contains(err.Error(), "writable by group or others") {
		t.Errorf("a world-writable directory reached through a link: %v", err)
	}
	if os.Geteuid() != 0 {
		t.Log("not root: a link of another uid needs lchown; CI runs as root")
		return
	}
	if err := os.Lchown(link, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	err := loadKey(through)
	if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "symbolic link "+link+" is owned by uid 65534") {
		t.Errorf("a directory link owned by uid 65534 on the key's path: %v", err)
	}
}

// "A forgived without security: starts plain and says nothing." It warns,
// naming what plain leaves open; a sealed one does not.
func TestPlainStartWarns(t *testing.T) {
	_, _, logs := runDaemon(t, t.TempDir(), "")
	waitFor(t, func() bool { return logs.FilterMessage("ready").Len() == 1 })
	warned := logs.FilterMessage(PlainWarning).All()
	if len(warned) != 1 || warned[0].Level != zap.WarnLevel || !strings.Contains(warned[0].ContextMap()["open"].(string), "forge") {
		t.Errorf("plain start: %d warnings %q, want one naming what is open", len(warned), PlainWarning)
	}
	key := writeKey(t, tss.FormatKeyFile(testKey), 0o600)
	_, _, logs = runDaemon(t, t.TempDir(), "security: {domains: [{id: 7, key_file: "+key+"}]}\n")
	waitFor(t, func() bool { return logs.FilterMessage("ready").Len() == 1 })
	if n := logs.FilterMessage(PlainWarning).Len(); n != 0 {
		t.Errorf("sealed start warned %d times that it is plain", n)
	}
}
