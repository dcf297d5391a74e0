package k8s

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/forgive-emu/forgive/forgivedrv"
	"github.com/forgive-emu/forgive/tss"
)

// secretMount is a Secret volume a container mounts: where, and the
// file mode kubelet gives its files.
type secretMount struct {
	dir, secret string
	mode        os.FileMode
	items       map[string]string // path in the volume -> the Secret's key, when the volume lists items
}

// secretMounts are the container's Secret volumes, by mount path.
func secretMounts(spec *corev1.PodSpec, c *corev1.Container) map[string]secretMount {
	out := map[string]secretMount{}
	for _, vm := range c.VolumeMounts {
		for _, v := range spec.Volumes {
			if v.Name != vm.Name || v.Secret == nil {
				continue
			}
			sm := secretMount{dir: vm.MountPath, secret: v.Secret.SecretName, mode: 0o644} // kubelet's default
			if v.Secret.DefaultMode != nil {
				sm.mode = os.FileMode(*v.Secret.DefaultMode)
			}
			if len(v.Secret.Items) > 0 {
				sm.items = map[string]string{}
				for _, it := range v.Secret.Items {
					sm.items[it.Path] = it.Key
				}
			}
			out[vm.MountPath] = sm
		}
	}
	return out
}

// layOut writes the Secret volume as kubelet's atomic writer does, under
// root: the volume's directory (tmpfs, mode 1777) holds NAME ->
// ..data/NAME for each file, ..data -> ..TIMESTAMP, and ..TIMESTAMP (0755)
// the files with the volume's mode. Each file is a fresh domain key.
func (sm secretMount) layOut(root string, names []string) error {
	dir := filepath.Join(root, sm.dir)
	ts := "..2026_12_07_05_00_00.000000001"
	if err := os.MkdirAll(filepath.Join(dir, ts), 0o755); err != nil {
		return err
	}
	for _, name := range names {
		var k tss.Key
		if _, err := rand.Read(k[:]); err != nil {
			return err
		}
		f := filepath.Join(dir, ts, name)
		if err := os.WriteFile(f, tss.FormatKeyFile(k), 0o600); err != nil {
			return err
		}
		if err := os.Chmod(f, sm.mode); err != nil {
			return err
		}
		if err := os.Symlink("..data/"+name, filepath.Join(dir, name)); err != nil {
			return err
		}
	}
	if err := os.Symlink(ts, filepath.Join(dir, "..data")); err != nil {
		return err
	}
	return os.Chmod(dir, 0o777|os.ModeSticky)
}

// sealedConfig parses a forgived file of the container's ConfigMap with
// forgived's own parser, which reads its key files, after laying out under
// root the Secret volumes its key_files name as kubelet would mount them
// (the file is rewritten to name them there). A file without a security
// section, or whose key is not in a Secret the container mounts, is an
// error: the fabric would run plain, or forgived would not start.
func sealedConfig(spec *corev1.PodSpec, c *corev1.Container, text, root string) (*forgivedrv.Config, error) {
	// Decoded as forgived decodes it (ReadConfig: strict, unchecked), to
	// find the key files before the check reads them.
	file := filepath.Join(root, "forgived.yaml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		return nil, err
	}
	plain, err := forgivedrv.ReadConfig(file)
	if err != nil {
		return nil, err
	}
	if len(plain.Security.Domains) == 0 {
		return nil, errors.New("no security section: forgived would run plain, and any machine that reaches the fabric's addresses could forge its packets")
	}
	mounts := secretMounts(spec, c)
	for _, d := range plain.Security.Domains {
		dir, name := path.Dir(d.KeyFile), path.Base(d.KeyFile)
		sm, ok := mounts[dir]
		if !ok {
			return nil, fmt.Errorf("key_file %s: no Secret volume mounted at %s", d.KeyFile, dir)
		}
		if sm.items != nil {
			if _, ok := sm.items[name]; !ok {
				return nil, fmt.Errorf("key_file %s: Secret %s's volume lists no item %s", d.KeyFile, sm.secret, name)
			}
		}
		if _, err := os.Lstat(filepath.Join(root, d.KeyFile)); err != nil {
			if err := sm.layOut(root, []string{name}); err != nil {
				return nil, err
			}
		}
		text = strings.ReplaceAll(text, d.KeyFile, filepath.Join(root, d.KeyFile))
	}
	cfg, err := forgivedrv.ParseConfig([]byte(text))
	if err != nil {
		return nil, fmt.Errorf("forgived refuses it with its key mounted from the Secret: %w", err)
	}
	return cfg, nil
}

// "Kubernetes runs plain": every forgived file of the manifests seals,
// with its key from a Secret mounted as kubelet mounts it, and forgived
// accepts that mount. The check can fail: a file without security, a key
// readable by others (a Secret's default mode, 0644) and a key outside a
// Secret are each refused.
func TestFabricSealsWithASecret(t *testing.T) {
	m := load(t)
	ds := m.daemonSets[0]
	what := "DaemonSet/" + ds.Name
	spec := &ds.Spec.Template.Spec
	c := container(t, what, spec)
	_, cm := configFile(t, m, what, spec, c)
	var some string
	for key, text := range cm.Data {
		if _, err := sealedConfig(spec, c, text, t.TempDir()); err != nil {
			t.Errorf("%s: ConfigMap %s, %s: %v", what, cm.Name, key, err)
		}
		some = text
	}
	for _, tc := range []struct {
		name, want string
		f          func(spec *corev1.PodSpec, text string) string
	}{
		{"no security section", "no security section", func(_ *corev1.PodSpec, text string) string {
			i := strings.Index(text, "security:")
			return text[:i]
		}},
		{"the Secret's default mode 0644", "lets group or others at the key", func(spec *corev1.PodSpec, text string) string {
			for i := range spec.Volumes {
				if spec.Volumes[i].Secret != nil {
					spec.Volumes[i].Secret.DefaultMode = nil
				}
			}
			return text
		}},
		{"a key outside the Secret", "no Secret volume mounted", func(_ *corev1.PodSpec, text string) string {
			return strings.ReplaceAll(text, "/etc/forgive-keys/", "/etc/forgive/")
		}},
	} {
		spec := spec.DeepCopy()
		c := container(t, what, spec)
		_, err := sealedConfig(spec, c, tc.f(spec, some), t.TempDir())
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.name, err, tc.want)
		}
	}
}
