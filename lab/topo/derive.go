package topo

import (
	"errors"
	"fmt"
	"math/big"
	"sort"
	"strconv"
	"strings"

	"github.com/forgive-emu/forgive/congestion"
	"github.com/forgive-emu/forgive/internal/units"
	"github.com/forgive-emu/forgive/nic"
	"github.com/forgive-emu/forgive/trimswitchdrv"
	"github.com/forgive-emu/forgive/wire"
)

// Wire sizes the derivations and the RTT estimate count: the wire
// package's and the NIC's own.
const (
	dataHeaderBytes = wire.DataLen // the header of a data packet (and a trimmed one)
	ackBytes        = wire.AckLen
	// FrameOverhead is the framing a link counts per packet on top of the
	// datagram: Ethernet header, FCS, preamble and gap (38) plus IPv4 (20)
	// and UDP (8), nic.DefaultOverhead. Switch ports count the same as
	// the NIC's pacer, so a host at line rate never outruns its port.
	FrameOverhead = nic.DefaultOverhead
	// MinWindowPackets is the least window: below four packets one late
	// ACK stalls the flow and no queue ever forms for ECN to see.
	MinWindowPackets = 4
	// MinQueuePackets is the least data queue a derivation may produce.
	MinQueuePackets = 4
)

// Params are the emulated parameters a profile derives, with the inputs
// they came from.
type Params struct {
	Ref RefSummary // the reference fabric's scale

	LineRate   units.Rate
	MTU        int
	BaseRTT    units.Duration
	BDP        units.Size // LineRate x BaseRTT
	LinkDelay  LinkDelay
	HopLatency units.Duration
	FailAfter  units.Duration
	// SpuriousRTO is every host's reliability.spurious_rto.
	SpuriousRTO bool
	// SocketBuffer is every switch port's socket buffer; zero: the
	// switch's default.
	SocketBuffer units.Size
	// Scale is emulation / reference for time, rate and bytes (BDP).
	Scale struct{ Time, Rate, Bytes float64 }

	Switch      SwitchParams
	DCQCN       DCQCNParams
	CNPInterval units.Duration
	Reliability ReliabilityParams

	Pinned []string // the names the profile's overrides set, in file order
}

// RefSummary is the reference fabric's link, RTT and BDP.
type RefSummary struct {
	LineRate units.Rate
	BaseRTT  units.Duration
	MTU      int
	BDP      units.Size
}

// SwitchParams are every switch port's settings.
type SwitchParams struct {
	DataQueue units.Size
	ECN       ECNParams
	Trim      trimswitchdrv.TrimMode
	Overhead  units.Size
}

// ECNParams is a RED ramp: no mark at or below KMin, PMax at KMax, always
// above.
type ECNParams struct {
	KMin, KMax units.Size
	PMax       Fraction
}

// DCQCNParams is forgived's dcqcn section.
type DCQCNParams struct {
	G                  Fraction
	F                  int
	AlphaTimer         units.Duration
	RateTimer          units.Duration
	ByteCounter        units.Size
	RAI, RHAI, MinRate units.Rate
	RateReducePeriod   units.Duration
	// Variant and ClampTargetRate are the reference's, unscaled; they are
	// not overridable, and Derived prints them only for the mellanox
	// variant.
	Variant         congestion.DCQCNVariant
	ClampTargetRate bool
}

// ReliabilityParams is forgived's reliability section, but the mode.
type ReliabilityParams struct {
	// Window is every flow's window; under PairBDP it stays the
	// profile-wide one (the ACK coalescing and checks derive from it)
	// and each host pair's flows take WindowBDP times their pair's BDP.
	Window    units.Size
	PairBDP   bool
	WindowBDP Fraction
	// RateScaled scales each flow's window by its rate (window_scale
	// rate).
	RateScaled bool
	RTOLow     units.Duration
	RTOHigh    units.Duration
	AckEvery   units.Size
	AckDelay   units.Duration
}

// namedValue is one overridable derived value.
type namedValue struct {
	name string
	ptr  any // *units.Size, *units.Duration, *units.Rate, *Fraction, *int or *trimswitchdrv.TrimMode
}

