// Package splitmix is SplitMix64 (Steele, Lea and Flood), the one copy the
// engines, the workload's gradient data and the lab's per-process seeds
// share: a seed derivation and a cheap full-avalanche hash that
// the simulator's determinism depends on, so its outputs must never
// change. The wire format's own use (wire's initial PSN) stays with the
// format's definition.
package splitmix

// Golden is SplitMix64's increment, 2^64 divided by the golden ratio.
const Golden = 0x9E3779B97F4A7C15

// Mix is SplitMix64's finalizer (Stafford's variant 13), a bijection on
// uint64 with full avalanche.
func Mix(x uint64) uint64 {
	x = (x ^ x>>30) * 0xBF58476D1CE4E5B9
	x = (x ^ x>>27) * 0x94D049BB133111EB
	return x ^ x>>31
}

// Next is one SplitMix64 step from state x: the output after adding
// Golden, that is Mix(x + Golden).
func Next(x uint64) uint64 { return Mix(x + Golden) }
