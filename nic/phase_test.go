package nic_test

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/switchcore"
)

// phasedIncast is incast with each sender's message declared of a phase:
// senders[i] sends size bytes to host 1 on gradient flow 100+i, received
// as phases[i] of step.
func (s *star) phasedIncast(senders []uint16, phases []budget.Phase, size int, step budget.StepID) (dst, src [][]byte) {
	s.t.Helper()
	for i, h := range senders {
		id := uint32(100 + i)
		s.flow(h, 1, id, nic.ClassGradient)
		m, r := s.region(1, size, byte(0x80+i))
		if err := s.nics[1].PostRecv(nic.RecvReq{Key: nic.FlowKey{Peer: h, ID: id}, WR: uint64(i), Region: r, Length: size, Step: step, Phase: phases[i]}); err != nil {
			s.t.Fatal(err)
		}
		sm, sr := s.region(h, size, byte(i+1))
		if err := s.nics[h].PostSend(s.sim.Now(), nic.SendReq{Key: nic.FlowKey{Peer: 1, ID: id}, WR: uint64(i), Region: sr, Length: size}); err != nil {
			s.t.Fatal(err)
		}
		dst, src = append(dst, m), append(src, sm)
	}
	return dst, src
}

// phasedStep runs one non-critical step of a 3:1 gradient incast under the
// gather policy g, the senders' messages of the given phases, and returns
// the star, the step's record, and the forgiven bytes each completion
// listed. The received bytes are checked: exact outside the forgiven
// ranges, zero inside them.
func phasedStep(t *testing.T, g budget.GatherPolicy, phases []budget.Phase) (*star, budget.StepRecord, []int64) {
	t.Helper()
	const size = 2 << 20
	s := newStar(t, 4, switchcore.TrimNDP, func(c *nic.Config) { c.Budget.Gather = g })
	nc := false
	if _, err := s.nics[1].BeginStep(s.sim.Now(), nic.StepReq{Step: 4, Critical: &nc, Expected: 3 * size}); err != nil {
		t.Fatal(err)
	}
	dst, src := s.phasedIncast([]uint16{2, 3, 4}, phases, size, 4)
	s.run(5*time.Second, s.recvDone(1, 3))
	s.nics[1].EndStep(s.sim.Now(), 4)
	if err := s.nics[1].CheckStep(4); err != nil {
		t.Fatal(err)
	}
	rec, _ := s.nics[1].StepRecord(4)
	if rec.Forgiven > rec.Budget || rec.Received+rec.Forgiven != rec.Expected || rec.UnbudgetedBytes != 0 {
		t.Fatalf("record breaks the spec: %+v", rec)
	}
	listed := make([]int64, len(phases))
	for _, c := range s.comps[1] {
		if c.Err != nil {
			t.Fatal(c.Err)
		}
		m, want := dst[c.WR], src[c.WR]
		for _, r := range c.Forgiven {
			listed[c.WR] += int64(r.Len())
			if !bytes.Equal(m[r.Start:r.End], make([]byte, r.Len())) {
				t.Fatalf("forgiven range %v of message %d is not zero", r, c.WR)
			}
			copy(m[r.Start:r.End], want[r.Start:r.End])
		}
		if !bytes.Equal(m, want) {
			t.Fatalf("message %d was neither received nor forgiven in full", c.WR)
		}
	}
	return s, rec, listed
}

func everExempt(s *star, senders ...uint16) int {
	n := 0
	for _, h := range senders {
		if r, _ := s.nics[h].Flow(nic.FlowKey{Peer: 1, ID: uint32(98 + h)}); r.CC.EverExempt {
			n++
		}
	}
	return n
}

func sum(xs []int64) (n int64) {
	for _, x := range xs {
		n += x
	}
	return n
}

