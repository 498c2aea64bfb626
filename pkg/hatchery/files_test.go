package hatchery

import "testing"

func TestUploadPathsStayInside(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"", "/etc/passwd", "../x", "a/../../x", ".", ".."} {
		if _, err := cleanRel(bad); err == nil {
			t.Errorf("cleanRel(%q) accepted", bad)
		}
	}
	for in, want := range map[string]string{"a/b.txt": "a/b.txt", "/workspace/out/r.md": "out/r.md", "a/./b/../c": "a/c"} {
		if got, err := cleanRel(in); err != nil || got != want {
			t.Errorf("cleanRel(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
}
