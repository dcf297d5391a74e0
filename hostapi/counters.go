package hostapi

import (
	"reflect"
	"strings"
)

// HostStats are a daemon's host-wide counters: its NIC engine's and its
// loop's. The JSON names are the counters' names everywhere: the counters
// reply, forgivectl counters and the daemon's Prometheus label
// forgived_host{counter=...}.
type HostStats struct {
	RxPackets          uint64 `json:"rx_packets"`
	RxBytes            uint64 `json:"rx_bytes"`
	TxPackets          uint64 `json:"tx_packets"`
	TxBytes            uint64 `json:"tx_bytes"`
	Malformed          uint64 `json:"malformed"`            // datagrams the engine could not decode
	Misdelivered       uint64 `json:"misdelivered"`         // addressed to another host
	UnknownFlow        uint64 `json:"unknown_flow"`         // for no flow of this host
	Pauses             uint64 `json:"pauses"`               // PFC PAUSE frames received from the switch
	PausesIgnored      uint64 `json:"pauses_ignored"`       // in the PAUSE watchdog's recovery
	PauseWatchdogFires uint64 `json:"pause_watchdog_fires"` // pauses the watchdog ended
	PausedNS           uint64 `json:"paused_ns"`            // data paused by PFC, in all
	LongestPauseNS     uint64 `json:"longest_pause_ns"`     // the longest continuous pause: at most the watchdog's limit
	ForeignSource      uint64 `json:"foreign_source"`       // refused: not from the switch neighbour
	WrongTag           uint64 `json:"wrong_tag"`            // refused: destination tag not the flow's own
	StaleIncarnation   uint64 `json:"stale_incarnation"`    // refused: source tag of another peer incarnation
	StaleConnects      uint64 `json:"stale_connects"`       // of them, CONNECTs of an earlier peer incarnation: no restart
	AcceptsLimited     uint64 `json:"accepts_limited"`      // CONNECTs unanswered: over a flow's ACCEPT rate limit
	FlowsFailed        uint64 `json:"flows_failed"`         // flows failed (peer unreachable)
	Wakeups            uint64 `json:"wakeups"`              // loop wake-ups
	Batches            uint64 `json:"batches"`              // non-empty socket reads
	SendErrors         uint64 `json:"send_errors"`          // datagrams the socket refused
	Truncated          uint64 `json:"truncated"`            // datagrams longer than a packet
	Completions        uint64 `json:"completions"`          // delivered to clients
	LostCompletions    uint64 `json:"lost_completions"`     // for a client that was gone
	UnbudgetedBytes    uint64 `json:"unbudgeted_bytes"`     // gradient bytes that arrived before their step was opened

	// The security sublayer (docs/security.md): sealed on sending, opened
	// on receipt (opened_trimmed: trimmed headers authenticated by their
	// header tag), not sealable, and refused by reason.
	Sealed               uint64 `json:"sealed"`
	Opened               uint64 `json:"opened"`
	OpenedTrimmed        uint64 `json:"opened_trimmed"`
	SealErrors           uint64 `json:"seal_errors"`
	RefusedUnsealed      uint64 `json:"refused_unsealed"`       // plain, where a key is required
	RefusedUnknownDomain uint64 `json:"refused_unknown_domain"` // sealed for a domain this host has no key for
	RefusedWrongDomain   uint64 `json:"refused_wrong_domain"`   // sealed for another domain than its source host's
	RefusedHeaderTag     uint64 `json:"refused_header_tag"`     // header, domain, nonce or header tag not authentic
	RefusedPayloadTag    uint64 `json:"refused_payload_tag"`    // payload or payload tag not authentic
	RefusedMalformedSeal uint64 `json:"refused_malformed_seal"` // sealed framing cut short or extended
	RefusedReplayed      uint64 `json:"refused_replayed"`       // a nonce opened before, too old, or of an earlier start of its sender
	SenderStarts         uint64 `json:"sender_starts"`          // sender starts first heard from: one per peer, and one per restart of a peer

	// SocketDrops are the datagrams the kernel dropped at the daemon's
	// socket before the daemon read them: a full receive buffer
	// (SO_MEMINFO's sk_drops, /proc/net/udp's drops column). Losses the
	// emulated fabric does not model.
	SocketDrops uint64 `json:"socket_drops"`
}

