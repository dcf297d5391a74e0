package cli

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
)

// CPUProfileDirEnv names a directory into which every daemon started
// without --cpu-profile writes a CPU profile of its whole run, as
// DIR/NAME-PID.pprof (NAME is the daemon's configuration file without its
// extension). The lab starts its daemons with its own environment, so
// FORGIVE_CPU_PROFILE_DIR=/tmp/prof forgivectl lab profiles every switch
// and host of every run (docs/profiles.md, "Profiling the daemons").
const CPUProfileDirEnv = "FORGIVE_CPU_PROFILE_DIR"

// StartCPUProfile starts a CPU profile into file or, when file is empty and
// CPUProfileDirEnv names a directory, into a file of that directory named
// after config and the process. It returns the path written ("" when
// neither asks for a profile) and a stop function that ends the profile
// and closes the file; stop is never nil.
func StartCPUProfile(file, config string) (path string, stop func() error, err error) {
	stop = func() error { return nil }
	path = file
	if path == "" {
		dir := os.Getenv(CPUProfileDirEnv)
		if dir == "" {
			return "", stop, nil
		}
		name := strings.TrimSuffix(filepath.Base(config), filepath.Ext(config))
		if name == "" || name == "." {
			name = "daemon"
		}
		path = filepath.Join(dir, fmt.Sprintf("%s-%d.pprof", name, os.Getpid()))
	}
	f, err := os.Create(path)
	if err != nil {
		return "", stop, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return "", stop, fmt.Errorf("cpu profile %s: %w", path, err)
	}
	return path, func() error {
		pprof.StopCPUProfile()
		return errors.Join(f.Sync(), f.Close())
	}, nil
}
