package forgivedrv

import (
	"fmt"

	"github.com/forgive-emu/forgive/hostapi"
)

// groupBackend is backend for a daemon with engines > 1: every request
// runs through the group's one nicapi.Host under its lock, on the
// server's goroutine; the Host's calls on an engine run on that engine's
// loop (engines).
type groupBackend struct{ g *group }

var _ hostapi.Backend = groupBackend{}

// with runs fn with the Host, under the group's lock.
func (b groupBackend) with(fn func() error) error {
	b.g.hmu.Lock()
	defer b.g.hmu.Unlock()
	return fn()
}

func (b groupBackend) CheckRegister(c hostapi.ClientID, length uint64) error {
	return b.with(func() error { return b.g.host.CheckRegister(c, length) })
}

func (b groupBackend) RegisterMemory(c hostapi.ClientID, mem []byte) (id hostapi.RegionID, err error) {
	err = b.with(func() error {
		id, err = b.g.host.RegisterMemory(c, mem)
		return err
	})
	return id, err
}

func (b groupBackend) DeregisterMemory(c hostapi.ClientID, id hostapi.RegionID) error {
	return b.with(func() error { return b.g.host.DeregisterMemory(c, id) })
}

// The Host's now is unused here: each engine's call takes its loop's.
func (b groupBackend) CreateFlow(c hostapi.ClientID, spec hostapi.FlowSpec) error {
	return b.with(func() error { return b.g.host.CreateFlow(0, c, spec) })
}

func (b groupBackend) DestroyFlow(c hostapi.ClientID, flow hostapi.FlowID) error {
	return b.with(func() error { return b.g.host.DestroyFlow(c, flow) })
}

func (b groupBackend) PostSend(c hostapi.ClientID, req hostapi.SendReq) error {
	return b.with(func() error { return b.g.host.PostSend(0, c, req) })
}

func (b groupBackend) PostRecv(c hostapi.ClientID, req hostapi.RecvReq) error {
	return b.with(func() error { return b.g.host.PostRecv(c, req) })
}

func (b groupBackend) Written(c hostapi.ClientID, n int) {
	_ = b.with(func() error { b.g.host.Written(c, n); return nil })
}

func (b groupBackend) Hello(c hostapi.ClientID, job hostapi.Job) error {
	return b.with(func() error { return b.g.host.Hello(c, job) })
}

func (b groupBackend) BeginStep(c hostapi.ClientID, req hostapi.StepReq) error {
	return b.with(func() error { return b.g.host.BeginStep(0, c, req) })
}

func (b groupBackend) EndStep(c hostapi.ClientID, step uint64) error {
	return b.with(func() error { return b.g.host.EndStep(0, c, step) })
}

func (b groupBackend) Counters(c hostapi.ClientID) (out hostapi.Counters, err error) {
	err = b.with(func() error {
		out = b.g.host.Counters(c)
		out.Host = HostCounters(engines(b).Stats(), b.g.loopStats())
		return nil
	})
	return out, err
}

func (b groupBackend) Steps(c hostapi.ClientID) (out []hostapi.StepRecord, err error) {
	err = b.with(func() error {
		out, err = b.g.host.Steps(c, hostapi.MaxStepRecords)
		return err
	})
	return out, err
}

func (b groupBackend) Status() (hostapi.Status, error) {
	d := b.g.shards[0]
	st := hostapi.Status{Backend: map[string]string{}}
	err := b.with(func() error {
		d.configStatus(st.Backend) // set at New, never changed: read off the loop
		st.Backend["engines"] = fmt.Sprint(len(b.g.shards))
		st.Flows = b.g.host.Flows()
		return nil
	})
	return st, err
}

func (b groupBackend) ClientGone(c hostapi.ClientID) {
	_ = b.with(func() error { b.g.host.ClientGone(c); return nil })
}
