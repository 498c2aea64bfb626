package jsonl

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestOpenRepairsTornTail(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l.jsonl")
	if err := os.WriteFile(path, []byte("{\"a\":1}\n{\"a\":"), 0o600); err != nil {
		t.Fatal(err)
	}
	j, torn, err := Open(path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer j.Close()
	if torn != 5 || j.Size() != 8 {
		t.Errorf("Open: torn = %d, size = %d, want 5, 8", torn, j.Size())
	}
	if got, _ := os.ReadFile(path + ".torn"); string(got) != "{\"a\":\n" {
		t.Errorf(".torn = %q, want the torn bytes", got)
	}
	start, end, err := j.Append(map[string]int{"b": 2})
	if err != nil || start != 8 || end != 16 {
		t.Errorf("Append = %d, %d, %v, want 8, 16, nil", start, end, err)
	}
	var lines []string
	if err := Scan(path, 0, -1, func(line []byte, _, _ int64) error {
		lines = append(lines, string(line))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(lines) != 2 || lines[0] != `{"a":1}` || lines[1] != `{"b":2}` {
		t.Errorf("Scan = %q", lines)
	}
}

func TestLineStart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l")
	os.WriteFile(path, []byte("ab\ncd\n"), 0o600)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, c := range []struct{ end, want int64 }{{5, 3}, {2, 0}, {0, 0}} {
		if got, err := LineStart(f, c.end); err != nil || got != c.want {
			t.Errorf("LineStart(%d) = %d, %v, want %d", c.end, got, err, c.want)
		}
	}
}

// TestLineStartLongLines: lines longer than the first 4 KiB read and than
// the largest block are found whole.
func TestLineStartLongLines(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "l")
	var data []byte
	var ends, starts []int64
	for _, n := range []int{10, 4095, 4096, 4097, 10 << 10, 200 << 10, 1} {
		starts = append(starts, int64(len(data)))
		data = append(data, bytes.Repeat([]byte{'x'}, n)...)
		data = append(data, '\n')
		ends = append(ends, int64(len(data)-1))
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i := range ends {
		if got, err := LineStart(f, ends[i]); err != nil || got != starts[i] {
			t.Errorf("line %d: LineStart(%d) = %d, %v, want %d", i, ends[i], got, err, starts[i])
		}
	}
}
