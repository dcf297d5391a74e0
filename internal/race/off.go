//go:build !race

package race

// Enabled is false: the binary was built without -race.
const Enabled = false
