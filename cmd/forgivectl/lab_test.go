package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/lab/results"
)

// `forgivectl lab` with its defaults, through cobra as the README runs it
// (one seed of two steps instead of three of seven): a default that
// breaks the run, as --subflows 4 with --entropy single once did, fails
// here; the simulator's run of the same lab gives the headline's line.
func TestLabDefaultsRun(t *testing.T) {
	if testing.Short() {
		t.Skip("starts 11 processes for each of three runs; skipped with -short")
	}
	out := filepath.Join(t.TempDir(), "lab-out")
	code, text := forgivectl(t, "lab", "--steps", "2", "--seeds", "1", "--out", out)
	if code != 0 {
		t.Fatalf("forgivectl lab --steps 2 --seeds 1: exit %d\n%s", code, text)
	}
	for _, want := range []string{"tensor-parallel exchange median: dcqcn ", "headline: forgive's training time against dcqcn's",
		"over 1 seed on loopback", "(one seed: margin unknown)", "the simulator, same lab on a virtual clock: "} {
		if !strings.Contains(text, want) {
			t.Errorf("the default lab's output lacks %q:\n%s", want, text)
		}
	}
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f results.File
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	want := []string{"dcqcn", "shed-tight", "forgive"}
	if len(f.Runs) != len(want) || f.Topology != "leaf-spine-2x4" || f.Profile.Name != "loopback" || f.Ranks != 8 || f.Steps != 2 {
		t.Fatalf("results: %d runs, topology %q, profile %q, %d ranks, %d steps; want the defaults", len(f.Runs), f.Topology, f.Profile.Name, f.Ranks, f.Steps)
	}
	// Plain by default (docs/lab.md, "Sealed runs"): nothing sealed.
	if f.Seal != "off" {
		t.Errorf("results: seal %q, want the default off", f.Seal)
	}
	for i, r := range f.Runs {
		if r.Policy != want[i] {
			t.Errorf("run %d is %s, want %s", i, r.Policy, want[i])
		}
		if r.SealedPackets != 0 {
			t.Errorf("%s: %d packets sealed with the default --seal off", r.Policy, r.SealedPackets)
		}
		if !r.BudgetInvariantHeld || !r.NonGradientBytesExact || !r.GradientSumsExact {
			t.Errorf("%s: invariant %v, non-gradient exact %v, sums exact %v", r.Policy, r.BudgetInvariantHeld, r.NonGradientBytesExact, r.GradientSumsExact)
		}
	}
	// Two steps are both critical: no non-critical all-reduce, said so.
	for _, want := range []string{"n/a / ", "n/a non-crit", "noise ±?"} {
		if !strings.Contains(text, want) {
			t.Errorf("the table of two steps and one seed lacks %q:\n%s", want, text)
		}
	}
}

// The table names the profile in one line; --verbose adds every derived
// parameter. The rest of the output is the same.
func TestLabVerbose(t *testing.T) {
	args := []string{"lab", "--placement", "sim", "--policies", "dcqcn,forgive", "--steps", "2", "--scale", "1/16", "--out", ""}
	code, short := forgivectl(t, args...)
	if code != 0 {
		t.Fatalf("forgivectl %s: exit %d\n%s", strings.Join(args, " "), code, short)
	}
	code, verbose := forgivectl(t, append(args, "--verbose")...)
	if code != 0 {
		t.Fatalf("forgivectl %s --verbose: exit %d\n%s", strings.Join(args, " "), code, verbose)
	}
	if !strings.Contains(short, "profile loopback   topology leaf-spine-2x4   ranks 8   steps 2   seeds 1   placement sim   scale 1/16\n") {
		t.Errorf("no one-line header:\n%s", short)
	}
	for _, derived := range []string{"switch.ecn.kmin=", "dcqcn.rate_timer="} {
		if strings.Contains(short, derived) {
			t.Errorf("without --verbose the table prints %q:\n%s", derived, short)
		}
		if !strings.Contains(verbose, derived) {
			t.Errorf("--verbose does not print %q:\n%s", derived, verbose)
		}
	}
	// The sim placement is deterministic: below the header both tables
	// are the same, byte for byte.
	_, shortRest, _ := strings.Cut(short, "\npolicy ")
	_, verboseRest, _ := strings.Cut(verbose, "\npolicy ")
	if shortRest == "" || shortRest != verboseRest {
		t.Errorf("the tables differ below the header:\n%s\n---\n%s", short, verbose)
	}
}