// table names every derived value. The names are the keys of a profile's
// overrides and of Derived; they follow the daemons' configuration paths.
func (p *Params) table() []namedValue {
	return []namedValue{
		{"switch.data_queue", &p.Switch.DataQueue},
		{"switch.ecn.kmin", &p.Switch.ECN.KMin},
		{"switch.ecn.kmax", &p.Switch.ECN.KMax},
		{"switch.ecn.pmax", &p.Switch.ECN.PMax},
		{"switch.trim", &p.Switch.Trim},
		{"dcqcn.g", &p.DCQCN.G},
		{"dcqcn.f", &p.DCQCN.F},
		{"dcqcn.alpha_timer", &p.DCQCN.AlphaTimer},
		{"dcqcn.rate_timer", &p.DCQCN.RateTimer},
		{"dcqcn.byte_counter", &p.DCQCN.ByteCounter},
		{"dcqcn.rai", &p.DCQCN.RAI},
		{"dcqcn.rhai", &p.DCQCN.RHAI},
		{"dcqcn.min_rate", &p.DCQCN.MinRate},
		{"dcqcn.rate_reduce_period", &p.DCQCN.RateReducePeriod},
		{"cnp_interval", &p.CNPInterval},
		{"reliability.window", &p.Reliability.Window},
		{"reliability.rto_low", &p.Reliability.RTOLow},
		{"reliability.rto_high", &p.Reliability.RTOHigh},
		{"reliability.ack_every", &p.Reliability.AckEvery},
		{"reliability.ack_delay", &p.Reliability.AckDelay},
	}
}

// OverridableNames lists the names a profile's overrides may set.
func OverridableNames() []string {
	var p Params
	var names []string
	for _, v := range p.table() {
		names = append(names, v.name)
	}
	return names
}

// Derive scales the reference to the emulation target by the rules of
// docs/profiles.md and applies the overrides. Every problem names the
// derived value or override at fault.
func Derive(ref Reference, emu Emulation, ov Overrides) (Params, error) {
	emu.setDefaults()
	p := Params{
		Ref:      RefSummary{ref.LineRate, ref.BaseRTT, ref.MTU, bdp(ref.LineRate, ref.BaseRTT)},
		LineRate: emu.LineRate, MTU: emu.MTU, BaseRTT: emu.BaseRTT,
		BDP:       bdp(emu.LineRate, emu.BaseRTT),
		LinkDelay: *emu.LinkDelay, HopLatency: emu.HopLatency, FailAfter: emu.FailAfter,
		SocketBuffer: emu.SocketBuffer, SpuriousRTO: emu.SpuriousRTO,
	}
	// ParseProfile has checked these; a direct caller may not have, and
	// the rules divide by them.
	if ref.LineRate <= 0 || ref.BaseRTT <= 0 || ref.DataQueue <= 0 || ref.MTU <= 0 || emu.LineRate <= 0 || emu.BaseRTT <= 0 || emu.MTU <= 0 {
		return p, (problems{errors.New("link_rate, base_rtt and mtu of both sections, and reference.data_queue, must be positive")}).err(ErrProfile)
	}
	d := deriver{p: &p, ov: ov, used: map[string]bool{}}
	s := scales{
		time: ratio(int64(emu.BaseRTT), int64(ref.BaseRTT)),
		rate: ratio(int64(emu.LineRate), int64(ref.LineRate)),
	}
	s.bytes = new(big.Rat).Mul(s.time, s.rate)
	p.Scale.Time, _ = s.time.Float64()
	p.Scale.Rate, _ = s.rate.Float64()
	p.Scale.Bytes, _ = s.bytes.Float64()

	d.switchParams(ref, s)
	d.dcqcn(ref, s)
	d.reliability(ref, s)
	d.unknownOverrides()
	if len(d.probs) == 0 {
		p.check(&d.probs)
	}
	return p, d.probs.err(ErrProfile)
}

// scales are emulation / reference.
type scales struct{ time, rate, bytes *big.Rat }

// deriver applies overrides as values are derived, so a value derived
// from a pinned one (ECN thresholds from the buffer, ack_every from the
// window) follows the pinned value.
type deriver struct {
	p     *Params
	ov    Overrides
	used  map[string]bool
	probs problems
}

// Buffer in BDPs; ECN thresholds at the same fraction of the buffer.
func (d *deriver) switchParams(ref Reference, s scales) {
	sw := &d.p.Switch
	sw.Overhead = FrameOverhead
	sw.DataQueue = units.Size(mulRound(int64(ref.DataQueue), s.bytes))
	d.pin("switch.data_queue")
	ofBuffer := ratio(int64(sw.DataQueue), int64(ref.DataQueue))
	sw.ECN.KMin = units.Size(mulRound(int64(ref.ECN.KMin), ofBuffer))
	d.pin("switch.ecn.kmin")
	sw.ECN.KMax = units.Size(mulRound(int64(ref.ECN.KMax), ofBuffer))
	d.pin("switch.ecn.kmax")
	sw.ECN.PMax = ref.ECN.PMax
	d.pin("switch.ecn.pmax")
	if ref.Trim != nil {
		sw.Trim = *ref.Trim
	}
	d.pin("switch.trim")
}

