package lab

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/forgive-emu/forgive/hostapi"
	"github.com/forgive-emu/forgive/lab/results"
	"github.com/forgive-emu/forgive/workload"
)

// The payload modes of Options.PayloadFree.
const (
	PayloadsAuto = "auto" // payload-free when the registered memory would not fit (the default)
	PayloadsOn   = "on"   // payload-free
	PayloadsOff  = "off"  // every byte real
)

// payloadShare is the share of the machine's memory a sweep's runs may
// register before the auto mode goes payload-free (divided among the
// runs of a parallel sweep): the rest is the engines' and the recorder's.
const payloadShare = 0.5

// The checks a run can make, as results.json names them (Run.Checks).
const (
	checkBudget     = "budget_invariants"     // every step's ledger at every rank
	checkCompletion = "completions"           // every work request completed without error
	checkAccounting = "message_accounting"    // every message completed whole, nothing forgiven outside gradients
	checkSums       = "gradient_sums"         // every element no loss touched is the exact sum
	checkNonGrad    = "nongradient_bytes"     // tensor, pipeline and burst bytes arrived as sent
	checkInTime     = "budget_opened_in_time" // no gradient byte reached a rank before its step was opened
	checkReplicas   = "replicas_identical"    // every rank ended every step with the same gradient
)

// choosePayloads decides whether the runs carry payload bytes. Only the
// simulator can run without them: the daemons' regions are memory.
func (p *prepared) choosePayloads(hosts []hostapi.HostID, memTotal func() (int64, error)) error {
	need, err := p.workloadConfig(p.policies[0], 1).RegisteredBytes(hosts)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInput, err)
	}
	p.registered = need
	mode := p.opts.PayloadFree
	if mode == "" {
		mode = PayloadsAuto
	}
	switch mode {
	case PayloadsOff:
		return nil
	case PayloadsOn:
		if !p.sim {
			return fmt.Errorf("%w: --payload-free on needs --placement %s: the daemons' regions are memory", ErrInput, PlacementSim)
		}
		p.payloadFree = true
		return nil
	case PayloadsAuto:
	default:
		return fmt.Errorf("%w: --payload-free %q: want %s, %s or %s", ErrInput, mode, PayloadsAuto, PayloadsOn, PayloadsOff)
	}
	if !p.sim {
		return nil
	}
	total, err := memTotal()
	if err != nil {
		return nil // nothing known of the machine: keep every byte real
	}
	// Parallel runs (--jobs) share the machine.
	p.payloadFree = float64(need) > payloadShare*float64(total)/float64(max(1, p.opts.Jobs))
	return nil
}

// machineMemory is the machine's memory in bytes (MemTotal of
// /proc/meminfo).
func machineMemory() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok || name != "MemTotal" {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/meminfo: MemTotal %q: %w", rest, err)
		}
		return kb << 10, nil
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("/proc/meminfo: no MemTotal")
}

// checks fills what a run checked and whether each held, from the
// workload's result.
func checks(run *results.Run, pol Policy, res *workload.Result, payloadFree bool) {
	run.PayloadFree = payloadFree
	run.Checks = []string{checkBudget, checkCompletion, checkAccounting, checkInTime}
	run.MessageAccountingHeld = res.GradientMessagesWhole && res.NonGradientExact
	run.GradientSumsExact = res.DataChecked && res.Mismatches == 0
	run.NonGradientBytesExact = res.DataChecked && res.NonGradientExact
	run.ReplicaMismatches = res.ReplicaMismatches
	run.ReplicasIdentical = res.DataChecked && res.ReplicaMismatches == 0
	if res.DataChecked {
		run.Checks = append(run.Checks, checkSums, checkNonGrad)
		if pol.ReplicasIdentical() {
			run.Checks = append(run.Checks, checkReplicas)
		}
	}
}
