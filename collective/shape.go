package collective

// Shape summarises a schedule for dry runs and results.
type Shape struct {
	// Kind to Window are the compiled spec's.
	Kind       Kind        `json:"kind"`
	Ranks      int         `json:"ranks"`
	Dims       []int       `json:"dims"`
	Algorithms []Algorithm `json:"algorithms"`
	Bytes      int         `json:"bytes"`
	Elem       int         `json:"elem"`
	Splits     int         `json:"splits"`
	Window     int         `json:"window"`
	// Messages is every rank's sends, summed.
	Messages int `json:"messages"`
	// MaxFanIn is the largest fan-in of any rank in any phase.
	MaxFanIn int `json:"max_fan_in"`
	// SentBytes and ReceivedBytes are per rank, over every phase;
	// MaxSentBytes and MaxReceivedBytes their largest, the busiest link's
	// share of the collective.
	SentBytes        []int `json:"sent_bytes"`
	ReceivedBytes    []int `json:"received_bytes"`
	MaxSentBytes     int   `json:"max_sent_bytes"`
	MaxReceivedBytes int   `json:"max_received_bytes"`
	// Phases are in Schedule.Phases' order.
	Phases []PhaseShape `json:"phases"`
}

// PhaseShape is one phase of a Shape.
type PhaseShape struct {
	PhaseInfo
	// Messages is the phase's sends, summed over the ranks.
	Messages int `json:"messages"`
	// SentBytes and ReceivedBytes are per rank.
	SentBytes     []int `json:"sent_bytes"`
	ReceivedBytes []int `json:"received_bytes"`
	// FanIn is per rank: the distinct senders of the messages it receives
	// in the phase, which can arrive at once (Direct over m: m-1; a ring:
	// 1; a tree's inner node: 2 up, 1 down).
	FanIn []int `json:"fan_in"`
	// MaxFanIn is the largest FanIn; MeanFanIn the mean over the ranks
	// that receive anything in the phase.
	MaxFanIn  int     `json:"max_fan_in"`
	MeanFanIn float64 `json:"mean_fan_in"`
}

// Shape summarises s.
func (s *Schedule) Shape() Shape {
	n := s.Spec.Ranks
	sh := Shape{
		Kind: s.Spec.Kind, Ranks: n, Dims: s.Spec.Dims, Algorithms: s.Spec.Algorithms,
		Bytes: s.Spec.Bytes, Elem: s.Spec.Elem, Splits: s.Spec.Splits, Window: s.Spec.Window,
		SentBytes: make([]int, n), ReceivedBytes: make([]int, n),
		Phases: make([]PhaseShape, len(s.Phases)),
	}
	for i, ph := range s.Phases {
		sh.Phases[i] = PhaseShape{
			PhaseInfo: ph, SentBytes: make([]int, n), ReceivedBytes: make([]int, n), FanIn: make([]int, n),
		}
	}
	// seen holds the (rank, phase) stamp each peer was last counted under;
	// a rank receives phase by phase, stage after stage.
	seen := make([]int, n)
	for r, p := range s.Plans {
		for _, m := range p.Sends {
			ph := &sh.Phases[m.Phase]
			ph.Messages++
			ph.SentBytes[r] += m.Len
			sh.SentBytes[r] += m.Len
		}
		sh.Messages += len(p.Sends)
		for _, m := range p.Recvs {
			ph := &sh.Phases[m.Phase]
			ph.ReceivedBytes[r] += m.Len
			sh.ReceivedBytes[r] += m.Len
			if stamp := r*len(s.Phases) + m.Phase + 1; seen[m.Peer] != stamp {
				seen[m.Peer] = stamp
				ph.FanIn[r]++
			}
		}
		sh.MaxSentBytes = max(sh.MaxSentBytes, sh.SentBytes[r])
		sh.MaxReceivedBytes = max(sh.MaxReceivedBytes, sh.ReceivedBytes[r])
	}
	for i := range sh.Phases {
		ph := &sh.Phases[i]
		sum, receivers := 0, 0
		for _, f := range ph.FanIn {
			ph.MaxFanIn = max(ph.MaxFanIn, f)
			sum += f
			if f > 0 {
				receivers++
			}
		}
		if receivers > 0 {
			ph.MeanFanIn = float64(sum) / float64(receivers)
		}
		sh.MaxFanIn = max(sh.MaxFanIn, ph.MaxFanIn)
	}
	return sh
}
