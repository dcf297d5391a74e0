package workload

import (
	"github.com/forgive-emu/forgive/hostapi"
)

// Transfer is the bytes one rank sends another in a step, of one class.
type Transfer struct {
	From, To int // ranks
	Bytes    int
	Class    hostapi.Class
}

// Traffic lists what one step of cfg sends between the ranks on hosts,
// the background burst aside: the gradient all-reduce's messages (the
// flat ring's or the compiled schedule's, one Transfer per message), the
// tensor-parallel exchanges on the fabric (the pairs' or the groups'
// schedule) and the pipeline's. The lab reads it to derive the seed's
// sizes under a reading: which of these bytes cross which links.
func (cfg Config) Traffic(hosts []hostapi.HostID) ([]Transfer, error) {
	cfg.PayloadFree = true // a plan that generates no payload
	full, err := cfg.withDefaults(hosts)
	if err != nil {
		return nil, err
	}
	sched, tp, err := cfg.Schedule(hosts)
	if err != nil {
		return nil, err
	}
	p := newPlan(full, hosts)
	var out []Transfer
	for i := range p.n {
		for _, sd := range sched.Plans[i/tp].Sends {
			out = append(out, Transfer{From: i, To: i%tp + sd.Peer*tp, Bytes: sd.Len, Class: hostapi.ClassGradient})
		}
	}
	for i := range p.n {
		switch {
		case p.tensorGroups():
			if p.tensorBytes() == 0 {
				continue
			}
			for _, sd := range p.tensorPlan(i).Sends {
				out = append(out, Transfer{From: i, To: p.groups.tensorMember(i, sd.Peer), Bytes: sd.Len, Class: hostapi.ClassTensor})
			}
		default:
			if j, ok := p.tensorPeer(i); ok {
				out = append(out, Transfer{From: i, To: j, Bytes: p.tensorBytes(), Class: hostapi.ClassTensor})
			}
		}
	}
	if p.pipeOn() {
		for i := range p.n {
			if j := p.pipeOut(i); j != i {
				out = append(out, Transfer{From: i, To: j, Bytes: full.PPBytes, Class: hostapi.ClassPipeline})
			}
		}
	}
	return out, nil
}