// Timers relative to the RTT, the byte counter relative to the BDP, rate
// steps relative to the link rate; g and F are pure numbers.
func (d *deriver) dcqcn(ref Reference, s scales) {
	dc, r := &d.p.DCQCN, ref.DCQCN
	dc.G = r.G
	d.pin("dcqcn.g")
	if r.F != nil {
		dc.F = *r.F
	}
	d.pin("dcqcn.f")
	dc.AlphaTimer = scaleDuration(r.AlphaTimer, s.time)
	d.pin("dcqcn.alpha_timer")
	dc.RateTimer = scaleDuration(r.RateTimer, s.time)
	d.pin("dcqcn.rate_timer")
	dc.ByteCounter = units.Size(mulRound(int64(r.ByteCounter), s.bytes))
	d.pin("dcqcn.byte_counter")
	dc.RAI = ofRate(d.p.LineRate, r.RAI)
	d.pin("dcqcn.rai")
	dc.RHAI = ofRate(d.p.LineRate, r.RHAI)
	d.pin("dcqcn.rhai")
	dc.MinRate = ofRate(d.p.LineRate, r.MinRate)
	d.pin("dcqcn.min_rate")
	d.p.CNPInterval = scaleDuration(ref.CNPInterval, s.time)
	d.pin("cnp_interval")
	rrp := r.RateReducePeriod
	if rrp == 0 {
		rrp = units.Duration(congestion.DefaultRateReducePeriod)
	}
	dc.RateReducePeriod = scaleDuration(rrp, s.time)
	d.pin("dcqcn.rate_reduce_period")
	dc.Variant, dc.ClampTargetRate = r.variant(), r.ClampTargetRate
}

// The window in BDPs (whole packets, at least MinWindowPackets); ACK
// coalescing at the same fraction of the window (whole packets, at least
// one); RTOs and the ACK delay relative to the RTT.
func (d *deriver) reliability(ref Reference, s scales) {
	rel, r := &d.p.Reliability, ref.Reliability
	rel.Window = window(r.WindowBDP, d.p.BDP, d.p.MTU)
	d.pin("reliability.window")
	rel.PairBDP, rel.WindowBDP = r.WindowMode == WindowPairBDP, r.WindowBDP
	rel.RateScaled = r.WindowScale == WindowScaleRate
	refWindow := window(r.WindowBDP, d.p.Ref.BDP, ref.MTU)
	ackPackets := mulRound(int64(r.AckEvery), ratio(int64(rel.Window), int64(refWindow)*int64(d.p.MTU)))
	rel.AckEvery = units.Size(max(ackPackets, 1) * int64(d.p.MTU))
	d.pin("reliability.ack_every")
	rel.RTOLow = scaleDuration(r.RTOLow, s.time)
	d.pin("reliability.rto_low")
	rel.RTOHigh = scaleDuration(r.RTOHigh, s.time)
	d.pin("reliability.rto_high")
	rel.AckDelay = scaleDuration(r.AckDelay, s.time)
	d.pin("reliability.ack_delay")
}

// pin replaces the value called name by the profile's override, if any.
func (d *deriver) pin(name string) {
	for _, o := range d.ov {
		if o.Name != name {
			continue
		}
		d.used[name] = true
		d.p.Pinned = append(d.p.Pinned, name)
		if err := setValue(d.p.lookup(name), o.Value); err != nil {
			d.probs.wrap("overrides."+name, err)
		}
	}
}

func (d *deriver) unknownOverrides() {
	for _, o := range d.ov {
		if !d.used[o.Name] {
			d.probs.add("overrides."+o.Name, "not a derived value (known: %s)", strings.Join(OverridableNames(), ", "))
		}
	}
}

func (p *Params) lookup(name string) any {
	for _, v := range p.table() {
		if v.name == name {
			return v.ptr
		}
	}
	panic("topo: no derived value named " + name) // a typo in this package
}

// setValue parses s as the kind ptr points to.
func setValue(ptr any, s string) error {
	switch v := ptr.(type) {
	case *units.Size:
		n, err := units.ParseSize(s)
		*v = units.Size(n)
		return err
	case *units.Rate:
		n, err := units.ParseRate(s)
		*v = units.Rate(n)
		return err
	case *units.Duration:
		n, err := units.ParseDuration(s)
		*v = units.Duration(n)
		return err
	case *Fraction:
		f, err := ParseFraction(s)
		*v = f
		return err
	case *int:
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil {
			return fmt.Errorf("%q: want an integer", s)
		}
		*v = n
		return nil
	case *trimswitchdrv.TrimMode:
		m, err := trimswitchdrv.ParseTrimMode(s)
		if err != nil {
			return fmt.Errorf("%q: %w", s, err)
		}
		*v = m
		return nil
	}
	panic(fmt.Sprintf("topo: derived value of type %T", ptr))
}

