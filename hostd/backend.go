package hostd

import (
	"fmt"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/nic"
)

// backend implements hostapi.Backend by running each request on the
// daemon's loop. The server has already checked that the client owns the
// regions and flows it names; the daemon keeps its own table too, to map
// the API's ids to the engine's and to route completions.
type backend struct{ d *Daemon }

var _ hostapi.Backend = backend{}

func (b backend) client(c hostapi.ClientID) *clientState {
	cs := b.d.clients[c]
	if cs == nil {
		cs = &clientState{regions: map[hostapi.RegionID]nic.RegionID{}, flows: map[hostapi.FlowID]nic.FlowKey{}}
		b.d.clients[c] = cs
	}
	return cs
}

func (b backend) RegisterMemory(c hostapi.ClientID, mem []byte) (id hostapi.RegionID, err error) {
	err = b.d.do(func(time.Duration) error {
		r, err := b.d.eng.RegisterMemory(mem)
		if err != nil {
			return err
		}
		id = hostapi.RegionID(r)
		b.client(c).regions[id] = r
		return nil
	})
	return id, err
}

func (b backend) DeregisterMemory(c hostapi.ClientID, id hostapi.RegionID) error {
	return b.d.do(func(time.Duration) error {
		cs := b.client(c)
		r, ok := cs.regions[id]
		if !ok {
			return fmt.Errorf("%w: %d", nic.ErrNoRegion, id)
		}
		if err := b.d.eng.DeregisterMemory(r); err != nil {
			return err
		}
		delete(cs.regions, id)
		return nil
	})
}

func (b backend) CreateFlow(c hostapi.ClientID, spec hostapi.FlowSpec) error {
	ns, err := FlowSpecToNIC(spec)
	if err != nil {
		return err
	}
	return b.d.do(func(now time.Duration) error {
		if err := b.d.eng.CreateFlow(now, ns); err != nil {
			return err
		}
		key := nic.FlowKey{Peer: ns.Peer, ID: ns.ID}
		b.client(c).flows[spec.Flow] = key
		b.d.owners[key] = c
		return nil
	})
}

func (b backend) DestroyFlow(c hostapi.ClientID, flow hostapi.FlowID) error {
	return b.d.do(func(time.Duration) error {
		cs := b.client(c)
		key, ok := cs.flows[flow]
		if !ok {
			return fmt.Errorf("%w: %d", nic.ErrNoFlow, flow)
		}
		err := b.d.eng.DestroyFlow(key)
		b.d.deliverCompletions() // the failed work goes to its owner before the flow is forgotten
		delete(cs.flows, flow)
		delete(b.d.owners, key)
		return err
	})
}

// lookup resolves a client's flow and region.
func (b backend) lookup(c hostapi.ClientID, flow hostapi.FlowID, region hostapi.RegionID) (nic.FlowKey, nic.RegionID, error) {
	cs := b.client(c)
	key, ok := cs.flows[flow]
	if !ok {
		return key, 0, fmt.Errorf("%w: %d", nic.ErrNoFlow, flow)
	}
	r, ok := cs.regions[region]
	if !ok {
		return key, 0, fmt.Errorf("%w: %d", nic.ErrNoRegion, region)
	}
	return key, r, nil
}

func (b backend) PostSend(c hostapi.ClientID, req hostapi.SendReq) error {
	if err := CheckWorkBounds(req.Offset, req.Length); err != nil {
		return err
	}
	return b.d.do(func(now time.Duration) error {
		key, r, err := b.lookup(c, req.Flow, req.Region)
		if err != nil {
			return err
		}
		return b.d.eng.PostSend(now, key, req.WRID, r, int(req.Offset), int(req.Length))
	})
}

func (b backend) PostRecv(c hostapi.ClientID, req hostapi.RecvReq) error {
	if err := CheckWorkBounds(req.Offset, req.Length); err != nil {
		return err
	}
	return b.d.do(func(time.Duration) error {
		key, r, err := b.lookup(c, req.Flow, req.Region)
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
	return b.d.do(func(time.Duration) error {
		_, err := b.d.eng.BeginStep(budget.StepID(req.Step), req.Critical, req.Norms, req.LRDecay,
			int64(req.ExpectedGradientBytes))
		return err
	})
}

func (b backend) EndStep(_ hostapi.ClientID, step uint64) error {
	return b.d.do(func(time.Duration) error {
		b.d.eng.EndStep(budget.StepID(step))
		return nil
	})
}

func (b backend) Counters(c hostapi.ClientID) (out hostapi.Counters, err error) {
	err = b.d.do(func(time.Duration) error {
		out.Host = HostCounters(b.d.eng.Stats(), b.d.stats)
		for id, key := range b.client(c).flows {
			r, ok := b.d.eng.Flow(key)
			if !ok {
				continue
			}
			out.Flows = append(out.Flows, hostapi.FlowCounters{Flow: id, Peer: hostapi.HostID(key.Peer), Values: FlowCounters(r)})
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

// ClientGone releases everything a disconnected client owned: its flows
// (their work fails) and then its regions, before the server unmaps them.
func (b backend) ClientGone(c hostapi.ClientID) {
	_ = b.d.do(func(time.Duration) error {
		cs := b.d.clients[c]
		if cs == nil {
			return nil
		}
		for _, key := range cs.flows {
			_ = b.d.eng.DestroyFlow(key)
			delete(b.d.owners, key)
		}
		b.d.deliverCompletions()
		for _, r := range cs.regions {
			_ = b.d.eng.DeregisterMemory(r)
		}
		delete(b.d.clients, c)
		return nil
	})
}
