package forgivedrv

import (
	"fmt"
	"time"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/hostapi/nicapi"
	"github.com/forgive-emu/forgive/nic"
)

// backend implements hostapi.Backend by running each request through the
// daemon's nicapi.Host on the daemon's loop: the host API's semantics
// (ownership, bounds, limits, the flow map, the step checks, the
// conversions) are decided there, as in the simulator's placement; the
// server keeps only the socket's side.
type backend struct{ d *Daemon }

var _ hostapi.Backend = backend{}

func (b backend) Hello(c hostapi.ClientID, job hostapi.Job) error {
	return b.d.do(func(time.Duration) error { return b.d.h.Hello(c, job) })
}

func (b backend) CheckRegister(c hostapi.ClientID, length uint64) error {
	return b.d.do(func(time.Duration) error { return b.d.h.CheckRegister(c, length) })
}

func (b backend) RegisterMemory(c hostapi.ClientID, mem []byte) (id hostapi.RegionID, err error) {
	err = b.d.do(func(time.Duration) error {
		id, err = b.d.h.RegisterMemory(c, mem)
		return err
	})
	return id, err
}

func (b backend) DeregisterMemory(c hostapi.ClientID, id hostapi.RegionID) error {
	return b.d.do(func(time.Duration) error { return b.d.h.DeregisterMemory(c, id) })
}

func (b backend) CreateFlow(c hostapi.ClientID, spec hostapi.FlowSpec) error {
	return b.d.do(func(now time.Duration) error { return b.d.h.CreateFlow(now, c, spec) })
}

func (b backend) DestroyFlow(c hostapi.ClientID, flow hostapi.FlowID) error {
	return b.d.do(func(time.Duration) error { return b.d.h.DestroyFlow(c, flow) })
}

func (b backend) PostSend(c hostapi.ClientID, req hostapi.SendReq) error {
	return b.d.do(func(now time.Duration) error { return b.d.h.PostSend(now, c, req) })
}

func (b backend) PostRecv(c hostapi.ClientID, req hostapi.RecvReq) error {
	return b.d.do(func(time.Duration) error { return b.d.h.PostRecv(c, req) })
}

// Written releases the outstanding slots of completions the server wrote,
// without waiting for the loop.
func (b backend) Written(c hostapi.ClientID, n int) { b.d.wrote(c, n) }

func (b backend) BeginStep(c hostapi.ClientID, req hostapi.StepReq) error {
	return b.d.do(func(now time.Duration) error { return b.d.h.BeginStep(now, c, req) })
}

func (b backend) EndStep(c hostapi.ClientID, step uint64) error {
	return b.d.do(func(now time.Duration) error { return b.d.h.EndStep(now, c, step) })
}

func (b backend) Counters(c hostapi.ClientID) (out hostapi.Counters, err error) {
	err = b.d.do(func(time.Duration) error {
		out = b.d.h.Counters(c)
		out.Host = HostCounters(b.d.eng.Stats(), b.d.loopStats())
		return nil
	})
	return out, err
}

func (b backend) Steps(c hostapi.ClientID) (out []hostapi.StepRecord, err error) {
	err = b.d.do(func(time.Duration) error {
		out, err = b.d.h.Steps(c, hostapi.MaxStepRecords)
		return err
	})
	return out, err
}

// configStatus writes the daemon's configuration into a status reply's
// backend fields.
func (d *Daemon) configStatus(m map[string]string) {
	cfg := d.eng.Config() // set at New, never changed
	// Printed as a float64, as it always was ("1e+08"): the status reply
	// does not change with the Go type.
	m["line_rate_bps"] = fmt.Sprint(float64(cfg.LineRate))
	m["mtu"] = fmt.Sprint(cfg.MTU)
	m["cc"] = cfg.CC.String()
	m["mode"] = cfg.Sender.Mode.String()
	m["forgive"] = fmt.Sprint(cfg.Forgive)
	m["p_low"] = fmt.Sprint(cfg.Budget.PLow)
	m["p_high"] = fmt.Sprint(cfg.Budget.PHigh)
	m["p"] = fmt.Sprint(cfg.Budget.P)
	m["gather"] = cfg.Budget.Gather.String()
	m["listen"] = d.conn.LocalAddr().String()
	m["switch"] = d.sw.String()
}

func (b backend) Status() (hostapi.Status, error) {
	st := hostapi.Status{Backend: map[string]string{}}
	err := b.d.do(func(time.Duration) error {
		b.d.configStatus(st.Backend)
		st.Flows = b.d.h.Flows()
		return nil
	})
	return st, err
}

// ClientGone releases everything a disconnected client held: its flows
// (their work fails) and then its regions, before the server unmaps them.
func (b backend) ClientGone(c hostapi.ClientID) {
	_ = b.d.do(func(time.Duration) error {
		b.d.h.ClientGone(c)
		return nil
	})
}

// HostCounters are the engine's and the loop's counters, as the host API,
// forgivectl counters and Prometheus name them (hostapi.HostStats).
func HostCounters(s nic.Stats, l LoopStats) hostapi.HostStats {
	h := nicapi.HostCounters(s)
	h.ForeignSource = l.ForeignSource
	h.Wakeups, h.Batches, h.SendErrors = l.Wakeups, l.Batches, l.SendErrors
	h.Truncated, h.Completions, h.LostCompletions = l.Truncated, l.Completions, l.LostComplete
	h.Sealed, h.Opened, h.OpenedTrimmed, h.SealErrors = l.Sealed, l.Opened, l.OpenedTrimmed, l.SealErrors
	h.RefusedUnsealed, h.RefusedUnknownDomain = l.RefusedUnsealed, l.RefusedUnknownDomain
	h.RefusedWrongDomain, h.RefusedHeaderTag = l.RefusedWrongDomain, l.RefusedHeaderTag
	h.RefusedPayloadTag, h.RefusedMalformedSeal = l.RefusedPayloadTag, l.RefusedMalformedSeal
	h.RefusedReplayed, h.SenderStarts = l.RefusedReplayed, l.SenderStarts
	h.SocketDrops = l.SocketDrops
	return h
}
