package nic_test

import (
	"testing"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/switchcore"
)

// The seed fixes exemption_eligible "when the flow is created: gradient
// all-reduce payload on a step with p > 0", in a model where a flow
// belongs to one step (StepOf(flow)). Here a flow is a queue pair that
// lives across steps, so eligibility is derived from the step of the
// message an acknowledgement reports on (docs/architecture.md,
// "Exemption eligibility"): one gradient flow, created before any step
// began, is exempt on a step with p > 0, obeys on a step with p = 0, and
// is exempt again on the next step with p > 0; a tensor-parallel flow
// tagged with the same steps never is.
func TestEligibilityFollowsEachMessagesStep(t *testing.T) {
	s := newStar(t, 2, switchcore.TrimNDP, func(c *nic.Config) {
		c.Forgive = true
		c.Budget.PLow = 0 // critical steps have no loss budget: p = 0
	})
	const grad, tensor = 1, 2
	s.flow(2, 1, grad, nic.ClassGradient) // before any step: a creation-time rule would fix it ineligible
	s.flow(2, 1, tensor, nic.ClassTensor)
	const size = 256 << 10
	_, rx := s.region(1, 2*size, 0)
	_, tx := s.region(2, size, 3)
	recvs := 0
	message := func(step budget.StepID, critical bool) {
		t.Helper()
		if _, err := s.nics[1].BeginStep(s.sim.Now(), nic.StepReq{Step: step, Critical: &critical, Expected: size}); err != nil {
			t.Fatal(err)
		}
		for i, id := range []uint32{grad, tensor} {
			if err := s.nics[1].PostRecv(nic.RecvReq{Key: nic.FlowKey{Peer: 2, ID: id}, WR: uint64(step), Region: rx, Off: i * size, Length: size, Step: step}); err != nil {
				t.Fatal(err)
			}
			if err := s.nics[2].PostSend(s.sim.Now(), nic.SendReq{Key: nic.FlowKey{Peer: 1, ID: id}, WR: uint64(step), Region: tx, Length: size}); err != nil {
				t.Fatal(err)
			}
		}
		recvs += 2
		s.run(5*time.Second, s.recvDone(1, recvs))
		// Sends complete on the ACK that covers them: the sender has
		// applied the last report of the message.
		s.run(5*time.Second, func() bool {
			n := 0
			for _, c := range s.comps[2] {
				if c.Kind == nic.WorkSend {
					n++
				}
			}
			return n >= recvs
		})
		s.nics[1].EndStep(s.sim.Now(), step)
		if err := s.nics[1].CheckStep(step); err != nil {
			t.Fatal(err)
		}
	}
	mode := func(id uint32) (congestion.Mode, congestion.SenderStats) {
		r, ok := s.nics[2].Flow(nic.FlowKey{Peer: 1, ID: id})
		if !ok {
			t.Fatalf("no flow %d", id)
		}
		return r.Mode, r.CC
	}

	message(1, false) // p = P_high
	if m, st := mode(grad); m != congestion.Exempt || st.ToExempt != 1 {
		t.Fatalf("step 1 (p = %v): gradient sender %v after %d changes to exempt; want exempt", budget.DefaultPHigh, m, st.ToExempt)
	}
	message(2, true) // p = P_low = 0
	if m, st := mode(grad); m != congestion.Obeying || st.ToObeying != 1 {
		t.Fatalf("step 2 (p = 0): gradient sender %v after %d changes to obeying; want it to obey", m, st.ToObeying)
	}
	message(3, false)
	if m, st := mode(grad); m != congestion.Exempt || st.ToExempt != 2 {
		t.Fatalf("step 3 (p = %v): gradient sender %v after %d changes to exempt; want exempt again", budget.DefaultPHigh, m, st.ToExempt)
	}
	if m, st := mode(tensor); m != congestion.Obeying || st.EverExempt {
		t.Fatalf("tensor-parallel sender %v, ever exempt %v; want it never exempt", m, st.EverExempt)
	}
}
