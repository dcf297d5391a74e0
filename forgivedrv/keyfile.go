package forgivedrv

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"

	"github.com/forgive-emu/forgive/tss"
)

// This file reads the security section's key files (docs/security.md):
// each must be one only the daemon can read, write or replace.

// Keyring reads the key files of the security section and derives the
// domains' keys; it is nil (and no error) when the section names no
// domain. An error names the field.
func (c *Config) Keyring() (*tss.Keyring, error) {
	if len(c.Security.Domains) == 0 {
		return nil, nil
	}
	ds := make([]tss.Domain, 0, len(c.Security.Domains))
	for i, d := range c.Security.Domains {
		field := fmt.Sprintf("security.domains[%d].key_file", i)
		if d.KeyFile == "" {
			return nil, fieldErr(field, `""`, "the path of a key file (forgivectl keygen writes one)")
		}
		key, err := readKeyFile(d.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrConfig, field, err)
		}
		ds = append(ds, tss.Domain{ID: d.ID, Key: key, Hosts: d.Hosts})
	}
	ring, err := tss.NewKeyring(ds...)
	if err != nil {
		return nil, fmt.Errorf("%w: security.domains: %w", ErrConfig, err)
	}
	if _, ok := ring.DomainOf(c.Host); !ok {
		return nil, fieldErr("security.domains", fmt.Sprintf("no domain for host %d", c.Host),
			"this host listed in a domain's hosts, or a default domain (one without hosts)")
	}
	return ring, nil
}

// readKeyFile reads a key file that only the daemon may read, write or
// replace: a regular file named directly (not through a symbolic link),
// owned by the daemon's uid, mode 0600 or stricter, in a directory that
// only root or the daemon's uid owns and no group or other user can
// write, under ancestors no other user can write (a sticky directory
// such as /tmp excepted: others cannot rename what they do not own in
// it). Each refusal names its reason.
func readKeyFile(path string) (tss.Key, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		return tss.Key{}, fmt.Errorf("%s: a symbolic link: name the key file itself, whose owner and directory are checked", path)
	}
	// O_NOFOLLOW: a link put in its place since the Lstat is refused too.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		return tss.Key{}, fmt.Errorf("%s: a symbolic link: name the key file itself, whose owner and directory are checked", path)
	}
	if err != nil {
		return tss.Key{}, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return tss.Key{}, err
	}
	if !st.Mode().IsRegular() {
		return tss.Key{}, fmt.Errorf("%s: not a regular file", path)
	}
	euid := uint32(os.Geteuid())
	if uid, ok := ownerOf(st); !ok || uid != euid {
		return tss.Key{}, fmt.Errorf("%s: owned by uid %d, not the daemon's uid %d: another user controls the key (chown %d %s)", path, uid, euid, euid, path)
	}
	if m := st.Mode().Perm(); m&0o077 != 0 {
		return tss.Key{}, fmt.Errorf("%s: mode %04o lets group or others at the key: want 0600 (chmod 600 %s)", path, m, path)
	}
	if err := checkKeyDirs(path, euid); err != nil {
		return tss.Key{}, err
	}
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return tss.Key{}, fmt.Errorf("%s: %w", path, err)
	}
	k, err := tss.ParseKeyFile(b)
	if err != nil {
		return tss.Key{}, fmt.Errorf("%s: %w", path, err)
	}
	return k, nil
}

// checkKeyDirs refuses a key whose directory another user could write or
// owns, or under an ancestor another user could write (unless sticky):
// such a user could replace the key, or the directory holding it.
func checkKeyDirs(path string, euid uint32) error {
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	dir := filepath.Dir(abs)
	for d := dir; ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("%s: directory %s: %w", path, d, err)
		}
		m := fi.Mode()
		sticky := m&fs.ModeSticky != 0 && d != dir
		if m.Perm()&0o022 != 0 && !sticky {
			return fmt.Errorf("%s: directory %s is mode %04o, writable by group or others, who could replace the key (chmod go-w %s)", path, d, m.Perm(), d)
		}
		if uid, ok := ownerOf(fi); !ok || (uid != 0 && uid != euid && !sticky) {
			return fmt.Errorf("%s: directory %s is owned by uid %d, not root or the daemon's uid %d", path, d, uid, euid)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// ownerOf returns the uid that owns a file.
func ownerOf(fi fs.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}
