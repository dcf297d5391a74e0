package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/forgivedrv"
	"github.com/forgive-emu/forgive/trimswitchdrv"
)

// The example configurations shipped in deploy/ are what the daemons
// accept: each host's NIC is cabled to a port of the switch, which sends
// back to that host's address and names that host (`host:`), so the
// port's source guard drops packets naming another source.
func TestDeployExamplesParse(t *testing.T) {
	dir := filepath.Join("..", "deploy", "multi-machine")
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no examples in %s (%v)", dir, err)
	}
	neighbor := map[string]string{} // switch port address -> the host it sends to
	guard := map[string]uint16{}    // switch port address -> the host id its source guard admits
	var hosts []*forgivedrv.Config
	for _, path := range files {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "\nports:") {
			sw, err := trimswitchdrv.ParseConfig(b)
			if err != nil {
				t.Fatalf("%s: %v", path, err)
			}
			for _, p := range sw.Ports {
				neighbor[p.Local] = p.Neighbor
				guard[p.Local] = p.Host
			}
			continue
		}
		h, err := forgivedrv.ParseConfig(b)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if _, err := h.NIC(); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		hosts = append(hosts, h)
	}
	if len(hosts) < 2 || len(neighbor) < len(hosts) {
		t.Fatalf("%d hosts, %d switch ports", len(hosts), len(neighbor))
	}
	for _, h := range hosts {
		if neighbor[h.Switch] != h.Listen {
			t.Errorf("%s sends to %s, which sends to %q", h.Name, h.Switch, neighbor[h.Switch])
		}
		if guard[h.Switch] != h.Host {
			t.Errorf("%s (host %d) is cabled to switch port %s, whose host: is %d: no source guard for it", h.Name, h.Host, h.Switch, guard[h.Switch])
		}
	}
}