// An explicit --subflows without subflow entropy names both flags and is
// a usage error (exit 2); the default --subflows applies only with
// --entropy subflows, so neither spray nor subflows needs it spelt out.
func TestLabSubflowsNeedSubflowEntropy(t *testing.T) {
	for _, args := range [][]string{
		{"lab", "--subflows", "4"},
		{"lab", "--entropy", "spray", "--subflows", "2"},
		{"lab", "--subflows", "8", "--dry-run"},
	} {
		code, out := forgivectl(t, args...)
		if code != 2 || !strings.Contains(out, "--subflows") || !strings.Contains(out, "--entropy") {
			t.Errorf("forgivectl %s: exit %d, want 2 and an error naming --subflows and --entropy:\n%s", strings.Join(args, " "), code, out)
		}
	}
	for _, args := range [][]string{
		{"lab", "--dry-run"},
		{"lab", "--dry-run", "--entropy", "spray"},
		{"lab", "--dry-run", "--entropy", "subflows"},
		{"lab", "--dry-run", "--entropy", "subflows", "--subflows", "2"},
	} {
		code, out := forgivectl(t, args...)
		if code != 0 {
			t.Errorf("forgivectl %s: exit %d:\n%s", strings.Join(args, " "), code, out)
		}
	}
	if _, out := forgivectl(t, "lab", "--dry-run", "--entropy", "subflows"); !strings.Contains(out, "entropy subflows (4)") {
		t.Errorf("--entropy subflows without --subflows should take the default 4:\n%s", out)
	}
	if _, out := forgivectl(t, "lab", "--help"); !strings.Contains(out, "applies only with --entropy subflows") {
		t.Errorf("--help does not say where --subflows applies:\n%s", out)
	}
}

// On the seed's fabric at the seed's rate the dry run says whether the
// runs go payload-free and what they would register (60 GB), with the
// seed's fabric and step. (Which one auto picks depends on the machine:
// lab's TestPayloadModes tests that rule.)
func TestLabDryRunAtTheSeedsRate(t *testing.T) {
	args := []string{"lab", "--dry-run", "--placement", "sim", "--topology", "leaf-spine-8x8-4to1", "--profile", "seed-400g-paper"}
	code, out := forgivectl(t, append(args, "--payload-free", "on")...)
	if code != 0 || !strings.Contains(out, "payloads   none (payload-free): 60.25 GB would be registered") ||
		!strings.Contains(out, "(with-compute)") || !strings.Contains(out, "entropy spray") {
		t.Errorf("forgivectl %s: exit %d, want payload-free, with-compute and spray:\n%s", strings.Join(args, " "), code, out)
	}
	code, out = forgivectl(t, append(args, "--payload-free", "off")...)
	if code != 0 || !strings.Contains(out, "payloads   every byte real: 60.25 GB") {
		t.Errorf("--payload-free off: exit %d:\n%s", code, out)
	}
}

// lab --dry-run refuses what a run refuses, before anything starts, and
// prints the derived profile and the step classification otherwise.
func TestLabDryRun(t *testing.T) {
	code, out := forgivectl(t, "lab", "--dry-run")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	for _, want := range []string{"dry run", "leaf-spine-2x4", "8 ranks", "dcqcn, shed-tight, forgive",
		"seeds      1..3", "critical by the fixed schedule: 1 2 3 7", "derived profile (loopback as leaf-spine-2x4 uses it)", "uplink_rate", "switch.ecn.kmin", "reliability.window",
		"payloads   every byte real"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run lacks %q:\n%s", want, out)
		}
	}
	// The detector's verdict over the shipped trace is the fixed schedule.
	_, out = forgivectl(t, "lab", "--dry-run", "--steps", "20", "--norms", "../../traces/accordion-20.txt")
	if !strings.Contains(out, "critical by Accordion's detector over ../../traces/accordion-20.txt: 1 2 3 20") {
		t.Errorf("dry run with the trace:\n%s", out)
	}
	norms := filepath.Join(t.TempDir(), "short.txt")
	if err := os.WriteFile(norms, []byte("1\n2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bad := map[string][]string{
		"oversubscription": {"--topology", writeFile(t, "bad.yaml", "kind: leaf-spine\nname: x\nleaves: 2\nhosts_per_leaf: 4\nspines: 1\noversubscription: two\n")},
		"nonexistent":      {"--profile", "nonexistent"},
		"tcp-reno":         {"--policies", "dcqcn,tcp-reno"},
		"--ranks 7":        {"--ranks", "7"},
		"--steps 0":        {"--steps", "0"},
		"--seeds 0":        {"--seeds", "0"},
		"2 steps of norms": {"--norms", norms},
		"--placement":      {"--placement", "moon"},
		"--gradient-bytes": {"--gradient-bytes", "-1"},
		"power of two":     {"--entropy", "subflows", "--subflows", "3"},
		"--entropy":        {"--entropy", "zigzag"},
		"--bin-dir":        {"--bin-dir", "/nonexistent"},
		"not a directory":  {"--out", filepath.Join(norms, "out")},
		"--compute":        {"--compute", "-1s"},
	}
	for want, args := range bad {
		code, out := forgivectl(t, append([]string{"lab", "--dry-run"}, args...)...)
		if code != 2 || !strings.Contains(out, want) {
			t.Errorf("lab --dry-run %s: exit %d, want 2 naming %q:\n%s", strings.Join(args, " "), code, want, out)
		}
	}
}

