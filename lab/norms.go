package lab

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// ReadNorms reads a gradient-norm trace for the critical-regime detector:
// one line per step, holding the gradient norm of the whole model or one
// norm per layer (separated by spaces or commas). Blank lines and lines
// starting with # are skipped. The daemon classifies each step with
// Accordion's criterion over these norms ("|prev - cur| / prev >= eta").
func ReadNorms(path string, steps int) ([][]float64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: --norms: %w", ErrInput, err)
	}
	defer f.Close()
	norms, err := parseNorms(f, steps)
	if err != nil {
		return nil, fmt.Errorf("%w: --norms %s: %w", ErrInput, path, err)
	}
	return norms, nil
}

func parseNorms(r io.Reader, steps int) ([][]float64, error) {
	var out [][]float64
	sc := bufio.NewScanner(r)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.FieldsFunc(text, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' })
		row := make([]float64, 0, len(fields))
		for _, s := range fields {
			v, err := strconv.ParseFloat(s, 64)
			if err != nil || v < 0 || math.IsInf(v, 0) || math.IsNaN(v) {
				return nil, fmt.Errorf("line %d: %q is not a gradient norm (a finite number >= 0)", line, s)
			}
			row = append(row, v)
		}
		if len(out) > 0 && len(row) != len(out[0]) {
			return nil, fmt.Errorf("line %d: %d norms, the first step had %d", line, len(row), len(out[0]))
		}
		out = append(out, row)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(out) < steps {
		return nil, fmt.Errorf("%d steps of norms, the run has %d steps", len(out), steps)
	}
	return out[:steps], nil
}
