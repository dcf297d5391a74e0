package topo

import (
	"fmt"
	"os"
	"path/filepath"
)

// Write puts every process's configuration in dir as <name>.yaml (dir is
// created if needed) and returns the paths by process name: "leaf1",
// "spine1", "sw", "host3".
func (p *Plan) Write(dir string) (map[string]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPlace, err)
	}
	paths := make(map[string]string, len(p.Switches)+len(p.Hosts))
	write := func(name string, data []byte) error {
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return fmt.Errorf("%w: %w", ErrPlace, err)
		}
		paths[name] = path
		return nil
	}
	for _, s := range p.Switches {
		if err := write(s.Name, s.ConfigYAML); err != nil {
			return nil, err
		}
	}
	for _, h := range p.Hosts {
		if err := write(h.Name, h.ConfigYAML); err != nil {
			return nil, err
		}
	}
	return paths, nil
}
