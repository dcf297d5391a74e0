package workload

import (
	"context"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
)

// HostAPI is what a rank needs of its host: the host API's calls, none of
// which waits for the network. The socket client (*hostapi.Client, through
// [Run]) satisfies it, and so does an in-process host API over a NIC engine on
// the simulator's clock (through [RunEvents]). The tests also drive the
// ring through an in-process fake fabric that checks the rules a daemon
// cannot see (a send's memory changed while it was pending, a receive
// posted for a message nobody sends).
type HostAPI interface {
	RegisterMemory(ctx context.Context, size int) (Memory, error)
	CreateFlow(ctx context.Context, spec hostapi.FlowSpec) error
	DestroyFlow(ctx context.Context, flow hostapi.FlowID) error
	PostSend(ctx context.Context, req hostapi.SendReq) error
	PostRecv(ctx context.Context, req hostapi.RecvReq) error
	BeginStep(ctx context.Context, req hostapi.StepReq) error
	EndStep(ctx context.Context, step uint64) error
	// TryPoll returns a queued completion without waiting.
	TryPoll() (hostapi.Completion, bool)
}

// Memory is a registered region.
type Memory interface {
	ID() hostapi.RegionID
	Bytes() []byte
	Close() error
}

// pollHostAPI is a host API whose completions a rank waits for: a real daemon's,
// on its own goroutine.
type pollHostAPI interface {
	HostAPI
	Poll(ctx context.Context) (hostapi.Completion, error)
}

// EventHostAPI is a host API on an event loop: it hands each completion to the
// function set with OnCompletion, on the loop's goroutine, as the
// completion happens (nil: queue it for TryPoll).
type EventHostAPI interface {
	HostAPI
	OnCompletion(fn func(hostapi.Completion))
}

// Loop is a virtual-time event loop, such as the simulator's: one
// goroutine, and a clock only events advance.
type Loop interface {
	// Now is the virtual time.
	Now() time.Duration
	// At runs fn at virtual time t (not before Now), in FIFO order among
	// equal times.
	At(t time.Duration, fn func())
	// RunUntil runs events until done, checked after every event time,
	// returns true, or until the virtual time would pass limit (an error),
	// or until nothing is left to run (an error).
	RunUntil(done func() bool, limit time.Duration) error
}

// clientAPI adapts a host API client.
type clientAPI struct{ *hostapi.Client }

func (c clientAPI) RegisterMemory(ctx context.Context, size int) (Memory, error) {
	r, err := c.Client.RegisterMemory(ctx, size)
	if err != nil {
		return nil, err
	}
	return r, nil
}
