package hostapi_test

import (
	"testing"

	"go.uber.org/goleak"
)

// Every test leaves no goroutine behind: each server and client closes its
// sessions, readers and writers.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
