package fabric

import (
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"

	"github.com/forgive-emu/forgive/tss"
)

// KeyName is the key file a sealed fabric's directory holds.
const KeyName = "domain.key"

// WriteKey writes a fresh random key for a fabric's security domain
// (topo.SealDomain) to dir/KeyName, mode 0600, replacing any key an
// earlier fabric left there, and returns its path. The key is the
// fabric's own: it lives in the fabric's state directory, which topo down
// and the lab remove with it.
func WriteKey(dir string) (string, error) {
	var k tss.Key
	if _, err := rand.Read(k[:]); err != nil {
		return "", fmt.Errorf("fabric: key: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("fabric: key: %w", err)
	}
	f, err := os.CreateTemp(dir, ".domain-key-*") // mode 0600
	if err != nil {
		return "", fmt.Errorf("fabric: key: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(tss.FormatKeyFile(k))
	cerr := f.Close()
	path := filepath.Join(dir, KeyName)
	if err := werr; err == nil {
		err = cerr
		if err == nil {
			err = os.Rename(tmp, path)
		}
		if err == nil {
			return path, nil
		}
		werr = err
	}
	os.Remove(tmp)
	return "", fmt.Errorf("fabric: key: %w", werr)
}
