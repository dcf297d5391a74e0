package forgivedrv

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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
// replace: a regular file owned by the daemon's uid, mode 0600 or
// stricter, reached through a path every component of which only root or
// the daemon's uid controls (checkKeyPath), as sshd's StrictModes checks
// a user's keys. Each refusal names its reason.
func readKeyFile(path string) (tss.Key, error) {
	euid := uint32(os.Geteuid())
	real, err := checkKeyPath(path, euid)
	if err != nil {
		return tss.Key{}, err
	}
	// O_NOFOLLOW: a link put in the file's place since the check is
	// refused too (only root or the daemon's uid could put one there).
	f, err := os.OpenFile(real, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
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
	if uid, ok := ownerOf(st); !ok || uid != euid {
		return tss.Key{}, fmt.Errorf("%s: owned by uid %d, not the daemon's uid %d: another user controls the key (chown %d %s)", path, uid, euid, euid, path)
	}
	if m := st.Mode().Perm(); m&0o077 != 0 {
		return tss.Key{}, fmt.Errorf("%s: mode %04o lets group or others at the key: want 0600 or 0400 (chmod 600 %s)", path, m, path)
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

// maxKeyLinks bounds the symbolic links followed to the key, as the
// kernel's own limit (40) does.
const maxKeyLinks = 40

// kubeletData is the link kubelet's atomic writer keeps in a Secret
// volume: the volume holds NAME -> ..data/NAME and ..data -> ..TIMESTAMP,
// the directory of the current files, so that kubelet replaces every
// file at once by retargeting ..data.
const kubeletData = "..data"

// checkKeyPath walks path component by component from the root, without
// following any link unchecked, and returns the key file's real path.
// Every directory on the way must be owned by root or the daemon's uid
// and not writable by group or others; an ancestor that is sticky (such
// as /tmp) may be, since others cannot rename what they do not own in it,
// but the directory that holds the key may not. Every symbolic link on
// the way must be owned by root or the daemon's uid (its own mode means
// nothing on Linux), and its target is walked the same way. The key file
// itself must not be a link, with one exception, kubelet's atomic-writer
// layout of a Secret volume (a Secret's files reach a pod no other way):
// NAME -> ..data/NAME, where ..data is a link in the same directory to a
// sibling directory ..SOMETHING; the links, that directory and the
// volume's directory are checked as above, except that the volume's
// directory may be sticky (kubelet makes it 1777 on tmpfs: others may
// add names to it, never replace the links root owns).
func checkKeyPath(path string, euid uint32) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	rest := strings.Split(strings.TrimPrefix(abs, "/"), "/")
	cur := "/"
	if _, err := checkKeyDir(path, cur, euid); err != nil {
		return "", err
	}
	curSticky := false // cur was admitted only as a sticky directory
	links := 0
	stickyLinkDir := "" // the atomic-writer volume directory, which may be sticky
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		switch name {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			st, err := checkKeyDir(path, cur, euid)
			if err != nil {
				return "", err
			}
			curSticky = st
			continue
		}
		p := filepath.Join(cur, name)
		fi, err := os.Lstat(p)
		if err != nil {
			return "", fmt.Errorf("%s: %w", path, err)
		}
		last := len(rest) == 0
		if fi.Mode()&fs.ModeSymlink != 0 {
			if uid, ok := ownerOf(fi); !ok || (uid != 0 && uid != euid) {
				return "", fmt.Errorf("%s: symbolic link %s is owned by uid %d, not root or the daemon's uid %d, who could point it at another key", path, p, uid, euid)
			}
			if links++; links > maxKeyLinks {
				return "", fmt.Errorf("%s: more than %d symbolic links", path, maxKeyLinks)
			}
			target, err := os.Readlink(p)
			if err != nil {
				return "", fmt.Errorf("%s: %w", path, err)
			}
			if last {
				if !atomicWriterLink(cur, name, target, euid) {
					return "", fmt.Errorf("%s: a symbolic link: name the key file itself, whose owner and directory are checked (or mount it from a Secret, whose link kubelet writes)", path)
				}
				stickyLinkDir = cur
			}
			if filepath.IsAbs(target) {
				cur, curSticky = "/", false
			}
			rest = append(strings.Split(target, "/"), rest...)
			continue
		}
		if last {
			if curSticky && cur != stickyLinkDir {
				fi, _ := os.Stat(cur)
				return "", fmt.Errorf("%s: directory %s is mode %04o, writable by group or others, who could replace the key (chmod go-w %s)", path, cur, fi.Mode().Perm(), cur)
			}
			return p, nil
		}
		if !fi.IsDir() {
			return "", fmt.Errorf("%s: %s is not a directory", path, p)
		}
		if curSticky, err = checkKeyDir(path, p, euid); err != nil {
			return "", err
		}
		cur = p
	}
	return "", fmt.Errorf("%s: names a directory, not a key file", path)
}

// checkKeyDir checks one directory on a key's path: owned by root or the
// daemon's uid, and not writable by group or others unless sticky (then
// sticky reports it).
func checkKeyDir(path, d string, euid uint32) (sticky bool, err error) {
	fi, err := os.Lstat(d)
	if err != nil {
		return false, fmt.Errorf("%s: directory %s: %w", path, d, err)
	}
	// The owner can rename anything in its directory, sticky or not.
	if uid, ok := ownerOf(fi); !ok || (uid != 0 && uid != euid) {
		return false, fmt.Errorf("%s: directory %s is owned by uid %d, not root or the daemon's uid %d", path, d, uid, euid)
	}
	m := fi.Mode()
	if m.Perm()&0o022 == 0 {
		return false, nil
	}
	if m&fs.ModeSticky != 0 {
		return true, nil
	}
	return false, fmt.Errorf("%s: directory %s is mode %04o, writable by group or others, who could replace the key (chmod go-w %s)", path, d, m.Perm(), d)
}

// atomicWriterLink reports whether dir/name -> target is kubelet's
// atomic-writer link to a Secret's file: target is ..data/name, and
// dir/..data is a link owned by root or the daemon's uid to a sibling
// directory whose name starts with "..". The components it names are then
// walked and checked as any other.
func atomicWriterLink(dir, name, target string, euid uint32) bool {
	if target != kubeletData+"/"+name {
		return false
	}
	data := filepath.Join(dir, kubeletData)
	fi, err := os.Lstat(data)
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return false
	}
	if uid, ok := ownerOf(fi); !ok || (uid != 0 && uid != euid) {
		return false
	}
	ts, err := os.Readlink(data)
	if err != nil || !strings.HasPrefix(ts, "..") || strings.Contains(ts, "/") || ts == ".." || ts == kubeletData {
		return false
	}
	tfi, err := os.Lstat(filepath.Join(dir, ts))
	return err == nil && tfi.IsDir()
}

// ownerOf returns the uid that owns a file.
func ownerOf(fi fs.FileInfo) (uint32, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return st.Uid, true
}
