package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/forgive-emu/forgive/internal/cli"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgive-emu/forgive/hostapi"
)

// A file transfer is two messages on one flow: a header naming the file's
// length and SHA-256, then the file. The receiver posts both receives up
// front, so the file never waits for a receive.
const (
	headerLen   = 48
	headerMagic = "FGVFILE1"
)

type transferFlags struct {
	peer    uint16
	flow    uint32
	class   string
	wait    time.Duration
	maxSize int64
}

func (t *transferFlags) register(cmd *cobra.Command, recv bool) {
	f := cmd.Flags()
	f.Uint16Var(&t.peer, "peer", 0, "host id of the other end (required)")
	f.Uint32Var(&t.flow, "flow", 1, "flow id; both ends must use the same")
	f.StringVar(&t.class, "class", "other", "traffic class: gradient, tensor, pipeline or other")
	f.DurationVar(&t.wait, "wait", 5*time.Minute, "give up after this long")
	if recv {
		f.Int64Var(&t.maxSize, "max-size", 256<<20, "largest file accepted, in bytes")
	}
}

func (t *transferFlags) spec() (hostapi.FlowSpec, error) {
	if t.peer == 0 {
		return hostapi.FlowSpec{}, cli.Usage(errors.New("--peer is required"))
	}
	var class hostapi.Class
	if err := class.UnmarshalText([]byte(t.class)); err != nil {
		return hostapi.FlowSpec{}, cli.Usage(err)
	}
	return hostapi.FlowSpec{Flow: hostapi.FlowID(t.flow), Peer: hostapi.HostID(t.peer), Class: class}, nil
}

func sendCmd(g *global) *cobra.Command {
	var t transferFlags
	cmd := &cobra.Command{
		Use:   "send FILE --peer HOST",
		Short: "Send a file to the daemon of another host through the fabric",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			spec, err := t.spec()
			if err != nil {
				return err
			}
			if dryRun(cmd) {
				if err := readable(args[0]); err != nil {
					return err
				}
				return dryDaemon(cmd, g, fmt.Sprintf("flow %d to host %d to carry %s", t.flow, t.peer, args[0]))
			}
			data, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			c, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), t.wait)
			defer cancel()
			start := time.Now()
			if err := sendFile(ctx, c, spec, data); err != nil {
				return err
			}
			took := time.Since(start)
			fmt.Fprintf(cmd.OutOrStdout(), "sent %d bytes to host %d in %v (%.3f Gb/s)\n",
				len(data), t.peer, took.Round(time.Microsecond), float64(len(data))*8/took.Seconds()/1e9)
			return nil
		},
	}
	t.register(cmd, false)
	return cmd
}

func sendFile(ctx context.Context, c *hostapi.Client, spec hostapi.FlowSpec, data []byte) error {
	r, err := c.RegisterMemory(ctx, headerLen+len(data))
	if err != nil {
		return err
	}
	defer r.Close()
	mem := r.Bytes()
	copy(mem, headerMagic)
	binary.BigEndian.PutUint64(mem[8:], uint64(len(data)))
	sum := sha256.Sum256(data)
	copy(mem[16:headerLen], sum[:])
	copy(mem[headerLen:], data)
	if err := c.CreateFlow(ctx, spec); err != nil {
		return err
	}
	defer c.DestroyFlow(context.WithoutCancel(ctx), spec.Flow)
	for i, m := range [][2]uint64{{0, headerLen}, {headerLen, uint64(len(data))}} {
		if err := c.PostSend(ctx, hostapi.SendReq{Flow: spec.Flow, Region: r.ID(), Offset: m[0], Length: m[1], WRID: uint64(i)}); err != nil {
			return err
		}
	}
	_, err = awaitAll(ctx, c, 2)
	return err
}

