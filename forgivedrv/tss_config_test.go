package forgivedrv

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/tss"
)

// writeKey writes a key file with the given mode and returns its path.
func writeKey(t *testing.T, contents []byte, mode os.FileMode) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "domain.key")
	if err := os.WriteFile(path, contents, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return path
}

var testKey = tss.Key{9, 8, 7, 6, 5, 4, 3, 2, 1}

// The security section reads its key files and builds the keyring; a bad
// file or domain list is refused by Validate (so by forgived --check) with
// the field named.
func TestSecurityConfig(t *testing.T) {
	good := writeKey(t, tss.FormatKeyFile(testKey), 0o600)
	c, err := ParseConfig([]byte(minimal + "security: {domains: [{id: 7, key_file: " + good + "}]}\n"))
	if err != nil {
		t.Fatal(err)
	}
	ring, err := c.Keyring()
	if err != nil || ring == nil {
		t.Fatalf("Keyring() = %v, %v", ring, err)
	}
	if d, ok := ring.DomainOf(3); !ok || d != 7 {
		t.Errorf("host 3 in domain %d, %v; want 7", d, ok)
	}
	if c, err := ParseConfig([]byte(minimal)); err != nil {
		t.Fatal(err)
	} else if ring, err := c.Keyring(); ring != nil || err != nil {
		t.Errorf("no security section: Keyring() = %v, %v; want nil, nil", ring, err)
	}

	other := writeKey(t, tss.FormatKeyFile(tss.Key{1}), 0o400)
	cases := []struct {
		name, section, want string
	}{
		{"group-readable key", "{domains: [{id: 7, key_file: " + writeKey(t, tss.FormatKeyFile(testKey), 0o640) + "}]}",
			"security.domains[0].key_file: "},
		{"world-readable key", "{domains: [{id: 7, key_file: " + writeKey(t, tss.FormatKeyFile(testKey), 0o604) + "}]}",
			"lets group or others at the key"},
		{"missing key file", "{domains: [{id: 7, key_file: /nonexistent/key}]}", "security.domains[0].key_file: /nonexistent/key: lstat /nonexistent: no such file"},
		{"no key file", "{domains: [{id: 7}]}", "security.domains[0].key_file"},
		{"bad key", "{domains: [{id: 7, key_file: " + writeKey(t, []byte("abcd\n"), 0o600) + "}]}", "want 64 hexadecimal digits"},
		{"second domain's file", "{domains: [{id: 7, key_file: " + good + ", hosts: [3]}, {id: 8, key_file: " + other + "x}]}",
			"security.domains[1].key_file"},
		{"duplicate id", "{domains: [{id: 7, key_file: " + good + ", hosts: [3]}, {id: 7, key_file: " + other + "}]}", "given twice"},
		{"host in no domain", "{domains: [{id: 7, key_file: " + good + ", hosts: [4]}]}", "no domain for host 3"},
		{"unknown field", "{domains: [{id: 7, keyfile: " + good + "}]}", "keyfile"},
	}
	for _, c := range cases {
		_, err := ParseConfig([]byte(minimal + "security: " + c.section + "\n"))
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrConfig naming %q", c.name, err, c.want)
		}
	}
}

// A config with a security section survives the lab's round trip
// (Marshal, ParseConfig), and one without keeps no security key in the
// file.
func TestSecurityConfigMarshal(t *testing.T) {
	c, err := ParseConfig([]byte(minimal))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Marshal("")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "security") {
		t.Errorf("a config without security marshals a security key:\n%s", b)
	}
	key := writeKey(t, tss.FormatKeyFile(testKey), 0o600)
	c.Security.Domains = []SecurityDomain{{ID: 2, KeyFile: key, Hosts: []uint16{3, 4}}}
	if b, err = c.Marshal(""); err != nil {
		t.Fatal(err)
	}
	back, err := ParseConfig(b)
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	if d := back.Security.Domains; len(d) != 1 || d[0].ID != 2 || d[0].KeyFile != key || len(d[0].Hosts) != 2 {
		t.Errorf("security read back as %+v", d)
	}
}

// "A 0600 key owned by another uid is accepted." A key file must be the
// daemon's own, named directly, in a directory only the daemon (or root)
// can write: a key owned by another uid, a symbolic link to a good key,
// and a key in a group- or world-writable directory are each refused,
// naming the reason. Changing a key's owner needs root (CI runs as root).
func TestKeyFileOwnerLinkAndDirectoryRefused(t *testing.T) {
	load := func(path string) error {
		_, err := ParseConfig([]byte(minimal + "security: {domains: [{id: 7, key_file: " + path + "}]}\n"))
		return err
	}
	good := writeKey(t, tss.FormatKeyFile(testKey), 0o600)
	if err := load(good); err != nil {
		t.Fatalf("the daemon's own 0600 key in its own directory: %v", err)
	}
	link := filepath.Join(t.TempDir(), "link.key")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	dirWith := func(mode os.FileMode) string {
		dir := filepath.Join(t.TempDir(), "keys")
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "domain.key")
		if err := os.WriteFile(path, tss.FormatKeyFile(testKey), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(dir, mode); err != nil {
			t.Fatal(err)
		}
		return path
	}
	cases := []struct{ name, path, want string }{
		{"symbolic link", link, "a symbolic link"},
		{"world-writable directory", dirWith(0o777), "writable by group or others"},
		{"group-writable directory", dirWith(0o770), "writable by group or others"},
		{"sticky world-writable directory", dirWith(0o777 | os.ModeSticky), "writable by group or others"},
	}
	if os.Geteuid() == 0 {
		other := writeKey(t, tss.FormatKeyFile(testKey), 0o600)
		if err := os.Chown(other, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct{ name, path, want string }{"key owned by uid 65534", other, "owned by uid 65534, not the daemon's uid 0"})
		otherDir := dirWith(0o700)
		if err := os.Chown(filepath.Dir(otherDir), 65534, 65534); err != nil {
			t.Fatal(err)
		}
		cases = append(cases, struct{ name, path, want string }{"directory owned by uid 65534", otherDir, "is owned by uid 65534"})
	} else {
		t.Log("not root: the cases of a key and a directory of another uid need chown; CI runs as root")
	}
	for _, c := range cases {
		err := load(c.path)
		if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrConfig naming %q", c.name, err, c.want)
		}
	}
}
