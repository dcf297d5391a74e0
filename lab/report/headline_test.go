package report

import (
	"strings"
	"testing"
)

// The headline names forgive's change with its margin on the real
// placement and in the simulator, and says when one seed leaves the
// margin unknown.
func TestHeadlineComparesWithTheSimulator(t *testing.T) {
	pols := []string{"dcqcn", "shed-tight", "forgive"}
	real, sim := synthFile(pols, []uint64{1, 2, 3}, 4), synthFile(pols, []uint64{1, 2, 3}, 4)
	real.Placement, sim.Placement = "loopback", "sim"
	rs, ss := summaries(real), summaries(sim)
	line := Headline(real, sim)
	for _, want := range []string{
		"headline: forgive's training time against dcqcn's, " + signedPct(rs[2].TrainingTimeChangeMean) + " ±",
		"over 3 seeds on loopback",
		"the simulator, same lab on a virtual clock: " + signedPct(ss[2].TrainingTimeChangeMean) + " ±",
	} {
		if !strings.Contains(line, want) {
			t.Errorf("headline lacks %q:\n%s", want, line)
		}
	}
	if strings.Contains(line, "\n") {
		t.Errorf("headline of more than one line:\n%s", line)
	}
	one := synthFile(pols, []uint64{1}, 4)
	one.Placement = "loopback"
	if line := Headline(one, nil); !strings.Contains(line, "margin unknown") || strings.Contains(line, "simulator") {
		t.Errorf("one seed, no simulator: %s", line)
	}
	if line := Headline(synthFile([]string{"dcqcn"}, []uint64{1, 2}, 4), nil); line != "" {
		t.Errorf("one policy has no headline: %q", line)
	}
}
