package report

import (
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"

	"github.com/forgive-emu/forgive/lab/results"
)

// Version is the results.json format this package writes and reads.
const Version = 1

// ErrVersion is returned by ReadJSON for a file of another format version.
var ErrVersion = errors.New("report: unsupported results version")

// WriteJSON writes f as indented JSON to path. It writes a temporary file
// beside path and renames it, so a reader never sees half a file and a
// failed write leaves any earlier results.json in place.
func WriteJSON(path string, f *results.File) error {
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("report: encode %s: %w", path, err)
	}
	return writeAtomic(path, append(data, '\n'))
}

// ReadJSON reads a results.json written by WriteJSON, or the same
// gzipped (a path ending in .gz), as docs/results keeps them.
func ReadJSON(path string) (*results.File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(bytes.NewReader(data))
		if err != nil {
			return nil, fmt.Errorf("report: %s: %w", path, err)
		}
		if data, err = io.ReadAll(io.LimitReader(zr, 1<<30)); err != nil {
			return nil, fmt.Errorf("report: %s: %w", path, err)
		}
	}
	f, err := decodeJSON(data)
	if err != nil {
		return nil, fmt.Errorf("report: %s: %w", path, err)
	}
	return f, nil
}

func decodeJSON(data []byte) (*results.File, error) {
	var f results.File
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, err
	}
	if f.Version != Version {
		return nil, fmt.Errorf("%w: %d, want %d", ErrVersion, f.Version, Version)
	}
	return &f, nil
}

// WriteCSV writes one row per run to path: a header of the JSON names of
// results.Run's scalar fields, in declaration order, then the values.
// The per-step table and the sampled series stay in results.json. Floats
// are printed in the shortest form that reads back to the same value.
func WriteCSV(path string, f *results.File) error {
	var buf bytes.Buffer
	if err := encodeCSV(&buf, f.Runs); err != nil {
		return fmt.Errorf("report: %s: %w", path, err)
	}
	return writeAtomic(path, buf.Bytes())
}

func encodeCSV(w io.Writer, runs []results.Run) error {
	cols := csvColumns()
	cw := csv.NewWriter(w)
	header := make([]string, len(cols))
	for i, c := range cols {
		header[i] = c.name
	}
	if err := cw.Write(header); err != nil {
		return err
	}
	for i := range runs {
		v := reflect.ValueOf(runs[i])
		rec := make([]string, len(cols))
		for j, c := range cols {
			rec[j] = csvValue(v.Field(c.index))
		}
		if err := cw.Write(rec); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

type csvColumn struct {
	name  string
	index int
}

// csvColumns lists results.Run's fields that fit in one cell, so a field
// added to Run becomes a column without touching this package.
func csvColumns() []csvColumn {
	t := reflect.TypeFor[results.Run]()
	var cols []csvColumn
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if !f.IsExported() || name == "-" || !scalar(f.Type.Kind()) {
			continue
		}
		if name == "" {
			name = f.Name
		}
		cols = append(cols, csvColumn{name: name, index: i})
	}
	return cols
}

func scalar(k reflect.Kind) bool {
	switch k {
	case reflect.Bool, reflect.String, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

func csvValue(v reflect.Value) string {
	switch v.Kind() {
	case reflect.Bool:
		return strconv.FormatBool(v.Bool())
	case reflect.String:
		return v.String()
	case reflect.Float32, reflect.Float64:
		return strconv.FormatFloat(v.Float(), 'g', -1, 64)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(v.Int(), 10)
	default:
		return strconv.FormatUint(v.Uint(), 10)
	}
}

// writeAtomic writes data to a temporary file in path's directory and
// renames it over path.
func writeAtomic(path string, data []byte) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	defer func() {
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("report: write %s: %w", path, err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		tmp.Close()
		return fmt.Errorf("report: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("report: write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return nil
}
