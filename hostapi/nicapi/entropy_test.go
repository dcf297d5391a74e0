package nicapi_test

import (
	"testing"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/hostapi/nicapi"
	"github.com/forgive-emu/forgive/nic"
)

// Every entropy policy of the host API reaches the engine as the policy
// of the same name.
func TestEntropyReachesTheEngineByName(t *testing.T) {
	for _, e := range []hostapi.Entropy{hostapi.EntropySingle, hostapi.EntropySpray, hostapi.EntropySubflows, hostapi.EntropyMessage} {
		spec := hostapi.FlowSpec{Flow: 1, Peer: 4, Class: hostapi.ClassGradient, Entropy: e}
		if e == hostapi.EntropySubflows {
			spec.Subflows = 4
		}
		ns, err := nicapi.FlowSpecToNIC(spec)
		if err != nil {
			t.Fatal(err)
		}
		want, err := nic.ParseEntropy(e.String())
		if err != nil || ns.Entropy != want {
			t.Errorf("%v reaches the engine as %v, want %v (%v)", e, ns.Entropy, want, err)
		}
		h, _ := newHost(t, hostapi.Limits{})
		if err := h.CreateFlow(0, 1, spec); err != nil {
			t.Errorf("create_flow with entropy %v: %v", e, err)
		}
	}
}
