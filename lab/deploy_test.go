package lab

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/forgivedrv"
	"github.com/forgive-emu/forgive/lab/fabric"
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
	// The examples name the key file an operator installs; a fresh one
	// stands in for it here.
	const installedKey = "/etc/forgive/domain1.key"
	key, err := fabric.WriteKey(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
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
		if !strings.Contains(string(b), installedKey) {
			t.Errorf("%s does not seal with %s", path, installedKey)
		}
		h, err := forgivedrv.ParseConfig([]byte(strings.ReplaceAll(string(b), installedKey, key)))
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
		// A fabric on machines meets strangers: every host seals, all in
		// one domain with one key file.
		d, first := h.Security.Domains, hosts[0].Security.Domains
		if len(d) != 1 || len(first) != 1 || d[0].ID != first[0].ID || d[0].KeyFile != first[0].KeyFile || len(d[0].Hosts) != 0 {
			t.Errorf("%s: security domains %+v; want the one every host shares", h.Name, d)
		}
	}
}
