package nicapi_test

import (
	"testing"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/hostapi/nicapi"
	"github.com/forgive-emu/forgive/nic"
)

// BenchmarkHostCreateDestroyFlow is what a flow's creation and
// destruction cost through the host API's semantics, the checks and
// maps of nicapi.Host over the engine's own work (nic's
// BenchmarkFlowCreateDestroy): create_flow, the CONNECT going out,
// destroy_flow. Each op is one flow with a new id.
func BenchmarkHostCreateDestroyFlow(b *testing.B) {
	for _, ent := range []hostapi.Entropy{hostapi.EntropySingle, hostapi.EntropyMessage} {
		b.Run(ent.String(), func(b *testing.B) {
			e, err := nic.New(nic.DefaultConfig(3, 1e9))
			if err != nil {
				b.Fatal(err)
			}
			h := nicapi.New(e, hostapi.Limits{}, func(hostapi.ClientID, hostapi.Completion) {})
			const c hostapi.ClientID = 1
			buf := make([]byte, 9000)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				id := hostapi.FlowID(i + 1)
				if err := h.CreateFlow(0, c, hostapi.FlowSpec{Flow: id, Peer: 4, Class: hostapi.ClassGradient, Entropy: ent}); err != nil {
					b.Fatal(err)
				}
				if _, _, ok := e.Transmit(0, buf); !ok {
					b.Fatal("no CONNECT")
				}
				if err := h.DestroyFlow(c, id); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
