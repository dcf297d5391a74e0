package hostapi_test

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"testing"

	"pgregory.net/rapid"

	"github.com/forgive-emu/forgive/hostapi"
)

// The counters travel as JSON objects named as in docs/hostapi.md; these
// are version 1's names. Renaming one changes the wire and needs a new
// version.
var (
	v1HostCounters = []string{"rx_packets", "rx_bytes", "tx_packets", "tx_bytes", "malformed", "misdelivered",
		"unknown_flow", "pauses", "pauses_ignored", "pause_watchdog_fires", "paused_ns", "longest_pause_ns", "foreign_source", "wrong_tag", "stale_incarnation", "stale_connects", "accepts_limited", "flows_failed", "wakeups", "batches", "send_errors", "truncated",
		"completions", "lost_completions", "unbudgeted_bytes", "sealed", "opened", "opened_trimmed", "seal_errors", "refused_unsealed",
		"refused_unknown_domain", "refused_wrong_domain", "refused_header_tag", "refused_payload_tag",
		"refused_malformed_seal", "refused_replayed", "sender_starts", "socket_drops"}
	v1FlowCounters = []string{"data_packets", "data_bytes", "retx_packets", "retx_bytes", "probes_sent",
		"acks_recv", "nacks_recv", "cnps_recv", "cnps_sent", "recv_packets", "recv_bytes", "trimmed_recv",
		"trimmed_bytes", "forgiven_bytes", "ce_marked", "rnr_drops", "out_of_window", "connects_sent", "accepts_sent", "accepts_limited", "wrong_tag", "stale_incarnation", "peer_restarts", "sends_done", "recvs_done", "rtos", "spurious_rtos",
		"rate_cuts", "cnps_ignored", "cnps_coalesced", "mode_changes", "exhausted_changes", "reobeyed", "reobey_ns",
		"exempt_ns", "ever_exempt", "exempt", "rate_bps"}
)

func TestCounterNamesAreVersionOnes(t *testing.T) {
	for _, c := range []struct {
		v    any
		each func(func(string, uint64))
		want []string
	}{
		{hostapi.HostStats{}, hostapi.HostStats{}.Each, v1HostCounters},
		{hostapi.FlowStats{}, hostapi.FlowStats{}.Each, v1FlowCounters},
	} {
		b, err := json.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		var onWire map[string]uint64
		if err := json.Unmarshal(b, &onWire); err != nil {
			t.Fatal(err)
		}
		var named []string
		c.each(func(k string, _ uint64) { named = append(named, k) })
		if got := slices.Sorted(maps.Keys(onWire)); !slices.Equal(got, slices.Sorted(slices.Values(c.want))) {
			t.Errorf("%T travels as %v, want %v", c.v, got, c.want)
		}
		if !slices.Equal(named, c.want) {
			t.Errorf("%T.Each names %v, want %v", c.v, named, c.want)
		}
	}
}

// Each and Map report every field's value under its name.
func TestCountersByName(t *testing.T) {
	f := hostapi.FlowStats{DataBytes: 7, EverExempt: 1, RateBPS: 1e8}
	m := f.Map()
	if len(m) != len(v1FlowCounters) || m["data_bytes"] != 7 || m["ever_exempt"] != 1 || m["rate_bps"] != 1e8 || m["rtos"] != 0 {
		t.Fatalf("Map() = %v", m)
	}
	h := hostapi.HostStats{Malformed: 3, LostCompletions: 2}.Map()
	if h["malformed"] != 3 || h["lost_completions"] != 2 {
		t.Fatalf("Map() = %v", h)
	}
}

// Add sums every counter of a flow but the two that say what it is now,
// for any values; Retire counts the flow, and its exempt sums only if it
// was ever exempt.
func TestFlowStatsAddSumsEveryCounter(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var a, b hostapi.FlowStats
		av, bv := reflect.ValueOf(&a).Elem(), reflect.ValueOf(&b).Elem()
		for i := range av.NumField() {
			av.Field(i).SetUint(rapid.Uint64Range(0, 1<<40).Draw(t, "a"))
			bv.Field(i).SetUint(rapid.Uint64Range(0, 1<<40).Draw(t, "b"))
		}
		sum := a
		sum.Add(b)
		sv := reflect.ValueOf(sum)
		for i := range sv.NumField() {
			name := sv.Type().Field(i).Name
			want := av.Field(i).Uint() + bv.Field(i).Uint()
			if name == "Exempt" || name == "RateBPS" {
				want = av.Field(i).Uint()
			}
			if got := sv.Field(i).Uint(); got != want {
				t.Fatalf("%s: %d + %d gave %d, want %d", name, av.Field(i).Uint(), bv.Field(i).Uint(), got, want)
			}
		}
		var r hostapi.FlowSums
		b.EverExempt = uint64(rapid.IntRange(0, 1).Draw(t, "ever exempt"))
		r.AddFlow(b)
		// Merging two sums is summing their flows.
		a.EverExempt, a.ReObeyed = 1, 1
		var ra, both hostapi.FlowSums
		ra.AddFlow(a)
		both.AddFlow(a)
		both.AddFlow(b)
		merged := ra
		merged.Merge(r)
		if merged != both {
			t.Fatalf("merged %+v, want %+v", merged, both)
		}
		exempt := b.EverExempt == 1
		if r.Flows != 1 || r.All.DataBytes != b.DataBytes || (r.Exempt.DataBytes == b.DataBytes) != (exempt || b.DataBytes == 0) ||
			r.ReObeyedFlows != map[bool]uint64{true: 1}[exempt && b.ReObeyed > 0] {
			t.Fatalf("retired %+v from a flow ever exempt %v", r, exempt)
		}
	})
}