// --shard-from-zero takes a 0-based index (a Kubernetes Indexed Job's
// JOB_COMPLETION_INDEX): 0/3 is the shard 1/3 names, and the indices
// outside 0..n-1 are refused.
func TestLabShardFromZero(t *testing.T) {
	sweep := []string{"lab", "--dry-run", "--placement", "sim", "--topology", "star-8", "--seeds", "2"}
	dry := func(args ...string) (int, string) {
		return forgivectl(t, append(append([]string{}, sweep...), args...)...)
	}
	for i := 0; i < 3; i++ {
		code0, out0 := dry("--shard", fmt.Sprintf("%d/3", i), "--shard-from-zero")
		code1, out1 := dry("--shard", fmt.Sprintf("%d/3", i+1))
		if code0 != 0 || code1 != 0 || out0 != out1 {
			t.Errorf("--shard %d/3 --shard-from-zero (exit %d) is not --shard %d/3 (exit %d):\n%s\n---\n%s", i, code0, i+1, code1, out0, out1)
		}
		if !strings.Contains(out0, fmt.Sprintf("%d/3", i+1)) {
			t.Errorf("--shard %d/3 --shard-from-zero names no shard %d/3:\n%s", i, i+1, out0)
		}
	}
	if _, a := dry("--shard", "0/3", "--shard-from-zero"); strings.Contains(a, "shard 2/3") {
		t.Errorf("shard 0/3 from zero ran as 2/3:\n%s", a)
	}
	for _, args := range [][]string{{"--shard", "3/3", "--shard-from-zero"}, {"--shard", "-1/3", "--shard-from-zero"}, {"--shard-from-zero"}, {"--shard", "x/3", "--shard-from-zero"}} {
		if code, out := dry(args...); code != 2 || !strings.Contains(out, "--shard") {
			t.Errorf("lab %s: exit %d, want 2 naming --shard:\n%s", strings.Join(args, " "), code, out)
		}
	}
}

// The other commands' --dry-run checks their flags and arguments and
// contacts nothing: a socket that does not exist is fine, a bad flag not.
func TestOtherCommandsDryRun(t *testing.T) {
	file := writeFile(t, "in.bin", "data")
	ok := [][]string{
		{"status", "--socket", "/nonexistent.sock"},
		{"counters"},
		{"steps", "--limit", "3"},
		{"send", "--peer", "2", file},
		{"recv", "--peer", "1", "--out", "x.bin"},
		{"topo", "up", "leaf-spine-2x4", "--ranks", "4"},
		{"topo", "down", "--id", "abc123"},
		{"topo", "status"},
		{"netns-exec", "fgv-abc123-leaf1", "--", "true"},
	}
	for _, args := range ok {
		code, out := forgivectl(t, append([]string{"--dry-run"}, args...)...)
		if code != 0 || !strings.Contains(out, "dry run") {
			t.Errorf("forgivectl --dry-run %s: exit %d:\n%s", strings.Join(args, " "), code, out)
		}
	}
	bad := [][]string{
		{"steps", "--limit", "-1"},
		{"send", "--peer", "2", "/nonexistent/file"},
		{"send", file},
		{"recv", "--peer", "1"},
		{"topo", "up", "no-such-topology"},
		{"topo", "up", "leaf-spine-2x4", "--policy", "tcp-reno"},
		{"topo", "down", "--id", "BAD"},
		{"netns-exec", "myns", "--", "true"},
		{"status", "--timeout", "0s"},
	}
	for _, args := range bad {
		if code, out := forgivectl(t, append([]string{"--dry-run"}, args...)...); code == 0 {
			t.Errorf("forgivectl --dry-run %s succeeded:\n%s", strings.Join(args, " "), out)
		}
	}
}

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// The dry run of the seed's 64 ranks with direct on [8, 8] shows seven
// senders into every receiver in every phase, and the schedule's ideal.
func TestLabDryRunShowsTheSchedule(t *testing.T) {
	code, out := forgivectl(t, "lab", "--dry-run", "--placement", "sim", "--topology", "leaf-spine-8x8-4to1", "--profile", "seed-400g-paper",
		"--collective", "direct", "--dims", "8,8")
	if code != 0 || !strings.Contains(out, "direct dims 8x8: 1 data-parallel group(s) of 64 ranks") || !strings.Contains(out, "fan-in up to 7") {
		t.Fatalf("exit %d, want the schedule with a fan-in of 7:\n%s", code, out)
	}
	for ph := range 4 {
		if !strings.Contains(out, fmt.Sprintf("phase %d", ph)) {
			t.Errorf("no phase %d:\n%s", ph, out)
		}
	}
	if n := strings.Count(out, "fan-in 7 senders into a receiver"); n != 4 {
		t.Errorf("%d phases with a fan-in of 7, want 4:\n%s", n, out)
	}
	if !strings.Contains(out, "ideal") || !strings.Contains(out, "uplinks") {
		t.Errorf("no ideal time at the bottleneck:\n%s", out)
	}
}

