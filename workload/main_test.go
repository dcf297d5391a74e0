package workload

import (
	"testing"

	"go.uber.org/goleak"
)

// No goroutine may outlive Run, nor a test's fabric.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