// awaitAll polls n completions and fails on the first error.
func awaitAll(ctx context.Context, c *hostapi.Client, n int) ([]hostapi.Completion, error) {
	out := make([]hostapi.Completion, 0, n)
	for len(out) < n {
		comp, err := c.Poll(ctx)
		if err != nil {
			return out, fmt.Errorf("waiting for completions (%d of %d): %w", len(out), n, err)
		}
		if comp.Status != hostapi.StatusOK {
			return out, fmt.Errorf("%s of work request %d failed: %s", comp.Kind, comp.WRID, comp.Err)
		}
		out = append(out, comp)
	}
	return out, nil
}

func recvCmd(g *global) *cobra.Command {
	var t transferFlags
	var out string
	cmd := &cobra.Command{
		Use:   "recv --peer HOST --out FILE",
		Short: "Receive a file sent with forgivectl send and verify its SHA-256",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			spec, err := t.spec()
			if err != nil {
				return err
			}
			if out == "" {
				return cli.Usage(errors.New("--out is required"))
			}
			if t.maxSize < 1 || t.maxSize > 1<<31 {
				return cli.Usage(fmt.Errorf("--max-size %d: want 1..%d", t.maxSize, int64(1)<<31))
			}
			if dryRun(cmd) {
				return dryDaemon(cmd, g, fmt.Sprintf("flow %d from host %d, written to %s", t.flow, t.peer, out))
			}
			c, err := g.dial(cmd.Context())
			if err != nil {
				return err
			}
			defer c.Close()
			ctx, cancel := context.WithTimeout(cmd.Context(), t.wait)
			defer cancel()
			data, forgiven, err := recvFile(ctx, c, spec, t.maxSize)
			if err != nil {
				return err
			}
			if err := os.WriteFile(out, data, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "received %d bytes from host %d, SHA-256 verified, %d bytes forgiven\n",
				len(data), t.peer, forgiven)
			return nil
		},
	}
	t.register(cmd, true)
	cmd.Flags().StringVarP(&out, "out", "o", "", "where to write the file (required)")
	return cmd
}

// ErrChecksum means the received file does not match the sender's SHA-256.
var ErrChecksum = errors.New("SHA-256 mismatch")

func recvFile(ctx context.Context, c *hostapi.Client, spec hostapi.FlowSpec, maxSize int64) ([]byte, uint64, error) {
	r, err := c.RegisterMemory(ctx, headerLen+int(maxSize))
	if err != nil {
		return nil, 0, err
	}
	defer r.Close()
	if err := c.CreateFlow(ctx, spec); err != nil {
		return nil, 0, err
	}
	defer c.DestroyFlow(context.WithoutCancel(ctx), spec.Flow)
	for i, m := range [][2]uint64{{0, headerLen}, {headerLen, uint64(maxSize)}} {
		if err := c.PostRecv(ctx, hostapi.RecvReq{Flow: spec.Flow, Region: r.ID(), Offset: m[0], Length: m[1], WRID: uint64(i)}); err != nil {
			return nil, 0, err
		}
	}
	comps, err := awaitAll(ctx, c, 2)
	if err != nil {
		return nil, 0, err
	}
	mem := r.Bytes()
	if !bytes.Equal(mem[:8], []byte(headerMagic)) {
		return nil, 0, fmt.Errorf("not a forgivectl transfer: header %q", mem[:8])
	}
	size := binary.BigEndian.Uint64(mem[8:])
	var forgiven uint64
	for _, comp := range comps {
		if comp.WRID == 1 && comp.Len != size {
			return nil, 0, fmt.Errorf("header announced %d bytes, %d arrived", size, comp.Len)
		}
		forgiven += comp.ForgivenBytes()
	}
	data := bytes.Clone(mem[headerLen : headerLen+size])
	if sum := sha256.Sum256(data); !bytes.Equal(sum[:], mem[16:headerLen]) {
		return data, forgiven, fmt.Errorf("%w: %d of %d bytes forgiven", ErrChecksum, forgiven, size)
	}
	return data, forgiven, nil
}