// show prints a derived value as its override would be written.
func show(ptr any) string {
	switch v := ptr.(type) {
	case *units.Size:
		return v.String()
	case *units.Rate:
		return v.String()
	case *units.Duration:
		return v.String()
	case *Fraction:
		return v.String()
	case *int:
		return strconv.Itoa(*v)
	case *trimswitchdrv.TrimMode:
		return v.String()
	}
	return fmt.Sprint(ptr)
}

// check refuses derived (or pinned) values the daemons would accept but
// that make no sense: each problem names the value and what to change.
func (p *Params) check(probs *problems) {
	const hint = "raise emulation.base_rtt or emulation.link_rate, or pin it in overrides"
	packet := units.Size(p.MTU + dataHeaderBytes)
	sw := p.Switch
	if sw.DataQueue < MinQueuePackets*packet {
		probs.add("switch.data_queue", "%v holds fewer than %d packets of %v (%s)", sw.DataQueue, MinQueuePackets, packet, hint)
	}
	if sw.ECN.KMax < sw.ECN.KMin {
		probs.add("switch.ecn.kmax", "%v is below kmin %v", sw.ECN.KMax, sw.ECN.KMin)
	}
	if sw.ECN.KMax > sw.DataQueue {
		probs.add("switch.ecn.kmax", "%v is above the data queue %v: marking would never reach its maximum", sw.ECN.KMax, sw.DataQueue)
	}
	probability(probs, "switch.ecn.pmax", sw.ECN.PMax, false)
	p.checkDCQCN(probs, hint)
	rel := p.Reliability
	if rel.Window < units.Size(p.MTU) {
		probs.add("reliability.window", "%v is less than one %d-byte packet", rel.Window, p.MTU)
	}
	if rel.AckEvery > rel.Window {
		probs.add("reliability.ack_every", "%v exceeds the window %v: the sender would stall waiting for an ACK", rel.AckEvery, rel.Window)
	}
	if rel.AckEvery <= 0 {
		probs.add("reliability.ack_every", "must be positive")
	}
	if rel.RTOLow < p.BaseRTT {
		probs.add("reliability.rto_low", "%v is below the base RTT %v: every packet would time out", rel.RTOLow, p.BaseRTT)
	}
	if rel.RTOHigh < rel.RTOLow {
		probs.add("reliability.rto_high", "%v is below rto_low %v", rel.RTOHigh, rel.RTOLow)
	}
	if rel.AckDelay <= 0 {
		probs.add("reliability.ack_delay", "rounds to zero (%s)", hint)
	}
}

func (p *Params) checkDCQCN(probs *problems, hint string) {
	dc := p.DCQCN
	probability(probs, "dcqcn.g", dc.G, false)
	if dc.F < 0 {
		probs.add("dcqcn.f", "%d: must not be negative", dc.F)
	}
	for _, t := range []struct {
		name string
		v    units.Duration
	}{{"dcqcn.alpha_timer", dc.AlphaTimer}, {"dcqcn.rate_timer", dc.RateTimer}, {"dcqcn.rate_reduce_period", dc.RateReducePeriod}, {"cnp_interval", p.CNPInterval}} {
		if t.v <= 0 {
			probs.add(t.name, "rounds to zero (%s)", hint)
		}
	}
	switch {
	case dc.Variant == congestion.DCQCNMellanox && dc.ByteCounter != 0:
		probs.add("dcqcn.byte_counter", "%v: the mellanox variant has no byte counter", dc.ByteCounter)
	case dc.Variant != congestion.DCQCNMellanox && dc.ByteCounter <= 0:
		probs.add("dcqcn.byte_counter", "rounds to zero (%s)", hint)
	}
	// DCQCN's own floor: additive increase must reach line rate in a
	// bounded number of steps.
	if dc.RAI <= 0 || float64(dc.RAI) < float64(p.LineRate)*congestion.MinRAIFraction {
		probs.add("dcqcn.rai", "%v is below a millionth of the link rate %v", dc.RAI, p.LineRate)
	}
	if dc.MinRate <= 0 || dc.MinRate > p.LineRate {
		probs.add("dcqcn.min_rate", "%v: want a positive rate up to the link rate %v", dc.MinRate, p.LineRate)
	}
}

