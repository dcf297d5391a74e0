package forgivedrv

import (
	"crypto/rand"
	"errors"
	"fmt"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/tss"
	"github.com/forgive-emu/forgive/udpio"
)

// This file is start-up's preparation: from a decoded file to the engines,
// the server's configuration and the keyring a daemon starts on. Validate
// runs it and keeps only its verdict.

// Prepared is a configuration checked once and what start-up derives from
// it: the NIC engine (its configuration validated by nic.New, once), the
// host-API server's configuration and the security domains' keyring (each
// key file read once). NewPrepared starts a daemon on it, once.
type Prepared struct {
	cfg    *Config
	eng    *nic.Engine
	more   []*nic.Engine // the other engines of the group (engines > 1)
	ncfg   nic.Config
	server hostapi.ServerConfig
	ring   *tss.Keyring
	// sockBuf is the socket's SO_RCVBUF and SO_SNDBUF request.
	sockBuf int
}

// Prepare runs every check of c (Validate's) and builds what start-up
// needs from it. The flow tags are seeded from the kernel's CSPRNG: an
// off-path sender must not be able to guess them (the simulator keeps them
// derived from its seed).
func Prepare(c *Config) (*Prepared, error) {
	var seed [32]byte
	if _, err := rand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("forgivedrv: flow tag seed: %w", err)
	}
	return c.prepare(seed)
}

// prepare is Prepare with the flow tag seed given: zero derives it from
// the config's seed, as the simulator does. It reports every problem it
// finds, not the first.
func (c *Config) prepare(tagSeed [32]byte) (*Prepared, error) {
	p := &Prepared{cfg: c}
	errs := c.checkDaemon()
	if n, err := c.NIC(); err != nil {
		errs = append(errs, err)
	} else {
		p.sockBuf = int(c.SocketBuffer)
		if p.sockBuf == 0 {
			p.sockBuf = DefaultSocketBuffer(n.Sender.Window)
		}
		n.TagSeed = tagSeed
		if engs, err := nic.NewGroup(n, c.engines()); err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrConfig, err))
		} else {
			p.eng, p.more = engs[0], engs[1:]
		}
		p.ncfg = n
	}
	var err error
	if p.server, err = c.ServerConfig(); err != nil {
		errs = append(errs, err)
	}
	if p.ring, err = c.Keyring(); err != nil {
		errs = append(errs, err)
	} else if p.ring != nil {
		// A sealing daemon reads its start file at start-up: --check
		// refuses one it would refuse (startfile.go), and writes nothing.
		if _, err := readStart(c.StartFile()); err != nil {
			errs = append(errs, fmt.Errorf("%w: security.start_file: %w", ErrConfig, err))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return p, nil
}

// engines is the number of engines: Engines, or 1 when absent (or out of
// range, which checkDaemon refuses by name).
func (c *Config) engines() int {
	if c.Engines < 1 || c.Engines > MaxEngines {
		return 1
	}
	return c.Engines
}

// DefaultSocketBuffer is the socket buffer of a daemon whose file sets
// none, for a reliability window of window bytes: twice the window, and at
// least udpio's default of 4 MiB. A receiver's socket must hold a peer's
// whole window while its loop is descheduled: on loopback the kernel
// charges about 8.4 KB per 4 KiB datagram that arrives alone (docs/profiles.md),
// so a 4 MiB buffer holds about 990 of them, less than the 1024 packets of
// a 4 MiB window, and the window's tail is dropped before the daemon reads
// it (BenchmarkOneFlow's sockdrops/op, docs/trimswitch.md).
func DefaultSocketBuffer(window int) int {
	return max(udpio.DefaultSocketBuffer, 2*window)
}
