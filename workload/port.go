package workload

import (
	"context"

	"github.com/forgive-emu/forgive/hostapi"
)

// port is what a rank needs of its daemon: the host API client's calls.
// Run adapts a *hostapi.Client; the tests also drive the ring through an
// in-process fake fabric that checks the rules a daemon cannot see (a
// send's memory changed while it was pending, a receive posted for a
// message nobody sends).
type port interface {
	RegisterMemory(ctx context.Context, size int) (memory, error)
	CreateFlow(ctx context.Context, spec hostapi.FlowSpec) error
	DestroyFlow(ctx context.Context, flow hostapi.FlowID) error
	PostSend(ctx context.Context, req hostapi.SendReq) error
	PostRecv(ctx context.Context, req hostapi.RecvReq) error
	BeginStep(ctx context.Context, req hostapi.StepReq) error
	EndStep(ctx context.Context, step uint64) error
	Poll(ctx context.Context) (hostapi.Completion, error)
	TryPoll() (hostapi.Completion, bool)
}

// memory is a registered region.
type memory interface {
	ID() hostapi.RegionID
	Bytes() []byte
	Close() error
}

// clientPort adapts a host API client.
type clientPort struct{ *hostapi.Client }

func (c clientPort) RegisterMemory(ctx context.Context, size int) (memory, error) {
	r, err := c.Client.RegisterMemory(ctx, size)
	if err != nil {
		return nil, err
	}
	return r, nil
}
