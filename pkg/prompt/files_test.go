package prompt

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadCapped: whatever the file's size against the first read's
// buffer and the read limit, the text is the file's, capped as Cap caps it.
func TestReadCapped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, budget := range []int{100, 300, 2000} {
		for _, size := range []int{0, 1, 99, 100, 101, 1023, 1024, 1025, 2047, 4*budget + 3, 4*budget + 4, 4*budget + 5, 20000} {
			// Lines of varied runes, some of them multi-byte.
			text := strings.Repeat("ab ç\n", size/6+1)[:size]
			path := filepath.Join(dir, "f")
			if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
				t.Fatal(err)
			}
			got, cut := ReadCapped(path, budget)
			// What the reader may see is at most the limit of bytes.
			seen := text[:min(len(text), 4*budget+4)]
			want, wantCut := Cap(seen, budget)
			if got != want || cut != wantCut {
				t.Errorf("budget %d, %d bytes: got %d bytes (cut %v), want %d (cut %v)", budget, size, len(got), cut, len(want), wantCut)
			}
			if size <= budget && got != text {
				t.Errorf("budget %d, %d bytes: a file within budget came back changed", budget, size)
			}
		}
	}
	if got, cut := ReadCapped(filepath.Join(dir, "missing"), 100); got != "" || cut {
		t.Errorf("missing file: %q %v", got, cut)
	}
}