// Under the default policy a gathered message forgives as the seed does;
// under repair the same incast forgives nothing of it, delivers every byte,
// and its senders stay exempt: the repaired ranges never count in the
// step's outstanding bytes, so budget-exhausted is not set by them.
func TestGatherRepairDeliversFinishedValuesAndKeepsExemption(t *testing.T) {
	gather := []budget.Phase{budget.PhaseGather, budget.PhaseGather, budget.PhaseGather}
	_, fr, fl := phasedStep(t, budget.GatherForgive, gather)
	if fr.Forgiven == 0 || fr.GatheredForgiven != fr.Forgiven || sum(fl) != fr.Forgiven {
		t.Fatalf("forgive: forgiven %d, gathered %d, listed %d; want >0 and all equal", fr.Forgiven, fr.GatheredForgiven, sum(fl))
	}
	s, rr, rl := phasedStep(t, budget.GatherRepair, gather)
	if rr.Forgiven != 0 || sum(rl) != 0 || rr.GatherRepairs == 0 || rr.Trims != 0 || rr.TrimmedBytes != 0 {
		t.Fatalf("repair: forgiven %d, listed %d, gather repairs %d, trims %d (%d bytes); want 0, 0, >0, 0, 0",
			rr.Forgiven, sum(rl), rr.GatherRepairs, rr.Trims, rr.TrimmedBytes)
	}
	if n := everExempt(s, 2, 3, 4); n != 3 {
		t.Fatalf("repair: %d of 3 gradient senders were ever exempt", n)
	}
	var retx uint64
	for h := uint16(2); h <= 4; h++ {
		r, _ := s.nics[h].Flow(nic.FlowKey{Peer: 1, ID: uint32(98 + h)})
		retx += r.Stats.RetxBytes
	}
	if retx == 0 {
		t.Fatal("repair: the trimmed finished values were never retransmitted")
	}
}

// Under repair the reduce phase still forgives, within the same budget.
func TestGatherRepairStillForgivesTheReduce(t *testing.T) {
	_, rec, listed := phasedStep(t, budget.GatherRepair,
		[]budget.Phase{budget.PhaseReduce, budget.PhaseGather, budget.PhaseUnspecified})
	if listed[1] != 0 || listed[0]+listed[2] == 0 || rec.GatheredForgiven != 0 || sum(listed) != rec.Forgiven {
		t.Fatalf("forgiven per message %v, gathered %d, ledger %d; want only the reduce messages forgiven", listed, rec.GatheredForgiven, rec.Forgiven)
	}
}

// Under owner a finished value is forgiven only in the receive from its
// owner; one forwarded by another rank is repaired.
func TestGatherOwnerForgivesOnlyTheOwnersMessage(t *testing.T) {
	_, rec, listed := phasedStep(t, budget.GatherOwner,
		[]budget.Phase{budget.PhaseGatherOwner, budget.PhaseGather, budget.PhaseGather})
	if listed[0] == 0 || listed[1] != 0 || listed[2] != 0 || rec.GatheredForgiven != listed[0] || rec.GatherRepairs == 0 {
		t.Fatalf("forgiven per message %v, gathered %d, gather repairs %d; want only the owner's message forgiven",
			listed, rec.GatheredForgiven, rec.GatherRepairs)
	}
}

