package nicapi

import (
	"fmt"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/nic"
)

// The conversions between the host API's types and the NIC engine's, used
// by Host and by the daemon's metrics, so that every placement reads
// requests and reports completions, counters and ledgers the same way.

// ClassToNIC maps a host-API traffic class to the engine's.
func ClassToNIC(c hostapi.Class) (nic.Class, error) {
	switch c {
	case hostapi.ClassGradient:
		return nic.ClassGradient, nil
	case hostapi.ClassTensor:
		return nic.ClassTensor, nil
	case hostapi.ClassPipeline:
		return nic.ClassPipeline, nil
	case hostapi.ClassOther:
		return nic.ClassOther, nil
	}
	return 0, fmt.Errorf("%w: class %d", nic.ErrBadRequest, c)
}

// FlowSpecToNIC translates a create_flow request.
func FlowSpecToNIC(spec hostapi.FlowSpec) (nic.FlowSpec, error) {
	class, err := ClassToNIC(spec.Class)
	if err != nil {
		return nic.FlowSpec{}, err
	}
	return nic.FlowSpec{Peer: uint16(spec.Peer), ID: uint32(spec.Flow), Class: class,
		Entropy: nic.Entropy(spec.Entropy), Subflows: int(spec.Subflows)}, nil
}

// CheckWorkBounds refuses an offset or length the engine's int arithmetic
// must never see, before any lookup.
func CheckWorkBounds(offset, length uint64) error {
	if offset > 1<<40 || length > 1<<31 {
		return fmt.Errorf("%w: offset %d length %d", nic.ErrBounds, offset, length)
	}
	return nil
}

// CheckStepRequest refuses a begin_step the ledger cannot size.
func CheckStepRequest(req hostapi.StepReq) error {
	if req.ExpectedGradientBytes > budget.MaxStepBytes {
		return fmt.Errorf("%w: expected_gradient_bytes %d", nic.ErrBadRequest, req.ExpectedGradientBytes)
	}
	return nil
}

// PhaseToBudget maps a host-API phase to the ledger's.
func PhaseToBudget(p hostapi.Phase) (budget.Phase, error) {
	switch p {
	case hostapi.PhaseUnspecified:
		return budget.PhaseUnspecified, nil
	case hostapi.PhaseReduce:
		return budget.PhaseReduce, nil
	case hostapi.PhaseGather:
		return budget.PhaseGather, nil
	case hostapi.PhaseGatherOwner:
		return budget.PhaseGatherOwner, nil
	}
	return 0, fmt.Errorf("%w: phase %d", nic.ErrBadRequest, p)
}

// CompletionToAPI translates an engine completion for the client.
func CompletionToAPI(c nic.Completion) hostapi.Completion {
	out := hostapi.Completion{WRID: c.WR, Flow: hostapi.FlowID(c.Flow.ID), Len: uint64(c.Len),
		Step: uint64(c.Step), Status: hostapi.StatusOK, Kind: hostapi.KindSend}
	if c.Kind == nic.WorkRecv {
		out.Kind = hostapi.KindRecv
	}
	if c.Err != nil {
		out.Status, out.Err = hostapi.StatusError, c.Err.Error()
	}
	for _, r := range c.Forgiven {
		out.Forgiven = append(out.Forgiven, hostapi.Range{Start: uint64(r.Start), End: uint64(r.End)})
	}
	return out
}

// StepRecordToAPI translates one ledger record.
func StepRecordToAPI(r budget.StepRecord) hostapi.StepRecord {
	return hostapi.StepRecord{Step: uint64(r.Step), Critical: r.Critical, Classified: r.Classified, P: r.P,
		UnbudgetedBytes: r.UnbudgetedBytes, GatheredForgiven: r.GatheredForgiven,
		GatherRepairs: r.GatherRepairs, GatherRepairBytes: r.GatherRepairBytes,
		Expected: r.Expected, Budget: r.Budget, Received: r.Received, Forgiven: r.Forgiven,
		Outstanding: r.Outstanding, Open: r.Open, TrimmedBytes: r.TrimmedBytes, Trims: r.Trims,
		Forgives: r.Forgives, VestingRefusals: r.VestingRefusals, BudgetRefusals: r.BudgetRefusals,
		DrawRefusals: r.DrawRefusals, LateTrims: r.LateTrims, InvariantHeld: r.InvariantHeld,
		SpanNS: int64(r.Span), FirstFifthTrimmed: r.FirstFifthTrimmed, FirstFifthForgiven: r.FirstFifthForgiven,
		LastFifthTrimmed: r.LastFifthTrimmed, LastFifthForgiven: r.LastFifthForgiven,
		TrafficSpanNS: int64(r.TrafficSpan), TrafficFirstFifthTrimmed: r.TrafficFirstFifthTrimmed,
		TrafficFirstFifthForgiven: r.TrafficFirstFifthForgiven, TrafficLastFifthTrimmed: r.TrafficLastFifthTrimmed,
		TrafficLastFifthForgiven: r.TrafficLastFifthForgiven}
}

