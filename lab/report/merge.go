package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/forgive-emu/forgive/lab/results"
)

// ErrMerge reports shards that do not make one sweep: of different
// sweeps, a run twice or a run missing.
var ErrMerge = errors.New("lab: merge")

// ResultsFile is the results file of path: a directory's results.json,
// or its results.json.gz when it has no results.json (docs/results keeps
// them compressed); any other path itself.
func ResultsFile(path string) string {
	if st, err := os.Stat(path); err != nil || !st.IsDir() {
		return path
	}
	path = filepath.Join(path, "results.json")
	if _, err := os.Stat(path); err != nil {
		if _, gz := os.Stat(path + ".gz"); gz == nil {
			return path + ".gz"
		}
	}
	return path
}

// Shards reads the results.json of each path (a directory holding one, or
// its results.json.gz, or the file itself) for Merge.
func Shards(paths []string) ([]*results.File, error) {
	if len(paths) == 0 {
		return nil, fmt.Errorf("%w: no shard given", ErrMerge)
	}
	files := make([]*results.File, len(paths))
	for i, path := range paths {
		f, err := ReadJSON(ResultsFile(path))
		if err != nil {
			return nil, err
		}
		files[i] = f
	}
	return files, nil
}

// Merge combines the shards of one sweep (names[i] says where files[i]
// came from, for the errors) into the results.json the whole sweep run at
// once would have written: the runs in the sweep's order, the seeds and
// the summary of the whole. The wall-clock fields are the shards': the
// earliest Created, the sum of their wall seconds, each run's wall time.
//
// It refuses shards of different sweeps (naming the options that differ),
// shards that do not divide the sweep alike, a run found twice, a run no
// shard holds and a file whose options do not derive its sweep id.
func Merge(names []string, files []*results.File) (*results.File, error) {
	if len(files) == 0 || len(names) != len(files) {
		return nil, fmt.Errorf("%w: no shard given", ErrMerge)
	}
	first := files[0]
	for i, f := range files {
		sw := f.Sweep
		switch {
		case sw.ID == "":
			return nil, fmt.Errorf("%w: %s has no sweep id (written before sweeps had one)", ErrMerge, names[i])
		case results.SweepID(sw.Options) != sw.ID:
			return nil, fmt.Errorf("%w: %s: its options derive sweep %s, not the %s it names (was it edited?)", ErrMerge, names[i], results.SweepID(sw.Options), sw.ID)
		case sw.ID != first.Sweep.ID:
			return nil, fmt.Errorf("%w: %s is of sweep %s, %s of sweep %s: %s differ", ErrMerge,
				names[0], first.Sweep.ID, names[i], sw.ID, strings.Join(differences(first.Sweep.Options, sw.Options), ", "))
		case shardOf(f).Count != shardOf(first).Count:
			return nil, fmt.Errorf("%w: %s is shard %s, %s shard %s: the shards of a merge divide the sweep alike", ErrMerge,
				names[0], shardOf(first), names[i], shardOf(f))
		}
		if d := differences(header(first), header(f)); len(d) > 0 {
			return nil, fmt.Errorf("%w: %s and %s are of sweep %s but differ in %s (another build?)", ErrMerge, names[0], names[i], sw.ID, strings.Join(d, ", "))
		}
	}
	so := first.Sweep.Options
	count := shardOf(first).Count
	type key struct {
		policy string
		seed   uint64
	}
	type found struct {
		run  *results.Run
		wall *results.WallRun
		from string
	}
	order := map[key]int{}
	var keys []key
	for s := 1; s <= so.Seeds; s++ {
		for _, p := range so.Policies {
			order[key{p, uint64(s)}] = len(keys)
			keys = append(keys, key{p, uint64(s)})
		}
	}
	got := make([]found, len(keys))
	for i, f := range files {
		walls := map[key]*results.WallRun{}
		for j := range f.Wall.Runs {
			w := &f.Wall.Runs[j]
			walls[key{w.Policy, w.Seed}] = w
		}
		sh := shardOf(f)
		for j := range f.Runs {
			r := &f.Runs[j]
			k, ok := order[key{r.Policy, r.Seed}]
			switch {
			case !ok:
				return nil, fmt.Errorf("%w: %s holds run %s seed %d, which is no run of sweep %s", ErrMerge, names[i], r.Policy, r.Seed, first.Sweep.ID)
			case got[k].run != nil:
				return nil, fmt.Errorf("%w: run %s seed %d is in both %s and %s", ErrMerge, r.Policy, r.Seed, got[k].from, names[i])
			case k%sh.Count != sh.Index-1:
				return nil, fmt.Errorf("%w: %s is shard %s but holds run %s seed %d, which is shard %d's", ErrMerge, names[i], sh, r.Policy, r.Seed, k%sh.Count+1)
			}
			got[k] = found{run: r, wall: walls[key{r.Policy, r.Seed}], from: names[i]}
		}
	}
	var missing []string
	for k, g := range got {
		if g.run == nil {
			missing = append(missing, fmt.Sprintf("%s seed %d (shard %d/%d)", keys[k].policy, keys[k].seed, k%count+1, count))
		}
	}
	if len(missing) > 10 {
		missing = append(missing[:10], fmt.Sprintf("%d more", len(missing)-10))
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: sweep %s has %d runs; no shard given holds %s", ErrMerge, first.Sweep.ID, len(keys), strings.Join(missing, ", "))
	}

	m := *first
	m.Sweep = results.Sweep{ID: first.Sweep.ID, Options: so}
	m.Seeds, m.Runs, m.Summary = nil, make([]results.Run, 0, len(keys)), nil
	m.Wall = results.Wall{}
	for s := 1; s <= so.Seeds; s++ {
		m.Seeds = append(m.Seeds, uint64(s))
	}
	for _, f := range files {
		if f.Created.Before(m.Created) {
			m.Created = f.Created
		}
		m.Wall.Seconds += f.Wall.Seconds
	}
	for k, g := range got {
		m.Runs = append(m.Runs, *g.run)
		w := results.WallRun{Policy: keys[k].policy, Seed: keys[k].seed}
		if g.wall != nil {
			w = *g.wall
		}
		m.Wall.Runs = append(m.Wall.Runs, w)
	}
	Summarize(&m)
	return &m, nil
}

