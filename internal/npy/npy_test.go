package npy

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/forgive-emu/forgive/internal/npy/npytest"
)

func sample() Record {
	return Record{
		{Name: "step", Type: Int32, Ints: []int64{1, 2, math.MaxInt32}},
		{Name: "phase", Type: Uint8, Ints: []int64{0, 1, 255}},
		{Name: "offset", Type: Uint64, Ints: []int64{0, 1 << 40, math.MaxInt64}},
		{Name: "delta", Type: Int64, Ints: []int64{-1, 0, math.MinInt64}},
		{Name: "sign", Type: Int8, Ints: []int64{-128, 0, 127}},
		{Name: "n", Type: Uint32, Ints: []int64{0, 7, math.MaxUint32}},
		{Name: "time_s", Type: Float64, Floats: []float64{0, 1.5e-6, -3}},
	}
}

func TestRecordsRoundTrip(t *testing.T) {
	var b bytes.Buffer
	if err := WriteRecords(&b, sample()); err != nil {
		t.Fatal(err)
	}
	data := b.Bytes()
	hlen := int(binary.LittleEndian.Uint16(data[8:10]))
	if (10+hlen)%64 != 0 || data[10+hlen-1] != '\n' {
		t.Fatalf("header of %d bytes: the data must start on a multiple of 64 after a newline", hlen)
	}
	const recBytes = 4 + 1 + 8 + 8 + 1 + 4 + 8
	if len(data)-10-hlen != 3*recBytes {
		t.Fatalf("%d data bytes, want 3 records of %d", len(data)-10-hlen, recBytes)
	}
	rec, s, err := Read(bytes.NewReader(data))
	if err != nil || s != "" {
		t.Fatalf("read: %v, %q", err, s)
	}
	if !reflect.DeepEqual(rec, sample()) {
		t.Fatalf("read back\n%+v\nwant\n%+v", rec, sample())
	}
}

func TestEmptyAndString(t *testing.T) {
	var b bytes.Buffer
	empty := Record{{Name: "a", Type: Int64, Ints: []int64{}}, {Name: "b", Type: Float64, Floats: []float64{}}}
	if err := WriteRecords(&b, empty); err != nil {
		t.Fatal(err)
	}
	rec, _, err := Read(&b)
	if err != nil || len(rec) != 2 || rec[0].Len() != 0 || rec[1].Len() != 0 {
		t.Fatalf("empty array read back as %+v, %v", rec, err)
	}
	for _, want := range []string{"", `{"a": "é ü 🙂"}`} {
		b.Reset()
		if err := WriteString(&b, want); err != nil {
			t.Fatal(err)
		}
		_, got, err := Read(&b)
		if err != nil || got != want {
			t.Fatalf("string %q read back as %q, %v", want, got, err)
		}
	}
}

func TestBadInput(t *testing.T) {
	cases := map[string]Record{
		"want letters":  {{Name: "a b", Type: Int32, Ints: []int64{1}}},
		"twice":         {{Name: "a", Type: Int32, Ints: []int64{1}}, {Name: "a", Type: Int32, Ints: []int64{1}}},
		"none of":       {{Name: "a", Type: "<f4", Floats: []float64{1}}},
		"has 2 values":  {{Name: "a", Type: Int32, Ints: []int64{1}}, {Name: "b", Type: Int32, Ints: []int64{1, 2}}},
		"outside |u1":   {{Name: "a", Type: Uint8, Ints: []int64{256}}},
		"outside <u8":   {{Name: "a", Type: Uint64, Ints: []int64{-1}}},
		"outside <i4":   {{Name: "a", Type: Int32, Ints: []int64{math.MaxInt32 + 1}}},
		"other kind":    {{Name: "a", Type: Float64, Ints: []int64{1}}},
		"needs a field": {},
	}
	for want, r := range cases {
		err := WriteRecords(&bytes.Buffer{}, r)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%+v: error %v, want one saying %q", r, err, want)
		}
	}
	var b bytes.Buffer
	if err := WriteRecords(&b, sample()); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{
		"truncated": b.Bytes()[:b.Len()-3],
		"no magic":  append([]byte("NUMPY"), b.Bytes()[5:]...),
		"short":     b.Bytes()[:9],
	} {
		if _, _, err := Read(bytes.NewReader(data)); !errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v, want ErrFormat", name, err)
		}
	}
}

func TestNPZRoundTrip(t *testing.T) {
	var b bytes.Buffer
	arrays := []Array{{Name: "ranges", Records: sample()}, {Name: "meta", String: `{"ranks": 4}`}}
	if err := WriteNPZ(&b, arrays); err != nil {
		t.Fatal(err)
	}
	got, err := ReadNPZ(bytes.NewReader(b.Bytes()), int64(b.Len()))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, arrays) {
		t.Fatalf("read back %+v, want %+v", got, arrays)
	}
	if err := WriteNPZ(&bytes.Buffer{}, []Array{{Name: "x", String: "a"}, {Name: "x", String: "b"}}); err == nil {
		t.Fatal("two members of one name written")
	}
}

// TestNumpyLoads is the format's real test: numpy itself loads what this
// package writes, without pickle, field for field.
func TestNumpyLoads(t *testing.T) {
	py, err := npytest.Python()
	if err != nil {
		t.Skipf("needs python3 with numpy (Debian: python3-numpy): %v", err)
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "x.npz")
	var b bytes.Buffer
	if err := WriteNPZ(&b, []Array{{Name: "ranges", Records: sample()}, {Name: "meta", String: "héllo"}}); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	script := `
import sys, numpy as np
z = np.load(sys.argv[1], allow_pickle=False)
r = z["ranges"]
assert r.shape == (3,), r.shape
want = [("step", "<i4"), ("phase", "|u1"), ("offset", "<u8"), ("delta", "<i8"), ("sign", "|i1"), ("n", "<u4"), ("time_s", "<f8")]
assert [(n, r.dtype[n].str) for n in r.dtype.names] == want, r.dtype
assert r["step"].tolist() == [1, 2, 2**31 - 1]
assert r["phase"].tolist() == [0, 1, 255]
assert r["offset"].tolist() == [0, 2**40, 2**63 - 1]
assert r["delta"].tolist() == [-1, 0, -2**63]
assert r["sign"].tolist() == [-128, 0, 127]
assert r["n"].tolist() == [0, 7, 2**32 - 1]
assert r["time_s"].tolist() == [0, 1.5e-6, -3]
assert str(z["meta"]) == "héllo", str(z["meta"])
print("ok")
`
	out, err := exec.Command(py, "-c", script, path).CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "ok" {
		t.Fatalf("numpy: %v\n%s", err, out)
	}
}
