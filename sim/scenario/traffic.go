package scenario

import "github.com/forgive-emu/forgive/nic"

// Traffic sums the flow counters of every host.
type Traffic struct {
	DataPackets, RetxPackets, Probes uint64
	AcksRecv, NacksRecv, CNPsRecv    uint64
	TrimmedRecv, RecvPackets         uint64
	TxPackets, RxPackets             uint64
}

// TrafficOf returns the flow counters of every engine in nics, summed.
func TrafficOf(nics []*nic.Engine) Traffic {
	var t Traffic
	for _, e := range nics {
		st := e.Stats()
		t.TxPackets += st.TxPackets
		t.RxPackets += st.RxPackets
		for _, k := range e.Flows() {
			r, _ := e.Flow(k)
			f := r.Stats
			t.DataPackets += f.DataPackets
			t.RetxPackets += f.RetxPackets
			t.Probes += f.ProbesSent
			t.AcksRecv += f.AcksRecv
			t.NacksRecv += f.NacksRecv
			t.CNPsRecv += f.CNPsRecv
			t.TrimmedRecv += f.TrimmedRecv
			t.RecvPackets += f.RecvPackets
		}
	}
	return t
}
