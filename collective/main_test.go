package collective

import (
	"flag"
	"os"
	"testing"

	"github.com/forgive-emu/forgive/internal/race"
)

// raceChecks is rapid's number of checks per property under the race
// detector, unless -rapid.checks says otherwise: the package runs no
// goroutines, so the detector finds nothing here and only slows each
// check, and at rapid's 100 the package passed go test's 10 minutes on a
// loaded machine. The ordinary build runs rapid's 100.
const raceChecks = "25"

func TestMain(m *testing.M) {
	flag.Parse()
	if race.Enabled {
		set := false
		flag.Visit(func(f *flag.Flag) { set = set || f.Name == "rapid.checks" })
		if !set {
			if err := flag.Set("rapid.checks", raceChecks); err != nil {
				panic(err)
			}
		}
	}
	os.Exit(m.Run())
}
