package lab

import (
	"os"
	"path/filepath"

	"github.com/forgive-emu/forgive/lab/report"
	"github.com/forgive-emu/forgive/lab/results"
)

func policyNames(ps []Policy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Name
	}
	return out
}

// WriteResults writes results.json, results.csv, the plots and each run's
// loss pattern (the runs that carry one: a merge's runs, read back from
// results.json, do not; CopyPatterns copies theirs) of f into dir, as a
// run with Options.Out does.
func WriteResults(dir string, f *results.File) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := report.WriteJSON(filepath.Join(dir, "results.json"), f); err != nil {
		return err
	}
	if err := report.WriteCSV(filepath.Join(dir, "results.csv"), f); err != nil {
		return err
	}
	for _, r := range f.Runs {
		if r.LossPattern != nil && r.PatternFile != nil {
			if err := os.WriteFile(filepath.Join(dir, r.LossPattern.File), r.PatternFile, 0o644); err != nil {
				return err
			}
		}
	}
	_, err := report.Plots(dir, f)
	return err
}
