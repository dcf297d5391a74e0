package lab

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// Off a terminal (a pipe, a file, CI's log) the progress is a line as a
// run starts, one per finished step and one per finished run; the line
// of step n is printed as step n+1 begins or the run ends, so a step
// under way has none.
func TestProgressOffATerminalPrintsEveryFinishedStep(t *testing.T) {
	var buf bytes.Buffer
	p := newProgress(&buf, 2, 3)
	for _, pol := range []string{"dcqcn", "forgive"} {
		p.setRun(pol, 1)
		for s := 1; s <= 3; s++ {
			p.step(s)
		}
	}
	p.done()
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	var want []string
	for i, pol := range []string{"dcqcn", "forgive"} {
		want = append(want, fmt.Sprintf("run %d/2  %-16s seed 1   started", i+1, pol))
		for s := 1; s <= 3; s++ {
			want = append(want, fmt.Sprintf("run %d/2  %-16s seed 1   step %2d/3 done", i+1, pol, s))
		}
		want = append(want, fmt.Sprintf("  %s seed 1 done in", pol))
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), buf.String())
	}
	for i := range want {
		if !strings.HasPrefix(lines[i], want[i]) {
			t.Errorf("line %d: %q, want it to begin %q", i+1, lines[i], want[i])
		}
	}
	if strings.Contains(buf.String(), "\r") || strings.Contains(buf.String(), "\x1b") {
		t.Errorf("terminal controls off a terminal:\n%q", buf.String())
	}
}
