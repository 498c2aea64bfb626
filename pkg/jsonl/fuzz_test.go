package jsonl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
)

// FuzzJSONLOpen writes arbitrary bytes as a JSONL file (as a crash or a
// disk problem might leave it), opens it, and checks the contract: open
// never fails on content, the repaired file ends in a newline, every whole
// line that was there before is still there, and a new append reads back
// intact.
func FuzzJSONLOpen(f *testing.F) {
	f.Add([]byte("{\"a\":1}\n{\"a\":2}\n"))
	f.Add([]byte("{\"a\":1}\n{\"a\":"))
	f.Add([]byte("no newline at all"))
	f.Add([]byte("\n\n\n"))
	f.Add([]byte{})
	dir := f.TempDir()
	var n atomic.Int64
	f.Fuzz(func(t *testing.T, content []byte) {
		path := filepath.Join(dir, fmt.Sprintf("f%d.jsonl", n.Add(1)))
		defer os.Remove(path)
		defer os.Remove(path + ".torn")
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		j, torn, err := Open(path, false)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer j.Close()
		whole := content[:bytes.LastIndexByte(content, '\n')+1]
		if torn != len(content)-len(whole) {
			t.Fatalf("torn = %d, want %d", torn, len(content)-len(whole))
		}
		if _, _, err := j.Append(map[string]string{"k": "v\nw"}); err != nil {
			t.Fatal(err)
		}
		after, _ := os.ReadFile(path)
		if !bytes.HasPrefix(after, whole) {
			t.Fatalf("whole lines were lost: before %q, after %q", whole, after)
		}
		var lines [][]byte
		err = Scan(path, 0, -1, func(line []byte, start, end int64) error {
			if end-start != int64(len(line))+1 {
				t.Fatalf("line range %d-%d for %d bytes", start, end, len(line))
			}
			lines = append(lines, append([]byte(nil), line...))
			return nil
		})
		if err != nil && err != errLineTooLong {
			t.Fatal(err)
		}
		var rec map[string]string
		if err := json.Unmarshal(lines[len(lines)-1], &rec); err != nil || rec["k"] != "v\nw" {
			t.Fatalf("appended record reads back as %q (%v)", lines[len(lines)-1], err)
		}
	})
}