// HostCounters are the engine's counters, as the host API, forgivectl
// counters and Prometheus name them (hostapi.HostStats). The fields a
// driver's loop counts (wake-ups, batches, completions, sealing) are zero:
// the driver fills them.
func HostCounters(s nic.Stats) hostapi.HostStats {
	return hostapi.HostStats{
		RxPackets: s.RxPackets, RxBytes: s.RxBytes,
		TxPackets: s.TxPackets, TxBytes: s.TxBytes,
		Malformed: s.Malformed, Misdelivered: s.Misdelivered,
		UnknownFlow: s.UnknownFlow, Pauses: s.Pauses, FlowsFailed: s.FlowsFailed,
		PausesIgnored: s.PausesIgnored, PauseWatchdogFires: s.WatchdogFires,
		PausedNS: uint64(s.PausedTime), LongestPauseNS: uint64(s.LongestPause),
		WrongTag: s.WrongTag, StaleIncarnation: s.StaleIncarnation, StaleConnects: s.StaleConnects,
		AcceptsLimited:  s.AcceptsLimited,
		UnbudgetedBytes: s.UnbudgetedBytes,
	}
}

// FlowCounters are one flow's counters (hostapi.FlowStats).
func FlowCounters(r nic.FlowReport) hostapi.FlowStats {
	s, tx, cc := r.Stats, r.Sender, r.CC
	return hostapi.FlowStats{
		DataPackets: s.DataPackets, DataBytes: s.DataBytes,
		RetxPackets: s.RetxPackets, RetxBytes: s.RetxBytes,
		ProbesSent: s.ProbesSent, AcksRecv: s.AcksRecv, NacksRecv: s.NacksRecv,
		CNPsRecv: s.CNPsRecv, CNPsSent: s.CNPsSent,
		RecvPackets: s.RecvPackets, RecvBytes: s.RecvBytes,
		TrimmedRecv: s.TrimmedRecv, TrimmedBytes: s.TrimmedBytes,
		ForgivenBytes: s.ForgivenBytes, CEMarked: s.CEMarked, RNRDrops: s.RNRDrops,
		SendsDone: s.SendsDone, RecvsDone: s.RecvsDone,
		RTOs:             tx.RTOs,
		SpuriousRTOs:     tx.SpuriousRTOs,
		OutOfWindow:      r.Receiver.OutOfWindow,
		ConnectsSent:     s.ConnectsSent,
		AcceptsSent:      s.AcceptsSent,
		AcceptsLimited:   s.AcceptsLimited,
		WrongTag:         s.WrongTag,
		StaleIncarnation: s.StaleIncarnation,
		PeerRestarts:     s.PeerRestarts,
		RateCuts:         r.Ctrl.Cuts, // none for the line-rate baseline, which ignores every signal
		CNPsIgnored:      cc.CNPsIgnored,
		CNPsCoalesced:    r.Ctrl.CNPsCoalesced,
		ModeChanges:      cc.ModeChanges,
		ExhaustedChanges: cc.ExhaustedChanges,
		ReObeyed:         cc.ReObeyed,
		ReObeyNS:         uint64(cc.ReObeyTime / time.Nanosecond),
		ExemptNS:         uint64(cc.ExemptTime / time.Nanosecond),
		EverExempt:       b2u(cc.EverExempt),
		Exempt:           b2u(r.Mode.String() == "exempt"),
		RateBPS:          uint64(r.Rate),
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
