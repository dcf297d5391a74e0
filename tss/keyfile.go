package tss

import (
	"bytes"
	"encoding/hex"
	"fmt"
)

// KeyFileHeader is the comment line FormatKeyFile writes first.
const KeyFileHeader = "# FORGIVE security-domain key (forgivectl keygen). Keep it mode 0600; every host of the domain needs the same file."

// FormatKeyFile returns the contents of a key file holding k: a comment
// line and the key as 64 hexadecimal digits.
func FormatKeyFile(k Key) []byte {
	return fmt.Appendf(nil, "%s\n%s\n", KeyFileHeader, hex.EncodeToString(k[:]))
}

// ParseKeyFile reads a key file: lines starting with '#' and blank lines
// are ignored, and exactly one line of 64 hexadecimal digits (32 bytes)
// remains. The key must not be all zero.
func ParseKeyFile(b []byte) (Key, error) {
	var k Key
	found := false
	for i, line := range bytes.Split(b, []byte("\n")) {
		line = bytes.TrimSpace(line)
		if len(line) == 0 || line[0] == '#' {
			continue
		}
		if found {
			return Key{}, fmt.Errorf("%w: line %d: a second key line (one key per file)", ErrConfig, i+1)
		}
		if len(line) != 2*KeyLen {
			return Key{}, fmt.Errorf("%w: line %d: %d characters, want %d hexadecimal digits", ErrConfig, i+1, len(line), 2*KeyLen)
		}
		if _, err := hex.Decode(k[:], line); err != nil {
			return Key{}, fmt.Errorf("%w: line %d: %w", ErrConfig, i+1, err)
		}
		found = true
	}
	switch {
	case !found:
		return Key{}, fmt.Errorf("%w: no key line (64 hexadecimal digits)", ErrConfig)
	case k == Key{}:
		return Key{}, fmt.Errorf("%w: the key is all zero", ErrConfig)
	}
	return k, nil
}