// A step opened with its expected bytes alone budgets its early bytes as a
// critical step's; the classification arrives mid-transfer and raises the
// budget, and nothing arrives unbudgeted.
func TestStepOpenedBeforeItsClassification(t *testing.T) {
	const size = 1 << 20
	s := newStar(t, 4, switchcore.TrimNDP, nil)
	if c, err := s.nics[1].BeginStep(s.sim.Now(), nic.StepReq{Step: 2, Expected: 3 * size}); err != nil || !c {
		t.Fatalf("open: critical %v, %v; want true (critical until classified)", c, err)
	}
	if rec, _ := s.nics[1].StepRecord(2); rec.Classified || rec.Budget != 15728 /* floor(0.005 × 3 MiB) */ {
		t.Fatalf("open step: %+v", rec)
	}
	s.incast([]uint16{2, 3, 4}, size, nic.ClassGradient, 2)
	s.run(5*time.Second, func() bool { r, _ := s.nics[1].StepRecord(2); return r.Received >= size })
	early, _ := s.nics[1].StepRecord(2)
	if early.Forgiven > early.Budget {
		t.Fatalf("before the classification: %+v", early)
	}
	nc := false
	if _, err := s.nics[1].BeginStep(s.sim.Now(), nic.StepReq{Step: 2, Critical: &nc}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.nics[1].BeginStep(s.sim.Now(), nic.StepReq{Step: 2, Critical: &nc}); err == nil {
		t.Fatal("a second classification was accepted")
	}
	s.run(5*time.Second, s.recvDone(1, 3))
	s.nics[1].EndStep(s.sim.Now(), 2)
	if err := s.nics[1].CheckStep(2); err != nil {
		t.Fatal(err)
	}
	rec, _ := s.nics[1].StepRecord(2)
	if !rec.Classified || rec.Critical || rec.Budget != 314572 /* floor(0.1 × 3 MiB) */ ||
		rec.Received+rec.Forgiven != rec.Expected || rec.Forgiven < early.Forgiven || rec.UnbudgetedBytes != 0 {
		t.Fatalf("classified step: %+v (forgiven before the classification %d)", rec, early.Forgiven)
	}
	if got := s.nics[1].Stats().UnbudgetedBytes; got != 0 {
		t.Fatalf("host counts %d unbudgeted bytes, want 0", got)
	}
	if steps := s.nics[1].Steps(); len(steps) != 1 {
		t.Fatalf("%d step records for one step", len(steps))
	}
}

// Bytes of a step that reach the receiver before the step is opened have
// no budget: they are counted, on the host and in the step's record once
// it opens.
func TestBytesBeforeTheStepOpensAreCounted(t *testing.T) {
	const size = 1 << 20
	s := newStar(t, 4, switchcore.TrimNDP, nil)
	s.incast([]uint16{2, 3, 4}, size, nic.ClassGradient, 3)
	s.run(5*time.Second, func() bool { return s.nics[1].Stats().UnbudgetedBytes >= size/2 })
	nc := false
	if _, err := s.nics[1].BeginStep(s.sim.Now(), nic.StepReq{Step: 3, Critical: &nc, Expected: 3 * size}); err != nil {
		t.Fatal(err)
	}
	before := s.nics[1].Stats().UnbudgetedBytes
	s.run(5*time.Second, s.recvDone(1, 3))
	s.nics[1].EndStep(s.sim.Now(), 3)
	if err := s.nics[1].CheckStep(3); err != nil {
		t.Fatal(err)
	}
	rec, _ := s.nics[1].StepRecord(3)
	if rec.UnbudgetedBytes != int64(before) || before == 0 || s.nics[1].Stats().UnbudgetedBytes != before {
		t.Fatalf("step's unbudgeted bytes %d, host's %d then %d", rec.UnbudgetedBytes, before, s.nics[1].Stats().UnbudgetedBytes)
	}
	if rec.Received+rec.Forgiven != rec.Expected {
		t.Fatalf("received %d + forgiven %d != expected %d", rec.Received, rec.Forgiven, rec.Expected)
	}
}

// A phase is only for a step's message on a gradient flow.
func TestPhaseNeedsAGradientStep(t *testing.T) {
	s := newStar(t, 2, switchcore.TrimNDP, nil)
	s.flow(1, 2, 5, nic.ClassTensor)
	s.flow(1, 2, 6, nic.ClassGradient)
	_, r := s.region(1, 4096, 0)
	for _, c := range []struct {
		name  string
		flow  uint32
		step  budget.StepID
		phase budget.Phase
	}{
		{"tensor flow", 5, 1, budget.PhaseReduce},
		{"no step", 6, 0, budget.PhaseGather},
		{"unknown phase", 6, 1, budget.NumPhases},
	} {
		err := s.nics[1].PostRecv(nic.RecvReq{Key: nic.FlowKey{Peer: 2, ID: c.flow}, WR: 1, Region: r, Length: 4096, Step: c.step, Phase: c.phase})
		if !errors.Is(err, nic.ErrBadRequest) {
			t.Fatalf("%s: %v, want ErrBadRequest", c.name, err)
		}
	}
	if err := s.nics[1].PostRecv(nic.RecvReq{Key: nic.FlowKey{Peer: 2, ID: 5}, WR: 1, Region: r, Length: 4096}); err != nil {
		t.Fatalf("tensor receive without a phase: %v", err)
	}
	if err := s.nics[1].PostRecv(nic.RecvReq{Key: nic.FlowKey{Peer: 2, ID: 6}, WR: 1, Region: r, Length: 4096, Step: 1, Phase: budget.PhaseGatherOwner}); err != nil {
		t.Fatalf("gradient receive of a step with a phase: %v", err)
	}
}
