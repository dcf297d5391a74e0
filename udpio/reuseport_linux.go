package udpio

import (
	"fmt"

	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// AttachReuseportCBPF gives the SO_REUSEPORT group c belongs to
// (Options.ReusePort) a classic BPF program that chooses, for each
// datagram the group receives, the socket that gets it: the program runs
// on the UDP payload and returns the socket's index in the group, the
// order in which the sockets were bound (SO_ATTACH_REUSEPORT_CBPF). An
// index past the group leaves the choice to the kernel's hash; a load
// past the end of a short datagram ends the program with 0. The program
// is assembled with golang.org/x/net/bpf; the kernel checks it and
// refuses an invalid one.
func (c *Conn) AttachReuseportCBPF(prog []bpf.Instruction) error {
	raw, err := bpf.Assemble(prog)
	if err != nil {
		return fmt.Errorf("udpio: reuseport program: %w", err)
	}
	if len(raw) == 0 || len(raw) > maxCBPF {
		return fmt.Errorf("udpio: reuseport program of %d instructions: want 1..%d", len(raw), maxCBPF)
	}
	filter := make([]unix.SockFilter, len(raw))
	for i, r := range raw {
		filter[i] = unix.SockFilter{Code: r.Op, Jt: r.Jt, Jf: r.Jf, K: r.K}
	}
	fprog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	var serr error
	if err := c.raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptSockFprog(int(fd), unix.SOL_SOCKET, unix.SO_ATTACH_REUSEPORT_CBPF, &fprog)
	}); err != nil {
		return fmt.Errorf("udpio: reuseport program: %w", err)
	}
	if serr != nil {
		return errorf(ErrSocketOption, "SO_ATTACH_REUSEPORT_CBPF: %v", serr)
	}
	return nil
}

// maxCBPF is the kernel's BPF_MAXINSNS.
const maxCBPF = 4096