// shardOf is the file's shard; the whole sweep is shard 1/1.
func shardOf(f *results.File) results.Shard {
	if f.Sweep.Shard == nil {
		return results.Shard{Index: 1, Count: 1}
	}
	return *f.Sweep.Shard
}

// header is what every shard of a sweep shares: the file without its
// sweep, runs, summary, seeds and wall-clock fields.
func header(f *results.File) results.File {
	h := *f
	h.Sweep, h.Runs, h.Summary, h.Seeds = results.Sweep{}, nil, nil, nil
	h.Created, h.Wall = time.Time{}, results.Wall{}
	return h
}

// differences names the JSON fields in which two values of one type
// differ, as "name (a vs b)".
func differences(a, b any) []string {
	var ma, mb map[string]json.RawMessage
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	if json.Unmarshal(ja, &ma) != nil || json.Unmarshal(jb, &mb) != nil {
		if reflect.DeepEqual(a, b) {
			return nil
		}
		return []string{"their contents"}
	}
	var names []string
	for k := range ma {
		names = append(names, k)
	}
	for k := range mb {
		if _, ok := ma[k]; !ok {
			names = append(names, k)
		}
	}
	slices.Sort(names)
	var out []string
	for _, k := range names {
		if string(ma[k]) != string(mb[k]) {
			out = append(out, fmt.Sprintf("%s (%s vs %s)", k, orAbsent(ma[k]), orAbsent(mb[k])))
		}
	}
	return out
}

func orAbsent(v json.RawMessage) string {
	if len(v) == 0 {
		return "absent"
	}
	if len(v) > 60 {
		return string(v[:57]) + "..."
	}
	return string(v)
}

// CopyPatterns copies the loss-pattern file of every run of the merged
// f from the shard that ran it (paths as given to Shards) into dir. A run
// whose results name a pattern file that no shard holds is an error; a
// run without one (written before the lab exported patterns) is skipped.
func CopyPatterns(paths []string, dir string, f *results.File) error {
	var dirs []string
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			p = filepath.Dir(p)
		}
		dirs = append(dirs, p)
	}
	for _, r := range f.Runs {
		if r.LossPattern == nil {
			continue
		}
		name := r.LossPattern.File
		if filepath.Base(name) != name || name == "." || name == ".." {
			return fmt.Errorf("%w: run %s seed %d names the pattern file %q, which is not a file name", ErrMerge, r.Policy, r.Seed, name)
		}
		var data []byte
		for _, d := range dirs {
			b, err := os.ReadFile(filepath.Join(d, name))
			if err == nil {
				data = b
				break
			}
			if !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		if data == nil {
			return fmt.Errorf("%w: run %s seed %d: no shard directory holds its loss pattern %s", ErrMerge, r.Policy, r.Seed, name)
		}
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
