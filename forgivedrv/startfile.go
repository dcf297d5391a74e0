package forgivedrv

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// This file names each start of a sealing host (docs/security.md,
// "Incarnations"). A peer takes a sender's packets from its newest start
// only, the start with the largest epoch, so each start's epoch must be
// larger than every earlier one's. The wall clock alone does not promise
// that: a clock stepped back across a restart made every peer refuse the
// new start as a replay until the peers restarted too. The epoch is the
// larger of the wall clock, in nanoseconds since the Unix epoch, and one
// past the last start's, which the daemon keeps in its start file; a
// clock that steps back then costs nothing, and a lost file falls back
// to the clock.

// wallClock reads the wall clock for the start epoch. Tests set it to a
// clock stepped back; nothing else reads it.
var wallClock = time.Now

// StartFile returns the path of the file the daemon keeps its last start
// epoch in: security.start_file, else the host-API socket's path with
// ".start" appended (the socket's directory is the daemon's).
func (c *Config) StartFile() string {
	if c.Security.StartFile != "" {
		return c.Security.StartFile
	}
	return c.Socket + ".start"
}

// nextStart returns the epoch of this start: the larger of now in
// nanoseconds and one past the epoch in path, which it replaces with the
// result before returning (written to a temporary file, synced, renamed
// over the old one). A missing file is a first start. The file must be
// the daemon's: a regular file named directly, owned by its uid, that
// group and others cannot write; each refusal names its reason.
func nextStart(path string, now time.Time) (uint64, error) {
	last, err := readStart(path)
	if err != nil {
		return 0, err
	}
	epoch := uint64(max(now.UnixNano(), 0))
	if last >= epoch {
		if last == ^uint64(0) {
			return 0, fmt.Errorf("%s: start %d: no later start can be named (remove the file)", path, last)
		}
		epoch = last + 1
	}
	if err := writeStart(path, epoch); err != nil {
		return 0, err
	}
	return epoch, nil
}

// readStart reads the epoch in path, 0 if there is no file.
func readStart(path string) (uint64, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return 0, nil
	case errors.Is(err, syscall.ELOOP):
		return 0, fmt.Errorf("%s: a symbolic link: name the start file itself", path)
	case err != nil:
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if !st.Mode().IsRegular() {
		return 0, fmt.Errorf("%s: not a regular file", path)
	}
	euid := uint32(os.Geteuid())
	if uid, ok := ownerOf(st); !ok || uid != euid {
		return 0, fmt.Errorf("%s: owned by uid %d, not the daemon's uid %d: another user could name this host's starts", path, uid, euid)
	}
	if m := st.Mode().Perm(); m&0o022 != 0 {
		return 0, fmt.Errorf("%s: mode %04o lets group or others write it: want 0600", path, m)
	}
	b, err := io.ReadAll(io.LimitReader(f, 64))
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %q is not a start epoch (a decimal number; remove the file to start from the clock)", path, b)
	}
	return v, nil
}

// writeStart replaces path with epoch, atomically and durably.
func writeStart(path string, epoch uint64) error {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing to remove
	if _, err := fmt.Fprintf(tmp, "%d\n", epoch); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
