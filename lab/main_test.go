package lab

import (
	"context"
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/forgive-emu/forgive/lab/netns"
)

// The runner starts samplers and watchers; none may outlive a run. A
// namespace test that failed midway leaves nothing behind either.
//
// Started with WorkerArg (Run with Jobs > 1 starts its executable so), the
// test binary is a sweep's worker and runs no test.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == WorkerArg {
		if err := ServeWorker(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if err := netns.CheckNoneLeft(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	if fixtureDir != "" {
		os.RemoveAll(fixtureDir)
	}
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}
