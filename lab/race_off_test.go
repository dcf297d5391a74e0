//go:build !race

package lab

// raceDetector: the tests run under -race, which costs the fidelity runs
// about twenty times their CPU.
const raceDetector = false