// lab --out refuses a directory that holds another run's results, so that
// one run's files never sit beside another's; --replace removes that
// run's files (and only the lab's: a file of the user's stays) before the
// run writes its own.
func TestLabOutRefusesAnotherRunsResults(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"results.json":                      `{"earlier": true}`,
		"loss-pattern-shed-tight-seed1.npz": "an earlier run's pattern",
		"notes.txt":                         "the user's",
	}
	for n, body := range files {
		if err := os.WriteFile(filepath.Join(dir, n), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	args := append(append([]string{}, tinySweep...), "--seeds", "1", "--out", dir)
	code, out := forgivectl(t, args...)
	if code != 2 || !strings.Contains(out, "--replace") || !strings.Contains(out, "loss-pattern-shed-tight-seed1.npz") {
		t.Fatalf("into a directory of another run's results: exit %d, want 2 naming its files and --replace:\n%s", code, out)
	}
	for n, body := range files {
		if b, err := os.ReadFile(filepath.Join(dir, n)); err != nil || string(b) != body {
			t.Errorf("%s after the refusal: %q, %v; want it untouched", n, b, err)
		}
	}
	code, out = forgivectl(t, append(args, "--replace")...)
	if code != 0 {
		t.Fatalf("--replace: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "loss-pattern-shed-tight-seed1.npz")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the earlier run's loss pattern is still there after --replace: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "notes.txt")); err != nil || string(b) != files["notes.txt"] {
		t.Errorf("notes.txt after --replace: %q, %v; want it untouched", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "results.json")); err != nil || strings.Contains(string(b), "earlier") {
		t.Errorf("results.json after --replace is not the new run's: %v", err)
	}
	for _, n := range []string{"loss-pattern-dcqcn-seed1.npz", "loss-pattern-forgive-seed1.npz"} {
		if _, err := os.Stat(filepath.Join(dir, n)); err != nil {
			t.Errorf("the new run's %s: %v", n, err)
		}
	}
}

// With no collective flags the dry run on seed-400g shows the profile's
// reading and says where it came from; --collective ring --flows
// persistent give the lab's flat ring; --flow-per-message and a
// contrary --flows are refused.
func TestLabDryRunNamesTheProfilesReading(t *testing.T) {
	args := []string{"lab", "--dry-run", "--placement", "sim", "--topology", "leaf-spine-8x8-4to1", "--profile", "seed-400g", "--payload-free", "on"}
	code, out := forgivectl(t, args...)
	if code != 0 || !strings.Contains(out, "schedule   direct dims 8x8 flow-per-message: 1 data-parallel group(s) of 64 ranks") ||
		!strings.Contains(out, "seed-400g's reading of the job") {
		t.Errorf("exit %d, want the profile's reading, named:\n%s", code, out)
	}
	code, out = forgivectl(t, append(args, "--collective", "ring", "--flows", "persistent")...)
	if code != 0 || !strings.Contains(out, "schedule   ring: 1 data-parallel group(s) of 64 ranks") || strings.Contains(out, "reading of the job") {
		t.Errorf("--collective ring --flows persistent: exit %d, want the flat ring:\n%s", code, out)
	}
	code, out = forgivectl(t, append(args, "--flows", "persistent", "--flow-per-message")...)
	if code != 2 || !strings.Contains(out, `--flow-per-message is --flows message, but --flows says "persistent"`) {
		t.Errorf("--flows persistent --flow-per-message: exit %d:\n%s", code, out)
	}
}
