package results

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
)

// SweepID is the sweep id of a set of options: the first 16 hex digits of
// the SHA-256 of their JSON.
func SweepID(o SweepOptions) string {
	data, err := json.Marshal(o)
	if err != nil {
		// Plain data: it always encodes (a NaN scale is refused before).
		panic(fmt.Sprintf("results: encode sweep options: %v", err))
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8])
}

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }
