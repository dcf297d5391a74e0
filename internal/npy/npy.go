// Package npy writes NumPy's .npy and .npz formats: one-dimensional
// structured arrays (a record of little-endian integer and float fields)
// and 0-d unicode strings, which numpy.load reads with numpy alone
// (allow_pickle off). It reads back what it writes, and no more.
//
// The format is NumPy's own, version 1.0
// (numpy.org/doc/stable/reference/generated/numpy.lib.format.html): the
// magic "\x93NUMPY", the version bytes 1 and 0, a little-endian uint16
// header length, an ASCII Python dict literal {'descr': ..., 'fortran_order':
// False, 'shape': (n,), } padded with spaces and ended by a newline so
// that the data starts on a multiple of 64 bytes, then the data in C
// order. An .npz is a zip archive of .npy files, one per array, each
// named NAME.npy.
//
// github.com/sbinet/npyio reads and writes arrays of one scalar type
// but refuses structs, so it cannot write a structured array.
package npy

import (
	"archive/zip"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// ErrFormat reports bytes that are not an array this package writes.
var ErrFormat = errors.New("npy: not an array this package reads")

// A Type is a field's NumPy type: little-endian integers and floats.
type Type string

// The field types.
const (
	Int8    Type = "|i1"
	Uint8   Type = "|u1"
	Int32   Type = "<i4"
	Uint32  Type = "<u4"
	Int64   Type = "<i8"
	Uint64  Type = "<u8"
	Float64 Type = "<f8"
)

func (t Type) size() int {
	switch t {
	case Int8, Uint8:
		return 1
	case Int32, Uint32:
		return 4
	case Int64, Uint64, Float64:
		return 8
	}
	return 0
}

// A Field is one column of a structured array: its name, its type and
// its values, one per record, as int64 (every integer type; a value out
// of the type's range is an error) or float64 (Float64).
type Field struct {
	Name   string
	Type   Type
	Ints   []int64
	Floats []float64
}

// Len is the number of values the field holds.
func (f Field) Len() int {
	if f.Type == Float64 {
		return len(f.Floats)
	}
	return len(f.Ints)
}

var nameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// Record is a structured array's record type, in field order.
type Record []Field

func (r Record) check() (int, error) {
	if len(r) == 0 {
		return 0, errors.New("npy: a structured array needs a field")
	}
	n := r[0].Len()
	seen := map[string]bool{}
	for _, f := range r {
		switch {
		case !nameRE.MatchString(f.Name):
			return 0, fmt.Errorf("npy: field name %q: want letters, digits and _", f.Name)
		case seen[f.Name]:
			return 0, fmt.Errorf("npy: field %q twice", f.Name)
		case f.Type.size() == 0:
			return 0, fmt.Errorf("npy: field %q: type %q is none of |i1 |u1 <i4 <u4 <i8 <u8 <f8", f.Name, f.Type)
		case f.Type == Float64 && f.Ints != nil, f.Type != Float64 && f.Floats != nil:
			return 0, fmt.Errorf("npy: field %q of type %s holds the other kind of value", f.Name, f.Type)
		case f.Len() != n:
			return 0, fmt.Errorf("npy: field %q has %d values, field %q %d", f.Name, f.Len(), r[0].Name, n)
		}
		seen[f.Name] = true
		lo, hi := bounds(f.Type)
		for i, v := range f.Ints {
			if (f.Type == Uint64 && v < 0) || (f.Type != Uint64 && (v < lo || v > hi)) {
				return 0, fmt.Errorf("npy: field %q value %d is %d, outside %s", f.Name, i, v, f.Type)
			}
		}
	}
	return n, nil
}

// bounds is an integer type's range, as int64 (Uint64's upper half is not
// representable: the values are int64).
func bounds(t Type) (int64, int64) {
	switch t {
	case Int8:
		return math.MinInt8, math.MaxInt8
	case Uint8:
		return 0, math.MaxUint8
	case Int32:
		return math.MinInt32, math.MaxInt32
	case Uint32:
		return 0, math.MaxUint32
	case Uint64:
		return 0, math.MaxInt64
	}
	return math.MinInt64, math.MaxInt64
}

func (r Record) descr() string {
	var b strings.Builder
	b.WriteString("[")
	for i, f := range r {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "('%s', '%s')", f.Name, f.Type)
	}
	b.WriteString("]")
	return b.String()
}

