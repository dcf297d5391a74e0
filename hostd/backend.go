package hostd

import (
	"fmt"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/nic"
)

// backend implements hostapi.Backend by running each request on the
// daemon's loop. The server owns ownership: it has already checked that
// the client owns the regions and flows it names, it routes completions
// (Server.FlowOwner) and it lists what a departed client held, so the
// daemon keeps no per-client table. A region's API id is the engine's; a
// flow's API id maps to the engine's key (peer and id) in Daemon.flows.
type backend struct{ d *Daemon }

var _ hostapi.Backend = backend{}

func (b backend) RegisterMemory(_ hostapi.ClientID, mem []byte) (id hostapi.RegionID, err error) {
	err = b.d.do(func(time.Duration) error {
		r, err := b.d.eng.RegisterMemory(mem)
		id = hostapi.RegionID(r)
		return err
	})
	return id, err
}

func (b backend) DeregisterMemory(_ hostapi.ClientID, id hostapi.RegionID) error {
	return b.d.do(func(time.Duration) error { return b.d.eng.DeregisterMemory(nic.RegionID(id)) })
}

func (b backend) CreateFlow(_ hostapi.ClientID, spec hostapi.FlowSpec) error {
	ns, err := FlowSpecToNIC(spec)
	if err != nil {
		return err
	}
	return b.d.do(func(now time.Duration) error {
		if err := b.d.eng.CreateFlow(now, ns); err != nil {
			return err
		}
		b.d.flows[spec.Flow] = nic.FlowKey{Peer: ns.Peer, ID: ns.ID}
		return nil
	})
}

func (b backend) DestroyFlow(_ hostapi.ClientID, flow hostapi.FlowID) error {
	return b.d.do(func(time.Duration) error {
		key, ok := b.d.flows[flow]
		if !ok {
			return fmt.Errorf("%w: %d", nic.ErrNoFlow, flow)
		}
		err := b.d.eng.DestroyFlow(key)
		b.d.deliverCompletions() // the failed work goes to its owner before the flow is forgotten
		delete(b.d.flows, flow)
		return err
	})
}

// lookup resolves a flow and a region to the engine's ids.
func (b backend) lookup(flow hostapi.FlowID, region hostapi.RegionID) (nic.FlowKey, nic.RegionID, error) {
	key, ok := b.d.flows[flow]
	if !ok {
		return key, 0, fmt.Errorf("%w: %d", nic.ErrNoFlow, flow)
	}
	return key, nic.RegionID(region), nil
}

func (b backend) PostSend(_ hostapi.ClientID, req hostapi.SendReq) error {
	if err := CheckWorkBounds(req.Offset, req.Length); err != nil {
		return err
	}
	return b.d.do(func(now time.Duration) error {
		key, r, err := b.lookup(req.Flow, req.Region)
		if err != nil {
			return err
		}
		return b.d.eng.PostSend(now, key, req.WRID, r, int(req.Offset), int(req.Length))
	})
}

func (b backend) PostRecv(_ hostapi.ClientID, req hostapi.RecvReq) error {
	if err := CheckWorkBounds(req.Offset, req.Length); err != nil {
		return err
	}
	return b.d.do(func(time.Duration) error {
		key, r, err := b.lookup(req.Flow, req.Region)
		if err != nil {
			return err
		}
		return b.d.eng.PostRecv(key, req.WRID, r, int(req.Offset), int(req.Length), budget.StepID(req.Step))
	})
}

func (b backend) BeginStep(_ hostapi.ClientID, req hostapi.StepReq) error {
	if err := CheckStepRequest(req); err != nil {
		return err
	}
	return b.d.do(func(now time.Duration) error {
		_, err := b.d.eng.BeginStep(now, budget.StepID(req.Step), req.Critical, req.Norms, req.LRDecay,
			int64(req.ExpectedGradientBytes))
		return err
	})
}

func (b backend) EndStep(_ hostapi.ClientID, step uint64) error {
	return b.d.do(func(now time.Duration) error {
		if _, ok := b.d.eng.StepRecord(budget.StepID(step)); !ok {
			return fmt.Errorf("%w: end_step %d: the step was never begun (or is older than the ledger's %d steps)",
				nic.ErrBadRequest, step, budget.HistorySteps)
		}
		b.d.eng.EndStep(now, budget.StepID(step))
		return nil
	})
}

func (b backend) Counters(c hostapi.ClientID) (out hostapi.Counters, err error) {
	err = b.d.do(func(time.Duration) error {
		out.Host = HostCounters(b.d.eng.Stats(), b.d.stats)
		for id, key := range b.d.flows {
			if owner, _ := b.d.srv.FlowOwner(id); owner != c {
				continue // only the caller's flows
			}
			r, ok := b.d.eng.Flow(key)
			if !ok {
				continue
			}
			out.Flows = append(out.Flows, hostapi.FlowCounters{Flow: id, Peer: hostapi.HostID(key.Peer), Values: FlowCounters(r),
				LocalTag: r.LocalTag, PeerTag: r.PeerTag})
		}
		return nil
	})
	return out, err
}

func (b backend) Steps(hostapi.ClientID) (out []hostapi.StepRecord, err error) {
	err = b.d.do(func(time.Duration) error {
		for _, r := range b.d.eng.Steps() {
			out = append(out, StepRecordToAPI(r))
		}
		return nil
	})
	return out, err
}

func (b backend) Status() (hostapi.Status, error) {
	st := hostapi.Status{Backend: map[string]string{}}
	err := b.d.do(func(time.Duration) error {
		cfg := b.d.eng.Config()
		st.Backend["line_rate_bps"] = fmt.Sprint(cfg.LineRate)
		st.Backend["mtu"] = fmt.Sprint(cfg.MTU)
		st.Backend["cc"] = cfg.CC.String()
		st.Backend["mode"] = cfg.Sender.Mode.String()
		st.Backend["forgive"] = fmt.Sprint(cfg.Forgive)
		st.Backend["p_low"] = fmt.Sprint(cfg.Budget.PLow)
		st.Backend["p_high"] = fmt.Sprint(cfg.Budget.PHigh)
		st.Backend["p"] = fmt.Sprint(cfg.Budget.P)
		st.Backend["listen"] = b.d.conn.LocalAddr().String()
		st.Backend["switch"] = b.d.sw.String()
		return nil
	})
	return st, err
}

// ClientGone releases everything a disconnected client owned, as the
// server lists it: its flows (their work fails) and then its regions,
// before the server unmaps them.
func (b backend) ClientGone(_ hostapi.ClientID, owned hostapi.Owned) {
	_ = b.d.do(func(time.Duration) error {
		for _, id := range owned.Flows {
			if key, ok := b.d.flows[id]; ok {
				_ = b.d.eng.DestroyFlow(key)
				delete(b.d.flows, id)
			}
		}
		b.d.deliverCompletions()
		for _, r := range owned.Regions {
			_ = b.d.eng.DeregisterMemory(nic.RegionID(r))
		}
		return nil
	})
}
