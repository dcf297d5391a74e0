package nic_test

import (
	"errors"
	"testing"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/switchcore"
)

// Two jobs on one host have independent steps: the same step number is
// two steps, ending one leaves the other open, and a job that has closed
// (and forgotten) many steps does not make the ledger refuse another
// job's low step numbers as too old, as one ledger for both would. The
// default job keeps the engine's own methods. ForgetJob drops a job's
// steps.
func TestJobsHaveIndependentSteps(t *testing.T) {
	e, err := nic.New(nicConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	crit := true
	begin := func(job nic.JobID, step budget.StepID) error {
		_, err := e.BeginStep(0, nic.StepReq{Step: step, Critical: &crit, Expected: 4096, Job: job})
		return err
	}
	for s := budget.StepID(1); s <= budget.HistorySteps+10; s++ {
		if err := begin(1, s); err != nil {
			t.Fatal(err)
		}
		e.EndJobStep(0, 1, s)
	}
	if err := begin(1, 3); !errors.Is(err, nic.ErrBadRequest) {
		t.Fatalf("job 1's forgotten step 3 again: %v, want refused", err)
	}
	if err := begin(2, 3); err != nil {
		t.Fatalf("job 2's step 3 after job 1 forgot its step 3: %v", err)
	}
	if err := begin(0, 3); err != nil {
		t.Fatalf("the default job's step 3: %v", err)
	}
	e.EndJobStep(0, 2, 3)
	if r, ok := e.JobStepRecord(2, 3); !ok || r.Open {
		t.Errorf("job 2's step 3 after its end: %+v %v, want closed", r, ok)
	}
	if r, ok := e.StepRecord(3); !ok || !r.Open {
		t.Errorf("the default job's step 3 after job 2 ended its own: %+v %v, want open", r, ok)
	}
	if n := len(e.JobSteps(2)); n != 1 {
		t.Errorf("job 2 lists %d steps, want 1", n)
	}
	e.ForgetJob(2)
	if _, ok := e.JobStepRecord(2, 3); ok || len(e.JobSteps(2)) != 0 {
		t.Error("job 2's step kept after ForgetJob")
	}
	e.ForgetJob(0)
	if _, ok := e.StepRecord(3); !ok {
		t.Error("ForgetJob(0) dropped the default job")
	}
}

// A host keeps at most MaxJobs jobs' ledgers: one more is refused by
// name, at its flow or its step, until one is forgotten.
func TestJobsBounded(t *testing.T) {
	e, err := nic.New(nicConfig(1))
	if err != nil {
		t.Fatal(err)
	}
	crit := true
	for j := nic.JobID(1); j < nic.MaxJobs; j++ {
		if _, err := e.BeginStep(0, nic.StepReq{Step: 1, Critical: &crit, Expected: 1, Job: j}); err != nil {
			t.Fatalf("job %d: %v", j, err)
		}
	}
	if _, err := e.BeginStep(0, nic.StepReq{Step: 1, Critical: &crit, Expected: 1, Job: nic.MaxJobs}); !errors.Is(err, nic.ErrBadRequest) {
		t.Fatalf("job %d, over MaxJobs: %v", nic.MaxJobs, err)
	}
	if err := e.CreateFlow(0, nic.FlowSpec{Peer: 2, ID: 1, Class: nic.ClassGradient, Job: nic.MaxJobs}); !errors.Is(err, nic.ErrBadRequest) {
		t.Fatalf("a flow of job %d, over MaxJobs: %v", nic.MaxJobs, err)
	}
	e.ForgetJob(1)
	if err := e.CreateFlow(0, nic.FlowSpec{Peer: 2, ID: 1, Class: nic.ClassGradient, Job: nic.MaxJobs}); err != nil {
		t.Fatalf("a flow of a new job once one was forgotten: %v", err)
	}
}

// A flow's gradient bytes count in its own job's ledger: an incast on job
// 7's flows into a non-critical step 4 of job 7 is forgiven within that
// step's budget and received or forgiven to the byte, while the default
// job's step 4, open at the same time, sees none of it.
func TestFlowBytesCountInTheirJob(t *testing.T) {
	s := newStar(t, 4, switchcore.TrimNDP, nil)
	const size = 2 << 20
	nonCritical, critical := false, true
	if _, err := s.nics[1].BeginStep(0, nic.StepReq{Step: 4, Critical: &nonCritical, Expected: 3 * size, Job: 7}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.nics[1].BeginStep(0, nic.StepReq{Step: 4, Critical: &critical, Expected: 3 * size}); err != nil {
		t.Fatal(err)
	}
	for i, h := range []uint16{2, 3, 4} {
		id := uint32(100 + i)
		if err := s.nics[1].CreateFlow(0, nic.FlowSpec{Peer: h, ID: id, Class: nic.ClassGradient, Job: 7}); err != nil {
			t.Fatal(err)
		}
		if err := s.nics[h].CreateFlow(0, nic.FlowSpec{Peer: 1, ID: id, Class: nic.ClassGradient}); err != nil {
			t.Fatal(err)
		}
		_, r := s.region(1, size, byte(0x80+i))
		if err := s.nics[1].PostRecv(nic.RecvReq{Key: nic.FlowKey{Peer: h, ID: id}, WR: uint64(i), Region: r, Length: size, Step: 4}); err != nil {
			t.Fatal(err)
		}
		_, sr := s.region(h, size, byte(i+1))
		if err := s.nics[h].PostSend(0, nic.SendReq{Key: nic.FlowKey{Peer: 1, ID: id}, WR: uint64(i), Region: sr, Length: size}); err != nil {
			t.Fatal(err)
		}
	}
	s.run(5*time.Second, s.recvDone(1, 3))
	rec, ok := s.nics[1].JobStepRecord(7, 4)
	if !ok || rec.Forgiven == 0 || rec.Forgiven > rec.Budget || rec.Received+rec.Forgiven != rec.Expected {
		t.Fatalf("job 7's step 4: %+v %v, want its incast received or forgiven within budget", rec, ok)
	}
	if def, ok := s.nics[1].StepRecord(4); !ok || def.Received != 0 || def.Forgiven != 0 || def.Trims != 0 {
		t.Fatalf("the default job's step 4: %+v %v, want untouched by job 7's bytes", def, ok)
	}
}