// FlowStats are one flow's counters, at both of its ends (a flow sends
// and receives). The JSON names are the counters' names everywhere: the
// counters reply, forgivectl counters, the daemon's Prometheus label
// forgived_flow{counter=...} and the lab's records.
type FlowStats struct {
	DataPackets   uint64 `json:"data_packets"`
	DataBytes     uint64 `json:"data_bytes"`
	RetxPackets   uint64 `json:"retx_packets"`
	RetxBytes     uint64 `json:"retx_bytes"`
	ProbesSent    uint64 `json:"probes_sent"`
	AcksRecv      uint64 `json:"acks_recv"`
	NacksRecv     uint64 `json:"nacks_recv"`
	CNPsRecv      uint64 `json:"cnps_recv"`
	CNPsSent      uint64 `json:"cnps_sent"`
	RecvPackets   uint64 `json:"recv_packets"`
	RecvBytes     uint64 `json:"recv_bytes"`
	TrimmedRecv   uint64 `json:"trimmed_recv"`
	TrimmedBytes  uint64 `json:"trimmed_bytes"`
	ForgivenBytes uint64 `json:"forgiven_bytes"`
	CEMarked      uint64 `json:"ce_marked"`
	RNRDrops      uint64 `json:"rnr_drops"`
	OutOfWindow   uint64 `json:"out_of_window"` // data refused: PSN outside the receive window
	// Flow identity (docs/security.md): handshake packets, and packets
	// refused at the tag check, which comes before any other.
	ConnectsSent     uint64 `json:"connects_sent"`
	AcceptsSent      uint64 `json:"accepts_sent"`
	AcceptsLimited   uint64 `json:"accepts_limited"` // CONNECTs unanswered: over the ACCEPT rate limit
	WrongTag         uint64 `json:"wrong_tag"`
	StaleIncarnation uint64 `json:"stale_incarnation"`
	PeerRestarts     uint64 `json:"peer_restarts"` // new peer incarnations this end rebound to
	SendsDone        uint64 `json:"sends_done"`
	RecvsDone        uint64 `json:"recvs_done"`
	RTOs             uint64 `json:"rtos"`
	// SpuriousRTOs are the timeouts found spurious: the originals were
	// late, not lost (forgived's reliability.spurious_rto).
	SpuriousRTOs uint64 `json:"spurious_rtos"`
	// RateCuts are the sender's rate decreases; none for the line-rate
	// baseline, which ignores every signal.
	RateCuts         uint64 `json:"rate_cuts"`
	CNPsIgnored      uint64 `json:"cnps_ignored"`      // while exempt
	CNPsCoalesced    uint64 `json:"cnps_coalesced"`    // within the rate-reduce period of the last cut: no cut
	ModeChanges      uint64 `json:"mode_changes"`      // obey <-> exempt
	ExhaustedChanges uint64 `json:"exhausted_changes"` // budget-exhausted flag flips seen
	ReObeyed         uint64 `json:"reobeyed"`          // exempt periods ended by exhaustion
	ReObeyNS         uint64 `json:"reobey_ns"`         // time obeying again after exhaustion
	ExemptNS         uint64 `json:"exempt_ns"`         // time exempt
	EverExempt       uint64 `json:"ever_exempt"`       // 1 if the flow was ever exempt
	Exempt           uint64 `json:"exempt"`            // 1 if the flow is exempt now
	RateBPS          uint64 `json:"rate_bps"`          // the sender's current rate
}

// Each calls f with every counter's name and value, in declaration order.
func (s HostStats) Each(f func(name string, v uint64)) { each(s, f) }

// Each calls f with every counter's name and value, in declaration order.
func (s FlowStats) Each(f func(name string, v uint64)) { each(s, f) }

// Map returns the counters by name.
func (s FlowStats) Map() map[string]uint64 { return toMap(s.Each) }

// Map returns the counters by name.
func (s HostStats) Map() map[string]uint64 { return toMap(s.Each) }

func toMap(each func(func(string, uint64))) map[string]uint64 {
	m := map[string]uint64{}
	each(func(k string, v uint64) { m[k] = v })
	return m
}

// each walks a struct of uint64 counters by their JSON names.
func each(s any, f func(name string, v uint64)) {
	v := reflect.ValueOf(s)
	t := v.Type()
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		f(name, v.Field(i).Uint())
	}
}

// Add adds o's counters to s, all but the two that say what a flow is now
// (Exempt, RateBPS), which a sum of flows does not have: EverExempt then
// counts the flows that were ever exempt.
func (s *FlowStats) Add(o FlowStats) {
	v, w := reflect.ValueOf(s).Elem(), reflect.ValueOf(o)
	t := v.Type()
	for i := range t.NumField() {
		switch t.Field(i).Name {
		case "Exempt", "RateBPS":
			continue
		}
		v.Field(i).SetUint(v.Field(i).Uint() + w.Field(i).Uint())
	}
}

// FlowSums sums the counters of several flows: those a client destroyed
// (Counters.Retired, each read as it was destroyed, so that a client
// whose flows come and go, a flow per message, still accounts for every
// packet its flows sent), or any set a reader totals.
type FlowSums struct {
	Flows uint64 `json:"flows"` // flows summed
	// All sums every flow's counters; Exempt those of the flows that were
	// ever exempt, of which ReObeyedFlows obeyed congestion control again
	// at least once.
	All           FlowStats `json:"all"`
	Exempt        FlowStats `json:"exempt"`
	ReObeyedFlows uint64    `json:"reobeyed_flows"`
}

// AddFlow adds one flow's counters.
func (r *FlowSums) AddFlow(s FlowStats) {
	r.Flows++
	r.All.Add(s)
	if s.EverExempt > 0 {
		r.Exempt.Add(s)
		if s.ReObeyed > 0 {
			r.ReObeyedFlows++
		}
	}
}

// Merge adds the flows o sums.
func (r *FlowSums) Merge(o FlowSums) {
	r.Flows += o.Flows
	r.All.Add(o.All)
	r.Exempt.Add(o.Exempt)
	r.ReObeyedFlows += o.ReObeyedFlows
}
