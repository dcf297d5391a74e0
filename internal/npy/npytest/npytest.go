// Package npytest finds a Python that reads what package npy writes, for
// the tests that load its files with numpy itself.
package npytest

import (
	"bytes"
	"errors"
	"fmt"
	"os/exec"
	"strings"
)

// Python returns a python3 that imports numpy: the one on PATH, or
// Debian's /usr/bin/python3, where python3-numpy installs (a python3
// earlier on PATH may be another build, as .ci/run notes). The error
// says why each candidate failed.
func Python() (string, error) {
	var errs []string
	for _, c := range []string{"python3", "/usr/bin/python3"} {
		py, err := exec.LookPath(c)
		if err == nil {
			var out []byte
			if out, err = exec.Command(py, "-c", "import numpy").CombinedOutput(); err == nil {
				return py, nil
			} else if len(out) > 0 {
				err = fmt.Errorf("%w: %s", err, bytes.TrimSpace(out[max(0, len(out)-200):]))
			}
		}
		errs = append(errs, fmt.Sprintf("%s: %v", c, err))
	}
	return "", errors.New(strings.Join(errs, "; "))
}
