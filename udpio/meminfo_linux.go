package udpio

import (
	"fmt"
	"os"
	"unsafe"

	"golang.org/x/sys/unix"
)

// skMeminfoVars is the length of the kernel's SO_MEMINFO answer that
// Linux 4.6 and later fill (SK_MEMINFO_VARS); skMeminfoDrops is the index
// of sk_drops in it (SK_MEMINFO_DROPS).
const (
	skMeminfoVars  = 9
	skMeminfoDrops = 8
)

// SocketDrops returns how many datagrams the kernel dropped at this
// socket since it was opened because they did not fit its receive buffer
// (or for want of memory): sk_drops, read with getsockopt(SO_MEMINFO), the
// same count /proc/net/udp prints in its drops column. These are losses
// no engine sees, the cause of retransmissions a fabric without loss
// should not have; the daemons export them (forgived's socket_drops,
// trimswitch_socket_drops_total). The kernel's counter is 32 bits wide.
func (c *Conn) SocketDrops() (uint64, error) {
	var info [skMeminfoVars]uint32
	var errno unix.Errno
	cerr := c.raw.Control(func(fd uintptr) {
		size := uint32(unsafe.Sizeof(info))
		_, _, errno = unix.Syscall6(unix.SYS_GETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_MEMINFO,
			uintptr(unsafe.Pointer(&info[0])), uintptr(unsafe.Pointer(&size)), 0)
		if errno == 0 && size < uint32(unsafe.Sizeof(info)) {
			errno = unix.ENOPROTOOPT // a kernel older than 4.6 has no drops in it
		}
	})
	if cerr != nil {
		return 0, fmt.Errorf("udpio: socket drops: %w", cerr)
	}
	if errno != 0 {
		return 0, fmt.Errorf("udpio: socket drops: %w", os.NewSyscallError("getsockopt SO_MEMINFO", errno))
	}
	return uint64(info[skMeminfoDrops]), nil
}
