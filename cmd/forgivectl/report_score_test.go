package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// report score reads one fabric a group: runs of the non-blocking fabric
// among the worst fabric's would mix into figures of neither, so it
// refuses them, naming the file and --nonblocking; given there, they
// score the non-blocking rows.
func TestReportScoreKeepsFabricsApart(t *testing.T) {
	dir := filepath.Join("..", "..", "docs", "results", "seed-readings", "confirm", "direct-8x8-ns3-qp")
	worst := filepath.Join(dir, "A", "shard-1")
	nb := filepath.Join(dir, "C", "shard-1")
	code, out := forgivectl(t, "report", "score", worst, nb)
	if code != 2 || !strings.Contains(out, nb+" ran on leaf-spine-8x8-nonblocking") || !strings.Contains(out, "--nonblocking") {
		t.Errorf("mixed fabrics: exit %d, want 2 naming %s and --nonblocking:\n%s", code, nb, out)
	}
	code, out = forgivectl(t, "report", "score", worst, "--nonblocking", nb, "--nonblocking", worst)
	if code != 2 || !strings.Contains(out, "--nonblocking: "+worst+" ran on leaf-spine-8x8-4to1") {
		t.Errorf("mixed --nonblocking: exit %d:\n%s", code, out)
	}
	code, out = forgivectl(t, "report", "score", worst, "--nonblocking", nb)
	if code != 0 || !strings.Contains(out, "| 23 | non-blocking: baseline trim rate | 0.02 – 0.04 % | 0.0000 % |") {
		t.Errorf("exit %d, want row 23 scored from the non-blocking run:\n%s", code, out)
	}
}