// header writes the magic, version and padded header dict.
func header(w io.Writer, descr, shape string) error {
	dict := fmt.Sprintf("{'descr': %s, 'fortran_order': False, 'shape': %s, }", descr, shape)
	// magic (6) + version (2) + length (2) + dict + padding + '\n'
	total := 10 + len(dict) + 1
	pad := (64 - total%64) % 64
	hlen := len(dict) + pad + 1
	if hlen > math.MaxUint16 {
		return fmt.Errorf("npy: a header of %d bytes is more than version 1.0 holds", hlen)
	}
	var b bytes.Buffer
	b.WriteString("\x93NUMPY\x01\x00")
	_ = binary.Write(&b, binary.LittleEndian, uint16(hlen))
	b.WriteString(dict)
	b.WriteString(strings.Repeat(" ", pad))
	b.WriteByte('\n')
	_, err := w.Write(b.Bytes())
	return err
}

// WriteRecords writes a one-dimensional structured array of r's fields
// as a .npy file.
func WriteRecords(w io.Writer, r Record) error {
	n, err := r.check()
	if err != nil {
		return err
	}
	if err := header(w, r.descr(), fmt.Sprintf("(%d,)", n)); err != nil {
		return err
	}
	size := 0
	for _, f := range r {
		size += f.Type.size()
	}
	const batch = 4096
	buf := make([]byte, 0, size*min(max(n, 1), batch))
	for i := range n {
		for _, f := range r {
			switch f.Type {
			case Int8, Uint8:
				buf = append(buf, byte(f.Ints[i]))
			case Int32, Uint32:
				buf = binary.LittleEndian.AppendUint32(buf, uint32(f.Ints[i]))
			case Int64, Uint64:
				buf = binary.LittleEndian.AppendUint64(buf, uint64(f.Ints[i]))
			case Float64:
				buf = binary.LittleEndian.AppendUint64(buf, math.Float64bits(f.Floats[i]))
			}
		}
		if len(buf) >= size*batch || i == n-1 {
			if _, err := w.Write(buf); err != nil {
				return err
			}
			buf = buf[:0]
		}
	}
	return nil
}

// WriteString writes s as a 0-d unicode array (numpy's '<U' type,
// UTF-32LE): str(numpy.load(f)) is s.
func WriteString(w io.Writer, s string) error {
	if !utf8.ValidString(s) {
		return errors.New("npy: a string that is not UTF-8")
	}
	rs := []rune(s)
	if err := header(w, fmt.Sprintf("'<U%d'", max(len(rs), 1)), "()"); err != nil {
		return err
	}
	buf := make([]byte, 0, 4*max(len(rs), 1))
	for _, c := range rs {
		buf = binary.LittleEndian.AppendUint32(buf, uint32(c))
	}
	if len(rs) == 0 {
		buf = append(buf, 0, 0, 0, 0)
	}
	_, err := w.Write(buf)
	return err
}

// An Array is one member of an .npz: a structured array (Records) or a
// string (String, when Records is nil).
type Array struct {
	Name    string
	Records Record
	String  string
}

// WriteNPZ writes the arrays as an .npz (a zip of NAME.npy files,
// deflated, as numpy.savez_compressed writes them).
func WriteNPZ(w io.Writer, arrays []Array) error {
	zw := zip.NewWriter(w)
	seen := map[string]bool{}
	for _, a := range arrays {
		if !nameRE.MatchString(a.Name) || seen[a.Name] {
			return fmt.Errorf("npy: npz member name %q: want a new name of letters, digits and _", a.Name)
		}
		seen[a.Name] = true
		fw, err := zw.CreateHeader(&zip.FileHeader{Name: a.Name + ".npy", Method: zip.Deflate})
		if err != nil {
			return err
		}
		if a.Records != nil {
			err = WriteRecords(fw, a.Records)
		} else {
			err = WriteString(fw, a.String)
		}
		if err != nil {
			return fmt.Errorf("npy: %s: %w", a.Name, err)
		}
	}
	return zw.Close()
}

// --- reading back -------------------------------------------------------------

var (
	dictRE  = regexp.MustCompile(`^\{'descr': (.*), 'fortran_order': False, 'shape': (\(\)|\((\d+),\)), \} *\n$`)
	fieldRE = regexp.MustCompile(`\('([A-Za-z_][A-Za-z0-9_]*)', '([|<][iuf][148])'\)`)
	strRE   = regexp.MustCompile(`^'<U(\d+)'$`)
)

