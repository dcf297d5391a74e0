package topo

import (
	"fmt"

	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/trimswitchdrv"
)

// switchEffective is every switch port's settings once the topology's
// overrides are applied to the profile's.
type switchEffective struct {
	mtu       int
	dataQueue units.Size
	ecn       *ECNParams // nil: no marking
	trim      trimswitchdrv.TrimMode
	overhead  units.Size
	pfc       []trimswitchdrv.PFC
	// socketBuffer is every port's socket buffer (emulation.socket_buffer).
	socketBuffer units.Size
}

// switchSettings applies t's switch overrides to the profile's values and
// returns the derived values that changed. An override keeps the
// profile's ratios for what it does not set: a new buffer keeps the
// profile's ECN thresholds as the same fractions of the buffer.
func switchSettings(p Params, t *Topology, probs *problems) (switchEffective, map[string]string) {
	e := switchEffective{mtu: p.MTU, dataQueue: p.Switch.DataQueue, trim: p.Switch.Trim, overhead: p.Switch.Overhead,
		socketBuffer: p.SocketBuffer}
	ecn := p.Switch.ECN
	e.ecn = &ecn
	changed := map[string]string{}
	o := t.Switch
	if o == nil {
		return e, changed
	}
	if o.BufferBDP != nil {
		e.dataQueue = units.Size(mulRound(int64(p.BDP), o.BufferBDP.Rat()))
		scale := ratio(int64(e.dataQueue), int64(p.Switch.DataQueue))
		ecn.KMin = units.Size(mulRound(int64(ecn.KMin), scale))
		ecn.KMax = units.Size(mulRound(int64(ecn.KMax), scale))
		changed["switch.data_queue"] = e.dataQueue.String()
		if e.dataQueue < MinQueuePackets*units.Size(p.MTU+dataHeaderBytes) {
			probs.add("switch.buffer_bdp", "%v BDPs is %v, fewer than %d packets", o.BufferBDP, e.dataQueue, MinQueuePackets)
		}
	}
	if c := o.ECN; c != nil {
		if c.Enabled != nil && !*c.Enabled {
			e.ecn = nil
		} else {
			ecn.KMin = ofSize(e.dataQueue, c.KMinFrac)
			ecn.KMax = ofSize(e.dataQueue, c.KMaxFrac)
			if c.PMax.IsSet() {
				ecn.PMax = c.PMax
			}
		}
	}
	if e.ecn == nil {
		changed["switch.ecn.kmin"], changed["switch.ecn.kmax"], changed["switch.ecn.pmax"] = "off", "off", "off"
	} else {
		changed["switch.ecn.kmin"], changed["switch.ecn.kmax"] = ecn.KMin.String(), ecn.KMax.String()
		changed["switch.ecn.pmax"] = ecn.PMax.String()
	}
	if o.Trim != nil {
		e.trim = *o.Trim
		changed["switch.trim"] = e.trim.String()
	}
	if c := o.PFC; c != nil {
		e.pfc = []trimswitchdrv.PFC{c.file(e.dataQueue, p.BDP)}
		pf := e.pfc[0]
		if pf.XOff <= 0 {
			probs.add("switch.pfc.xoff_frac", "%v of the %v data queue rounds to zero", c.XOffFrac, e.dataQueue)
		}
		changed["switch.pfc"] = fmt.Sprintf("priorities=%v xoff=%v xon=%v headroom=%v", pf.Priorities, pf.XOff, pf.XOn, headroomString(pf.Headroom))
	}
	return e, changed
}

func headroomString(h units.Size) string {
	if h == 0 {
		return "unlimited"
	}
	return h.String()
}

func (c *PFCOverride) file(dataQueue, bdp units.Size) trimswitchdrv.PFC {
	prios := c.Priorities
	if len(prios) == 0 {
		prios = []uint8{0} // the data DSCP 0 maps to priority 0
	}
	return trimswitchdrv.PFC{
		Priorities: prios,
		XOff:       ofSize(dataQueue, c.XOffFrac),
		XOn:        ofSize(dataQueue, c.XOnFrac),
		Headroom:   units.Size(mulRound(int64(bdp), c.HeadroomBDP.Rat())),
	}
}

func ofSize(s units.Size, f Fraction) units.Size {
	return units.Size(mulRound(int64(s), f.Rat()))
}

// defaults is the defaults section of every switch: host ports take it
// whole, switch-to-switch ports override the rate.
func (e *switchEffective) defaults(rate units.Rate, delay units.Duration) trimswitchdrv.PortSettings {
	trim, overhead, dataQueue := e.trim, e.overhead, e.dataQueue
	pf := trimswitchdrv.PortSettings{Rate: &rate, Delay: &delay, Overhead: &overhead, DataQueue: &dataQueue, Trim: &trim}
	if e.ecn != nil {
		pf.ECN = &trimswitchdrv.ECN{KMin: e.ecn.KMin, KMax: e.ecn.KMax, PMax: e.ecn.PMax.Float()}
	}
	return pf
}

// derive is the plan's printed parameters: the profile's, with the
// topology's changes and its own values.
func (p *Plan) derive(prof *Profile, t *Topology, changed map[string]string) map[string]string {
	m := prof.Derived()
	m["profile"] = prof.Name
	for k, v := range changed {
		m[k] = v
	}
	if _, ok := m["switch.pfc"]; !ok {
		m["switch.pfc"] = "off"
	}
	m["topology"] = t.Name
	m["kind"] = string(t.Kind)
	m["ranks"] = fmt.Sprint(p.Ranks)
	m["switch.link_delay"] = p.LinkDelay.String()
	m["path_rtt"] = p.PathRTT.String()
	if t.Kind == KindLeafSpine {
		m["leaves"] = fmt.Sprint(t.Leaves)
		m["hosts_per_leaf"] = fmt.Sprint(t.HostsPerLeaf)
		m["spines"] = fmt.Sprint(t.Spines)
		m["placement"] = string(t.Placement)
		m["oversubscription"] = t.Oversubscription.String()
		m["uplink_rate"] = p.UplinkRate.String()
	}
	return m
}
