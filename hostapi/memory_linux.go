package hostapi

import (
	"fmt"
	"math"

	"golang.org/x/sys/unix"
)

// memfdName names the memfds the client creates; it shows in
// /proc/<pid>/maps as "/memfd:hostapi-region (deleted)".
const memfdName = "hostapi-region"

// mapRegion is the emulated memory registration: it checks that fd is a
// memfd the daemon can safely map for length bytes, and maps it shared.
//
// The seal check is what keeps a client from crashing the daemon: a client
// that truncated its file after registering would make the daemon's next
// access to the mapping fault (SIGBUS), which Go cannot recover from. A
// memfd sealed with F_SEAL_SHRINK can never become shorter.
func mapRegion(fd int, length uint64) ([]byte, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, errorf(CodeBadFD, "fstat: %v", err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, errorf(CodeBadFD, "descriptor is not a memfd (file type 0%o)", st.Mode&unix.S_IFMT)
	}
	seals, err := unix.FcntlInt(uintptr(fd), unix.F_GET_SEALS, 0)
	if err != nil {
		return nil, errorf(CodeBadFD, "descriptor takes no seals (%v): pass a memfd created with MFD_ALLOW_SEALING", err)
	}
	if seals&unix.F_SEAL_SHRINK == 0 {
		return nil, errorf(CodeBadFD, "memfd is not sealed with F_SEAL_SHRINK; a later truncation would fault the daemon")
	}
	if seals&(unix.F_SEAL_WRITE|unix.F_SEAL_FUTURE_WRITE) != 0 {
		return nil, errorf(CodeBadFD, "memfd is sealed against writes; the daemon writes receives into it")
	}
	if st.Size < 0 || uint64(st.Size) < length {
		return nil, errorf(CodeOutOfBounds, "memfd holds %d bytes, region of %d bytes does not fit", st.Size, length)
	}
	if length > math.MaxInt {
		return nil, errorf(CodeOutOfBounds, "region of %d bytes cannot be mapped", length)
	}
	mem, err := unix.Mmap(fd, 0, int(length), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, errorf(CodeBadFD, "mmap %d bytes: %v", length, err)
	}
	return mem, nil
}

// newMemfd creates a sealed memfd of size bytes and maps it in this
// process. The caller passes fd to the daemon and then closes it.
func newMemfd(size int) (fd int, mem []byte, err error) {
	fd, err = unix.MemfdCreate(memfdName, unix.MFD_CLOEXEC|unix.MFD_ALLOW_SEALING)
	if err != nil {
		return -1, nil, fmt.Errorf("hostapi: memfd_create: %w", err)
	}
	fail := func(what string, err error) (int, []byte, error) {
		if mem != nil {
			_ = unix.Munmap(mem)
		}
		_ = unix.Close(fd)
		return -1, nil, fmt.Errorf("hostapi: %s: %w", what, err)
	}
	if err := unix.Ftruncate(fd, int64(size)); err != nil {
		return fail("ftruncate", err)
	}
	if mem, err = unix.Mmap(fd, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err != nil {
		return fail("mmap", err)
	}
	// Fix the size for good, so the daemon can trust its mapping.
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_ADD_SEALS, unix.F_SEAL_SHRINK|unix.F_SEAL_GROW|unix.F_SEAL_SEAL); err != nil {
		return fail("seal memfd", err)
	}
	return fd, mem, nil
}

// unmap releases a mapping; the error can only be a programming error
// (a slice that is not a whole mapping), so it is returned for logging.
func unmap(mem []byte) error {
	if len(mem) == 0 {
		return nil
	}
	return unix.Munmap(mem)
}

// parseRights extracts the descriptors of SCM_RIGHTS control messages.
// Every descriptor returned is open and owned by the caller.
func parseRights(oob []byte) []int {
	msgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil
	}
	var fds []int
	for i := range msgs {
		if rights, err := unix.ParseUnixRights(&msgs[i]); err == nil {
			fds = append(fds, rights...)
		}
	}
	return fds
}

func closeFDs(fds []int) {
	for _, fd := range fds {
		_ = unix.Close(fd)
	}
}
