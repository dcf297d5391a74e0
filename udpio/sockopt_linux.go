package udpio

import (
	"errors"
	"fmt"
	"syscall"

	"golang.org/x/sys/unix"
)

// configure sets every socket option before bind, from ListenConfig.Control,
// and reports in gro whether the kernel took UDP_GRO (Options.Offload).
func configure(opts Options, fd int, gro *bool) error {
	if opts.Offload {
		*gro = enableGRO(fd, opts.testGROOpt)
	}
	if err := setBool(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, opts.ReuseAddr, "SO_REUSEADDR"); err != nil {
		return err
	}
	if opts.ReusePort {
		if err := setBool(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, true, "SO_REUSEPORT"); err != nil {
			return err
		}
	}
	// Ask the kernel to attach the received TOS byte to every datagram.
	if err := setBool(fd, unix.IPPROTO_IP, unix.IP_RECVTOS, true, "IP_RECVTOS"); err != nil {
		return err
	}
	if err := setBuffer(fd, unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, opts.recvBuffer(), "SO_RCVBUF"); err != nil {
		return err
	}
	return setBuffer(fd, unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, opts.sendBuffer(), "SO_SNDBUF")
}

func setBool(fd, level, opt int, on bool, name string) error {
	v := 0
	if on {
		v = 1
	}
	if err := unix.SetsockoptInt(fd, level, opt, v); err != nil {
		return errorf(ErrSocketOption, "%s=%d: %v", name, v, err)
	}
	return nil
}

// setBuffer sizes a socket buffer. The FORCE variant ignores the
// net.core.[rw]mem_max ceiling but needs CAP_NET_ADMIN (root, as in CI and
// in the namespace lab); without it the plain option applies, silently
// clamped by the kernel, and Conn.SocketBuffers tells what was granted.
func setBuffer(fd, forceOpt, opt, bytes int, name string) error {
	err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, forceOpt, bytes)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EPERM) {
		return errorf(ErrSocketOption, "%sFORCE=%d: %v", name, bytes, err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, opt, bytes); err != nil {
		return errorf(ErrSocketOption, "%s=%d: %v", name, bytes, err)
	}
	return nil
}

// control adapts configure to net.ListenConfig.Control.
func control(opts Options, gro *bool) func(network, address string, rc syscall.RawConn) error {
	return func(_, _ string, rc syscall.RawConn) error {
		var serr error
		if err := rc.Control(func(fd uintptr) { serr = configure(opts, int(fd), gro) }); err != nil {
			return err
		}
		return serr
	}
}

// getBuffers reads back the buffer sizes the kernel granted. Linux reports
// twice the requested value: it reserves half for its own bookkeeping.
func getBuffers(rc syscall.RawConn) (recv, send int, err error) {
	var rerr, serr error
	cerr := rc.Control(func(fd uintptr) {
		recv, rerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
		send, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF)
	})
	return recv, send, errors.Join(cerr, rerr, serr)
}

// SetSocketBuffers sizes the receive and send buffers of an open Conn as
// Options.RecvBuffer and SendBuffer do at Listen (zero: DefaultSocketBuffer),
// for a caller that learns the sizes after it opened the socket.
func (c *Conn) SetSocketBuffers(recv, send int) error {
	var serr error
	err := c.raw.Control(func(fd uintptr) {
		serr = setBuffer(int(fd), unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, orDefault(recv, DefaultSocketBuffer), "SO_RCVBUF")
		if serr == nil {
			serr = setBuffer(int(fd), unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, orDefault(send, DefaultSocketBuffer), "SO_SNDBUF")
		}
	})
	if err != nil {
		return fmt.Errorf("udpio: socket buffers: %w", err)
	}
	return serr
}
