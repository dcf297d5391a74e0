package lab

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/forgive-emu/forgive/lab/netns"
)

// The runner starts samplers and watchers; none may outlive a run. A
// namespace test that failed midway leaves nothing behind either.
func TestMain(m *testing.M) {
	code := m.Run()
	if err := netns.CheckNoneLeft(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
