// Package race reports whether the race detector is built in, for tests
// whose assertion the detector changes: testing.AllocsPerRun counts the
// detector's own allocations under -race, so the allocation gates skip
// their assertion there and hold it in the ordinary build.
package race