// Derived returns every derived value and the inputs it came from as
// name -> printed value. Derived values print as an override would be
// written, so a printed profile can be pinned back exactly.
func (p Params) Derived() map[string]string {
	m := map[string]string{
		"reference.link_rate": p.Ref.LineRate.String(),
		"reference.base_rtt":  p.Ref.BaseRTT.String(),
		"reference.mtu":       strconv.Itoa(p.Ref.MTU),
		"reference.bdp":       p.Ref.BDP.String(),
		"line_rate":           p.LineRate.String(),
		"mtu":                 strconv.Itoa(p.MTU),
		"base_rtt":            p.BaseRTT.String(),
		"bdp":                 p.BDP.String(),
		"bdp_packets":         strconv.FormatFloat(float64(p.BDP)/float64(p.MTU), 'f', 2, 64),
		"switch.link_delay":   p.LinkDelay.String(),
		"switch.overhead":     p.Switch.Overhead.String(),
		"hop_latency":         p.HopLatency.String(),
		"fail_after":          p.FailAfter.String(),
		"socket_buffer":       socketBufferString(p.SocketBuffer),
		"spurious_rto":        strconv.FormatBool(p.SpuriousRTO),
		"scale.time":          strconv.FormatFloat(p.Scale.Time, 'g', 6, 64),
		"scale.rate":          strconv.FormatFloat(p.Scale.Rate, 'g', 6, 64),
		"scale.bytes":         strconv.FormatFloat(p.Scale.Bytes, 'g', 6, 64),
		"overrides":           "none",
	}
	for _, v := range p.table() {
		m[v.name] = show(v.ptr)
	}
	if p.DCQCN.Variant == congestion.DCQCNMellanox {
		m["dcqcn.variant"] = p.DCQCN.Variant.String()
		m["dcqcn.clamp_target_rate"] = strconv.FormatBool(p.DCQCN.ClampTargetRate)
	}
	// Only a profile that chooses a per-pair or rate-scaled window prints
	// them, so every other profile's results stay as they were.
	if p.Reliability.PairBDP {
		m["reliability.window_mode"] = WindowPairBDP
	}
	if p.Reliability.RateScaled {
		m["reliability.window_scale"] = WindowScaleRate
	}
	if len(p.Pinned) > 0 {
		pinned := append([]string(nil), p.Pinned...)
		sort.Strings(pinned)
		m["overrides"] = strings.Join(pinned, ",")
	}
	return m
}

// bdp is rate x rtt in bytes, rounded.
func bdp(rate units.Rate, rtt units.Duration) units.Size {
	r := new(big.Rat).SetFrac(new(big.Int).Mul(big.NewInt(int64(rate)), big.NewInt(int64(rtt))), big.NewInt(8e9))
	return units.Size(roundRat(r))
}

// window is windowBDP x bdp in whole packets, rounded up so that the
// window never cuts the BDP short, and at least MinWindowPackets.
func window(windowBDP Fraction, bdp units.Size, mtu int) units.Size {
	bytes := new(big.Rat).Mul(windowBDP.Rat(), new(big.Rat).SetInt64(int64(bdp)))
	packets := ceilRat(bytes.Quo(bytes, new(big.Rat).SetInt64(int64(mtu))))
	return units.Size(max(packets, MinWindowPackets) * int64(mtu))
}

func scaleDuration(d units.Duration, r *big.Rat) units.Duration {
	return units.Duration(mulRound(int64(d), r))
}

// ofRate is a fraction of a rate, rounded to a whole bit/s.
func ofRate(rate units.Rate, f Fraction) units.Rate {
	return units.Rate(mulRound(int64(rate), f.Rat()))
}

// ratio is a/b; b must not be zero.
func ratio(a, b int64) *big.Rat { return big.NewRat(a, b) }

// mulRound is v x r rounded to the nearest integer (halves up).
func mulRound(v int64, r *big.Rat) int64 {
	return roundRat(new(big.Rat).Mul(new(big.Rat).SetInt64(v), r))
}

func roundRat(r *big.Rat) int64 {
	half := new(big.Rat).Add(r, big.NewRat(1, 2))
	return floorRat(half)
}

func floorRat(r *big.Rat) int64 {
	q := new(big.Int).Div(r.Num(), r.Denom()) // Euclidean: floor for a positive denominator
	if !q.IsInt64() {
		return 0
	}
	return q.Int64()
}

func ceilRat(r *big.Rat) int64 {
	return -floorRat(new(big.Rat).Neg(r))
}

// socketBufferString shows emulation.socket_buffer: "default" when the
// profile leaves the switch's own.
func socketBufferString(n units.Size) string {
	if n == 0 {
		return "default"
	}
	return n.String()
}