// Read reads one .npy this package wrote: a structured array's fields
// (str empty) or a string.
func Read(r io.Reader) (rec Record, str string, err error) {
	data, err := io.ReadAll(r)
	if err != nil {
		return nil, "", err
	}
	if len(data) < 10 || string(data[:8]) != "\x93NUMPY\x01\x00" {
		return nil, "", fmt.Errorf("%w: no version 1.0 magic", ErrFormat)
	}
	hlen := int(binary.LittleEndian.Uint16(data[8:10]))
	if 10+hlen > len(data) {
		return nil, "", fmt.Errorf("%w: a header of %d bytes in a file of %d", ErrFormat, hlen, len(data))
	}
	m := dictRE.FindStringSubmatch(string(data[10 : 10+hlen]))
	if m == nil {
		return nil, "", fmt.Errorf("%w: header %q", ErrFormat, data[10:10+hlen])
	}
	body := data[10+hlen:]
	if s := strRE.FindStringSubmatch(m[1]); s != nil {
		k, _ := strconv.Atoi(s[1])
		if m[2] != "()" || len(body) != 4*k {
			return nil, "", fmt.Errorf("%w: a string of %d characters in %d bytes, shape %s", ErrFormat, k, len(body), m[2])
		}
		var rs []rune
		for i := range k {
			c := rune(binary.LittleEndian.Uint32(body[4*i:]))
			if c == 0 {
				break
			}
			rs = append(rs, c)
		}
		return nil, string(rs), nil
	}
	if m[3] == "" {
		return nil, "", fmt.Errorf("%w: a 0-d structured array", ErrFormat)
	}
	n, err := strconv.Atoi(m[3])
	if err != nil {
		return nil, "", fmt.Errorf("%w: shape %s", ErrFormat, m[2])
	}
	fs := fieldRE.FindAllStringSubmatch(m[1], -1)
	if len(fs) == 0 || m[1] != "["+strings.Join(slices.Collect(func(yield func(string) bool) {
		for _, f := range fs {
			if !yield(f[0]) {
				return
			}
		}
	}), ", ")+"]" {
		return nil, "", fmt.Errorf("%w: descr %s", ErrFormat, m[1])
	}
	size := 0
	for _, f := range fs {
		t := Type(f[2])
		if t.size() == 0 {
			return nil, "", fmt.Errorf("%w: field %s of type %s", ErrFormat, f[1], f[2])
		}
		size += t.size()
		fd := Field{Name: f[1], Type: t}
		if t == Float64 {
			fd.Floats = make([]float64, 0, n)
		} else {
			fd.Ints = make([]int64, 0, n)
		}
		rec = append(rec, fd)
	}
	if len(body) != n*size {
		return nil, "", fmt.Errorf("%w: %d records of %d bytes in %d bytes", ErrFormat, n, size, len(body))
	}
	off := 0
	for range n {
		for j := range rec {
			f := &rec[j]
			switch f.Type {
			case Int8:
				f.Ints = append(f.Ints, int64(int8(body[off])))
			case Uint8:
				f.Ints = append(f.Ints, int64(body[off]))
			case Int32:
				f.Ints = append(f.Ints, int64(int32(binary.LittleEndian.Uint32(body[off:]))))
			case Uint32:
				f.Ints = append(f.Ints, int64(binary.LittleEndian.Uint32(body[off:])))
			case Int64, Uint64:
				f.Ints = append(f.Ints, int64(binary.LittleEndian.Uint64(body[off:])))
			case Float64:
				f.Floats = append(f.Floats, math.Float64frombits(binary.LittleEndian.Uint64(body[off:])))
			}
			off += f.Type.size()
		}
	}
	return rec, "", nil
}

// ReadNPZ reads an .npz this package wrote, its arrays in the archive's
// order.
func ReadNPZ(r io.ReaderAt, size int64) ([]Array, error) {
	zr, err := zip.NewReader(r, size)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFormat, err)
	}
	var out []Array
	for _, f := range zr.File {
		name, ok := strings.CutSuffix(f.Name, ".npy")
		if !ok {
			return nil, fmt.Errorf("%w: member %q is no .npy", ErrFormat, f.Name)
		}
		rc, err := f.Open()
		if err != nil {
			return nil, err
		}
		rec, s, err := Read(rc)
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Name, err)
		}
		out = append(out, Array{Name: name, Records: rec, String: s})
	}
	return out, nil
}

// Field returns the field called name, if r has one.
func (r Record) Field(name string) (Field, bool) {
	for _, f := range r {
		if f.Name == name {
			return f, true
		}
	}
	return Field{}, false
}
