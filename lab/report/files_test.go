package report

import (
	"encoding/csv"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"testing"

	"github.com/forgive-emu/forgive/lab/results"
)

// A file with every kind of field filled survives a write and a read
// unchanged: summary, steps and series included.
func TestJSONRoundTrip(t *testing.T) {
	f := synthFile([]string{"dcqcn", "forgive"}, []uint64{1, 2}, 3)
	f.Runs[1].GradientBytes, f.Runs[1].ForgivenBytes = 1<<40, 12345
	f.Runs[2].Steps[4].TPS = []float64{0.001, 0.002}
	Summarize(f)
	path := filepath.Join(t.TempDir(), "results.json")
	if err := WriteJSON(path, f); err != nil {
		t.Fatal(err)
	}
	got, err := ReadJSON(path)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, f) {
		t.Errorf("round trip changed the file")
		for i := range f.Runs {
			if !reflect.DeepEqual(got.Runs[i], f.Runs[i]) {
				t.Errorf("run %d differs", i)
			}
		}
		if !reflect.DeepEqual(got.Summary, f.Summary) {
			t.Errorf("summary\n got %+v\nwant %+v", got.Summary, f.Summary)
		}
	}
	if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != 1 {
		t.Errorf("directory holds %d entries, want results.json alone", len(entries))
	}
}

func TestReadJSONRejectsOtherVersions(t *testing.T) {
	dir := t.TempDir()
	for _, v := range []int{0, 2} {
		f := handFile()
		f.Version = v
		path := filepath.Join(dir, "results.json")
		if err := WriteJSON(path, f); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadJSON(path); !errors.Is(err, ErrVersion) {
			t.Errorf("version %d: err = %v, want ErrVersion", v, err)
		}
	}
	if _, err := ReadJSON(filepath.Join(dir, "missing.json")); err == nil {
		t.Error("reading a missing file succeeded")
	}
}

// A NaN cannot be written as JSON; the write fails and leaves the earlier
// file in place.
func TestWriteJSONFailureKeepsEarlierFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "results.json")
	if err := WriteJSON(path, handFile()); err != nil {
		t.Fatal(err)
	}
	bad := handFile()
	bad.Runs[0].TrainingTimeS = math.NaN()
	if err := WriteJSON(path, bad); err == nil {
		t.Fatal("wrote a NaN")
	}
	if _, err := ReadJSON(path); err != nil {
		t.Errorf("earlier file damaged: %v", err)
	}
}

func TestCSVOneRowPerRun(t *testing.T) {
	f := handFile()
	path := filepath.Join(t.TempDir(), "results.csv")
	if err := WriteCSV(path, f); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	records, err := csv.NewReader(in).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(records) != 1+len(f.Runs) {
		t.Fatalf("%d records, want a header and %d runs", len(records), len(f.Runs))
	}
	header := records[0]
	wantStart := []string{"policy", "seed", "profile", "topology", "training_time_s"}
	if !slices.Equal(header[:len(wantStart)], wantStart) {
		t.Errorf("header starts %q, want %q", header[:len(wantStart)], wantStart)
	}
	for _, series := range []string{"steps", "rate", "occupancy"} {
		if slices.Contains(header, series) {
			t.Errorf("header has the series column %q", series)
		}
	}
	col := func(name string) int {
		i := slices.Index(header, name)
		if i < 0 {
			t.Fatalf("no column %q in %q", name, header)
		}
		return i
	}

	// The fifth run is forgive, seed 1.
	row := records[1+4]
	for name, want := range map[string]string{
		"policy":                       "forgive",
		"seed":                         "1",
		"training_time_s":              "84",
		"gradient_bytes_given_up_frac": "0.0755",
		"cnps":                         "100",
		"exempt_flows":                 "10",
		"nongradient_bytes_exact":      "false",
		"budget_invariant_held":        "true",
	} {
		if got := row[col(name)]; got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	// Floats read back to the value written.
	for i, r := range f.Runs {
		got, err := strconv.ParseFloat(records[1+i][col("allreduce_median_noncritical_s")], 64)
		if err != nil || got != r.AllReduceMedianNonCriticalS {
			t.Errorf("run %d: %v, %v; want %v", i, got, err, r.AllReduceMedianNonCriticalS)
		}
	}
}

// Every scalar field of results.Run is a column, under its JSON name.
func TestCSVColumnsFollowRun(t *testing.T) {
	cols := csvColumns()
	typ := reflect.TypeFor[results.Run]()
	var scalars int
	for i := range typ.NumField() {
		if scalar(typ.Field(i).Type.Kind()) {
			scalars++
		}
	}
	if len(cols) != scalars {
		t.Errorf("%d columns for %d scalar fields", len(cols), scalars)
	}
	if cols[0].name != "policy" || cols[len(cols)-1].name != "queue_limit_bytes" {
		t.Errorf("columns run %q .. %q", cols[0].name, cols[len(cols)-1].name)
	}
}

// FuzzDecodeJSON feeds arbitrary bytes to the results.json decoder and
// whatever decodes to the summary and the table: input from disk must not
// panic them.
func FuzzDecodeJSON(f *testing.F) {
	f.Add([]byte(`{"version":1,"policies":["a","b"],"runs":[{"policy":"a","seed":1,"training_time_s":2},{"policy":"b","seed":1,"training_time_s":1}]}`))
	f.Add([]byte(`{"version":1,"runs":[{"policy":"a","steps":[{"step":1,"critical":true,"allreduce_s":[0.1]}],"rate":[{"t_s":1,"bps":2,"exempt":true}]}]}`))
	f.Add([]byte(`{"version":2}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := decodeJSON(data)
		if err != nil {
			return
		}
		Summarize(file)
		if err := Table(io.Discard, file); err != nil {
			t.Fatal(err)
		}
		SkippedPlots(file)
	})
}
