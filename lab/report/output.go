package report

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/forgive-emu/forgive/lab/results"
)

// EarlierResults are the files of dir that a lab run writes there
// (results.json, results.csv, the plots, the loss patterns), sorted: what
// an earlier run left. A run into a directory that holds them would leave
// those it does not write again (another seed's or policy's loss pattern,
// a plot it skips) beside its own. A directory that does not exist holds
// none.
func EarlierResults(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	written := []string{"results.json", "results.csv", StepTimePNG, AllReduceCDFPNG, RatePNG,
		OccupancyPNG, TwoJobsPNG}
	var out []string
	for _, e := range entries {
		n := e.Name()
		if e.Type().IsRegular() && (slices.Contains(written, n) ||
			strings.HasPrefix(n, "loss-pattern-") && strings.HasSuffix(n, ".npz")) {
			out = append(out, n)
		}
	}
	return out, nil
}

// ClearResults removes the files EarlierResults finds in dir, and nothing
// else of it.
func ClearResults(dir string) error {
	names, err := EarlierResults(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := os.Remove(filepath.Join(dir, n)); err != nil {
			return err
		}
	}
	return nil
}

// WriteResults writes results.json, results.csv, the plots and each run's
// loss pattern (the runs that carry one: a merge's runs, read back from
// results.json, do not; CopyPatterns copies theirs) of f into dir, as a
// lab run with an output directory does.
func WriteResults(dir string, f *results.File) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := WriteJSON(filepath.Join(dir, "results.json"), f); err != nil {
		return err
	}
	if err := WriteCSV(filepath.Join(dir, "results.csv"), f); err != nil {
		return err
	}
	for _, r := range f.Runs {
		if r.LossPattern != nil && r.PatternFile != nil {
			if err := os.WriteFile(filepath.Join(dir, r.LossPattern.File), r.PatternFile, 0o644); err != nil {
				return err
			}
		}
	}
	_, err := Plots(dir, f)
	return err
}
