package lab

import (
	"testing"

	"go.uber.org/goleak"
)

// The runner starts samplers and watchers; none may outlive a run.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
