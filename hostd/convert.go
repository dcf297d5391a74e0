package hostd

import (
	"fmt"
	"time"

	"github.com/forgive-emu/forgive/budget"
	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/nic"
)

// The conversions between the host API's types and the NIC engine's. The
// daemon's backend uses them, and so does every other host-API
// implementation over a nic.Engine (the lab's in-process port for the
// simulator), so both read requests and report completions, counters and
// ledgers the same way.

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
		out.Forgiven = append(out.Forgiven, hostapi.Range{Off: uint64(r.Off), Len: uint64(r.Len)})
	}
	return out
}

// StepRecordToAPI translates one ledger record.
func StepRecordToAPI(r budget.StepRecord) hostapi.StepRecord {
	return hostapi.StepRecord{Step: uint64(r.Step), Critical: r.Critical, P: r.P,
		Expected: r.Expected, Budget: r.Budget, Received: r.Received, Forgiven: r.Forgiven,
		Outstanding: r.Outstanding, Open: r.Open, TrimmedBytes: r.TrimmedBytes, Trims: r.Trims,
		Forgives: r.Forgives, VestingRefusals: r.VestingRefusals, BudgetRefusals: r.BudgetRefusals,
		DrawRefusals: r.DrawRefusals, LateTrims: r.LateTrims, InvariantHeld: r.InvariantHeld}
}

// HostCounters names the engine's and the loop's counters; the same names
// appear in forgivectl counters and, prefixed, in Prometheus.
func HostCounters(s nic.Stats, l LoopStats) map[string]uint64 {
	return map[string]uint64{
		"rx_packets": s.RxPackets, "rx_bytes": s.RxBytes,
		"tx_packets": s.TxPackets, "tx_bytes": s.TxBytes,
		"malformed": s.Malformed, "misdelivered": s.Misdelivered,
		"unknown_flow": s.UnknownFlow, "pauses": s.Pauses, "flows_failed": s.FlowsFailed,
		"wakeups": l.Wakeups, "batches": l.Batches, "send_errors": l.SendErrors,
		"truncated": l.Truncated, "completions": l.Completions, "lost_completions": l.LostComplete,
	}
}

// FlowCounters names one flow's counters.
func FlowCounters(r nic.FlowReport) map[string]uint64 {
	s, tx, cc := r.Stats, r.Sender, r.CC
	exempt := uint64(0)
	if r.Mode.String() == "exempt" {
		exempt = 1
	}
	return map[string]uint64{
		"data_packets": s.DataPackets, "data_bytes": s.DataBytes,
		"retx_packets": s.RetxPackets, "retx_bytes": s.RetxBytes,
		"probes_sent": s.ProbesSent, "acks_recv": s.AcksRecv, "nacks_recv": s.NacksRecv,
		"cnps_recv": s.CNPsRecv, "cnps_sent": s.CNPsSent,
		"recv_packets": s.RecvPackets, "recv_bytes": s.RecvBytes,
		"trimmed_recv": s.TrimmedRecv, "trimmed_bytes": s.TrimmedBytes,
		"forgiven_bytes": s.ForgivenBytes, "ce_marked": s.CEMarked, "rnr_drops": s.RNRDrops,
		"sends_done": s.SendsDone, "recvs_done": s.RecvsDone,
		"rtos":              tx.RTOs,
		"rate_cuts":         r.Ctrl.Cuts, // none for the line-rate baseline, which ignores every signal
		"cnps_ignored":      cc.CNPsIgnored,
		"mode_changes":      cc.ModeChanges,
		"exhausted_changes": cc.ExhaustedChanges,
		"reobeyed":          cc.ReObeyed,
		"reobey_ns":         uint64(cc.ReObeyTime / time.Nanosecond),
		"exempt_ns":         uint64(cc.ExemptTime / time.Nanosecond),
		"ever_exempt":       b2u(cc.EverExempt),
		"exempt":            exempt,
		"rate_bps":          uint64(r.Rate),
	}
}

func b2u(b bool) uint64 {
	if b {
		return 1
	}
	return 0
}
