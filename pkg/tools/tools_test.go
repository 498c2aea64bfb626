package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mother-chat/mother/pkg/agent"
)

// setup returns the chick tools over a fresh workspace, by name, and the
// files attach delivered.
func setup(t testing.TB) (map[string]agent.Tool, string, *[]string) {
	t.Helper()
	root := t.TempDir()
	var attached []string
	ts, err := ChickWith(root, func(path, title string) error {
		attached = append(attached, path+"|"+title)
		return nil
	}, Options{BashTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]agent.Tool{}
	for _, tl := range ts {
		m[tl.Spec().Name] = tl
	}
	return m, root, &attached
}

func call(t testing.TB, tl agent.Tool, args map[string]any) (agent.Result, error) {
	t.Helper()
	return callCtx(t.Context(), t, tl, args)
}

func callCtx(ctx context.Context, t testing.TB, tl agent.Tool, args map[string]any) (agent.Result, error) {
	t.Helper()
	if _, ok := args["label"]; !ok {
		args["label"] = "testing"
	}
	raw, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	return tl.Run(ctx, raw)
}

func TestSpecsRequireLabel(t *testing.T) {
	ts, _, _ := setup(t)
	for name, tl := range ts {
		var s struct {
			Type       string                     `json:"type"`
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(tl.Spec().Parameters, &s); err != nil {
			t.Fatalf("%s: parameters are not JSON: %v", name, err)
		}
		if s.Type != "object" || s.Properties["label"] == nil || len(s.Required) == 0 || s.Required[0] != "label" {
			t.Errorf("%s: label is not a required property: %s", name, tl.Spec().Parameters)
		}
	}
}

func TestBashRunsInWorkspace(t *testing.T) {
	ts, root, _ := setup(t)
	res, err := call(t, ts["bash"], map[string]any{"command": "pwd; echo out; echo err >&2"})
	if err != nil || res.IsError {
		t.Fatalf("bash = %+v, %v", res, err)
	}
	real, _ := filepath.EvalSymlinks(root)
	if want := real + "\nout\nerr\n"; res.Text != want {
		t.Errorf("bash output = %q, want %q", res.Text, want)
	}
}

func TestBashExitCode(t *testing.T) {
	ts, _, _ := setup(t)
	res, err := call(t, ts["bash"], map[string]any{"command": "echo failing; exit 3"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(res.Text, "failing") || !strings.Contains(res.Text, "[exit code 3]") {
		t.Errorf("bash exit 3 = %+v, want an error result with the output and the code", res)
	}
}

func TestBashTimeoutKillsGroup(t *testing.T) {
	ts, root, _ := setup(t)
	res, err := call(t, ts["bash"], map[string]any{"command": "sleep 300 & echo $! > child.pid; wait", "timeout": "1"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(res.Text, "timed out after 1s") {
		t.Errorf("bash timeout = %+v", res)
	}
	waitGone(t, readPid(t, filepath.Join(root, "child.pid")))
}

func TestBashAbortKillsGroup(t *testing.T) {
	ts, root, _ := setup(t)
	ctx, cancel := context.WithCancel(t.Context())
	pidFile := filepath.Join(root, "child.pid")
	go func() {
		for !fileHas(pidFile) {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	res, err := callCtx(ctx, t, ts["bash"], map[string]any{"command": "sh -c 'sleep 300' & echo $! > child.pid.tmp; mv child.pid.tmp child.pid; sleep 300"})
	if err != nil {
		t.Fatal(err)
	}
	if !res.IsError || !strings.Contains(res.Text, "aborted") {
		t.Errorf("aborted bash = %+v", res)
	}
	waitGone(t, readPid(t, pidFile))
}

func fileHas(p string) bool {
	b, err := os.ReadFile(p)
	return err == nil && len(bytes.TrimSpace(b)) > 0
}

func readPid(t *testing.T, p string) int {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// waitGone waits until pid no longer runs (gone, or a zombie awaiting its
// reaper); it fails the test if that takes more than 10 seconds.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		if !Alive(pid) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("process %d still runs after the abort", pid)
}

func TestBashTruncatesByLines(t *testing.T) {
	ts, root, _ := setup(t)
	res, err := call(t, ts["bash"], map[string]any{"command": "seq 1 5000"})
	if err != nil || res.IsError {
		t.Fatalf("bash = %v, %v", res.IsError, err)
	}
	lines := strings.Split(strings.TrimSuffix(res.Text, "\n"), "\n")
	// Two notice lines, then the last 2000 numbers.
	if len(lines) != 2+MaxLines {
		t.Fatalf("got %d lines, want %d", len(lines), 2+MaxLines)
	}
	if lines[2] != "3001" || lines[len(lines)-1] != "5000" {
		t.Errorf("tail = %s..%s, want 3001..5000", lines[2], lines[len(lines)-1])
	}
	if !strings.Contains(lines[0], "5000 lines") || !strings.Contains(lines[0], "last 2000 lines") {
		t.Errorf("notice = %q", lines[0])
	}
	checkSaved(t, root, lines[1], func(full []byte) {
		if countLines(full) != 5000 || !bytes.HasPrefix(full, []byte("1\n2\n")) {
			t.Errorf("saved output has %d lines, starts %q", countLines(full), full[:10])
		}
	})
}

func TestBashTruncatesByBytes(t *testing.T) {
	ts, root, _ := setup(t)
	// 300 lines of 1000 characters: under the line limit, over 50 KB.
	res, err := call(t, ts["bash"], map[string]any{"command": `for i in $(seq 1 300); do printf "%04d%0996d\n" $i 0; done`})
	if err != nil || res.IsError {
		t.Fatalf("bash = %v, %v", res.IsError, err)
	}
	lines := strings.Split(strings.TrimSuffix(res.Text, "\n"), "\n")
	body := strings.Join(lines[2:], "\n") + "\n"
	if len(body) > MaxBytes {
		t.Errorf("shown %d bytes, more than %d", len(body), MaxBytes)
	}
	if want := MaxBytes / 1001; len(lines)-2 != want {
		t.Errorf("shown %d lines, want the last %d whole lines", len(lines)-2, want)
	}
	if !strings.HasPrefix(lines[len(lines)-1], "0300") || !strings.HasPrefix(lines[2], fmt.Sprintf("%04d", 300-MaxBytes/1001+1)) {
		t.Errorf("tail is not the real tail: first %q last %q", lines[2][:4], lines[len(lines)-1][:4])
	}
	checkSaved(t, root, lines[1], func(full []byte) {
		if len(full) != 300*1001 {
			t.Errorf("saved %d bytes, want %d", len(full), 300*1001)
		}
	})
}

// TestBashHugeOutputRealTail: many megabytes of output keep memory bounded
// and still show the real last lines.
func TestBashHugeOutputRealTail(t *testing.T) {
	ts, root, _ := setup(t)
	res, err := call(t, ts["bash"], map[string]any{"command": "seq 1 2000000; echo THE-END"})
	if err != nil || res.IsError {
		t.Fatalf("bash = %v, %v", res.IsError, err)
	}
	if !strings.HasSuffix(res.Text, "1999999\n2000000\nTHE-END\n") {
		t.Errorf("tail = %q", res.Text[len(res.Text)-40:])
	}
	lines := strings.Split(res.Text, "\n")
	if !strings.Contains(lines[0], "2000001 lines") {
		t.Errorf("notice = %q", lines[0])
	}
	checkSaved(t, root, lines[1], func(full []byte) {
		if countLines(full) != 2000001 {
			t.Errorf("saved %d lines", countLines(full))
		}
	})
}

func TestBashOneEnormousLine(t *testing.T) {
	ts, _, _ := setup(t)
	res, err := call(t, ts["bash"], map[string]any{"command": "head -c 200000 /dev/zero | tr '\\0' x; echo END"})
	if err != nil || res.IsError {
		t.Fatalf("bash = %v, %v", res.IsError, err)
	}
	if !strings.Contains(res.Text, "last line") || !strings.HasSuffix(res.Text, "xxEND\n") {
		t.Errorf("output = %q...%q", res.Text[:120], res.Text[len(res.Text)-20:])
	}
	if len(res.Text) > MaxBytes+500 {
		t.Errorf("shown %d bytes", len(res.Text))
	}
}

var savedRE = regexp.MustCompile(`full output saved to (\S+):`)

func checkSaved(t *testing.T, root, notice string, check func([]byte)) {
	t.Helper()
	m := savedRE.FindStringSubmatch(notice)
	if m == nil {
		t.Fatalf("notice %q names no saved file", notice)
	}
	if filepath.IsAbs(m[1]) || strings.HasPrefix(m[1], "..") {
		t.Errorf("saved file %q is not a workspace path", m[1])
	}
	full, err := os.ReadFile(filepath.Join(root, m[1]))
	if err != nil {
		t.Fatal(err)
	}
	check(full)
}

func TestReadOffsetLimit(t *testing.T) {
	ts, root, _ := setup(t)
	var b strings.Builder
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	os.WriteFile(filepath.Join(root, "f.txt"), []byte(b.String()), 0o644)
	res, err := call(t, ts["read"], map[string]any{"path": "f.txt", "offset": 3, "limit": 2})
	if err != nil {
		t.Fatal(err)
	}
	want := "line 3\nline 4\n[showing lines 3-4 of 10 (the requested limit was reached); continue at offset 5]"
	if res.Text != want {
		t.Errorf("read = %q, want %q", res.Text, want)
	}
	res, _ = call(t, ts["read"], map[string]any{"path": "f.txt", "offset": 9})
	if res.Text != "line 9\nline 10\n" {
		t.Errorf("read tail = %q", res.Text)
	}
	if _, err := call(t, ts["read"], map[string]any{"path": "f.txt", "offset": 11}); err == nil || !strings.Contains(err.Error(), "past the end") {
		t.Errorf("read past the end = %v", err)
	}
}

func TestReadTruncatesByLines(t *testing.T) {
	ts, root, _ := setup(t)
	var b strings.Builder
	for i := 1; i <= 4500; i++ {
		fmt.Fprintf(&b, "%d\n", i)
	}
	os.WriteFile(filepath.Join(root, "n.txt"), []byte(b.String()), 0o644)
	res, err := call(t, ts["read"], map[string]any{"path": "n.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(res.Text, "1\n2\n") || !strings.Contains(res.Text, "2000\n[showing lines 1-2000 of 4500 (the 2000 line limit was reached); continue at offset 2001]") {
		t.Errorf("read = ...%q", res.Text[len(res.Text)-120:])
	}
	res, _ = call(t, ts["read"], map[string]any{"path": "n.txt", "offset": 4001})
	if !strings.HasPrefix(res.Text, "4001\n") || !strings.HasSuffix(res.Text, "4500\n") {
		t.Errorf("continued read = %q...", res.Text[:20])
	}
}

func TestReadTruncatesByBytes(t *testing.T) {
	ts, root, _ := setup(t)
	line := strings.Repeat("a", 999) + "\n"
	os.WriteFile(filepath.Join(root, "wide.txt"), []byte(strings.Repeat(line, 300)), 0o644)
	res, err := call(t, ts["read"], map[string]any{"path": "wide.txt"})
	if err != nil {
		t.Fatal(err)
	}
	n := MaxBytes / 1000
	want := fmt.Sprintf("[showing lines 1-%d of 300 (the 50 KB limit was reached); continue at offset %d]", n, n+1)
	if !strings.HasSuffix(res.Text, want) || len(res.Text)-len(want) > MaxBytes {
		t.Errorf("read notice = %q, want %q", res.Text[len(res.Text)-len(want)-5:], want)
	}
	// One line longer than the byte limit is cut inside, and reading goes on
	// after it.
	os.WriteFile(filepath.Join(root, "long.txt"), []byte(strings.Repeat("é", 40000)+"\nnext\n"), 0o644)
	res, err = call(t, ts["read"], map[string]any{"path": "long.txt"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(res.Text, "line 1 is longer than 50 KB") || !strings.Contains(res.Text, "continue at offset 2") {
		t.Errorf("long line notice missing: %q", res.Text[len(res.Text)-150:])
	}
	if body, _, _ := strings.Cut(res.Text, "\n["); len(body) > MaxBytes+1 || !strings.HasSuffix(strings.TrimSuffix(body, "\n"), "é") {
		t.Errorf("long line cut badly: %d bytes, ends %q", len(body), body[len(body)-4:])
	}
}

// TestReadBinaryCheckAtEveryBufferSize: the read buffer is sized to the
// file, yet a NUL anywhere in the first 8 KiB still marks it binary, and
// one past them does not, for files smaller and larger than the peek and
// than the largest buffer; a text file of each size reads back (up to
// the read's limits).
func TestReadBinaryCheckAtEveryBufferSize(t *testing.T) {
	ts, root, _ := setup(t)
	for _, size := range []int{1, 63, 64, 65, 4000, binaryPeek - 1, binaryPeek, binaryPeek + 1, readBuffer - 1, readBuffer, readBuffer + 1, 3 * readBuffer} {
		text := []byte(strings.Repeat("abcdefghi\n", size/10+1)[:size])
		os.WriteFile(filepath.Join(root, "t.txt"), text, 0o644)
		res, err := call(t, ts["read"], map[string]any{"path": "t.txt"})
		if want := string(text); err != nil || !strings.HasPrefix(res.Text, want[:min(len(want), 10000)]) { // 1,000 lines: within both limits
			t.Errorf("size %d: read = %.40q…, %v", size, res.Text, err)
		}
		for _, at := range []int{0, size / 2, size - 1, binaryPeek - 1, binaryPeek} {
			if at >= size {
				continue
			}
			bin := bytes.Clone(text)
			bin[at] = 0
			os.WriteFile(filepath.Join(root, "b.txt"), bin, 0o644)
			_, err := call(t, ts["read"], map[string]any{"path": "b.txt"})
			if binary := err != nil && strings.Contains(err.Error(), "looks binary"); binary != (at < binaryPeek) {
				t.Errorf("size %d, NUL at %d: err %v; want binary %v", size, at, err, at < binaryPeek)
			}
		}
	}
}

// BenchmarkReadSmallFile: the read tool on a small file (the relay
// bench's chicks read one 500 times each).
func BenchmarkReadSmallFile(b *testing.B) {
	ts, root, _ := setup(b)
	os.WriteFile(filepath.Join(root, "small.txt"), []byte("A small file the chicks read.\n"), 0o644)
	raw := []byte(`{"label":"reading","path":"small.txt"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ts["read"].Run(b.Context(), raw); err != nil {
			b.Fatal(err)
		}
	}
}

func TestReadImageAndRefusals(t *testing.T) {
	ts, root, _ := setup(t)
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01\x00\x00\x00\x01\x08\x06\x00\x00\x00\x1f\x15\xc4\x89")
	os.WriteFile(filepath.Join(root, "pic.PNG"), png, 0o644)
	res, err := call(t, ts["read"], map[string]any{"path": "pic.PNG"})
	if err != nil || len(res.Images) != 1 || res.Images[0].MimeType != "image/png" || !bytes.Equal(res.Images[0].Data, png) {
		t.Fatalf("read image = %+v, %v", res, err)
	}
	os.WriteFile(filepath.Join(root, "fake.jpg"), []byte("not really"), 0o644)
	os.WriteFile(filepath.Join(root, "bin"), []byte("a\x00b"), 0o644)
	os.Mkdir(filepath.Join(root, "d"), 0o755)
	for path, want := range map[string]string{
		"fake.jpg":   "named like an image",
		"bin":        "looks binary",
		"d":          "is a directory",
		"nope":       "no such file",
		"../x":       "outside the workspace",
		"/etc/hosts": "outside the workspace",
	} {
		if _, err := call(t, ts["read"], map[string]any{"path": path}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("read %s = %v, want %q", path, err, want)
		}
	}
}

func TestWrite(t *testing.T) {
	ts, root, _ := setup(t)
	big := strings.Repeat("0123456789abcdef\n", 1<<17) // 2.2 MB: past any argument limit
	res, err := call(t, ts["write"], map[string]any{"path": "deep/new/dir/big.txt", "content": big})
	if err != nil || !strings.Contains(res.Text, "deep/new/dir/big.txt") {
		t.Fatalf("write = %+v, %v", res, err)
	}
	got, _ := os.ReadFile(filepath.Join(root, "deep/new/dir/big.txt"))
	if string(got) != big {
		t.Errorf("wrote %d bytes, want %d", len(got), len(big))
	}
	if _, err := call(t, ts["write"], map[string]any{"path": "x"}); err == nil || !strings.Contains(err.Error(), `"content"`) {
		t.Errorf("write without content = %v", err)
	}
	if _, err := call(t, ts["write"], map[string]any{"path": "deep", "content": "x"}); err == nil {
		t.Error("write over a directory succeeded")
	}
	os.Symlink(t.TempDir(), filepath.Join(root, "escape"))
	if _, err := call(t, ts["write"], map[string]any{"path": "escape/evil", "content": "x"}); !errors.Is(err, ErrOutside) {
		t.Errorf("write through an escaping symlink = %v", err)
	}
}

func TestEdit(t *testing.T) {
	ts, root, _ := setup(t)
	p := filepath.Join(root, "code.go")
	src := "package x\n\nfunc a() int {\n\treturn 1\n}\n\nfunc b() int {\n\treturn 1\n}\n"
	os.WriteFile(p, []byte(src), 0o644)
	res, err := call(t, ts["edit"], map[string]any{"path": "code.go", "oldText": "func b() int {\n\treturn 1", "newText": "func b() int {\n\treturn 2"})
	if err != nil {
		t.Fatal(err)
	}
	wantDiff := "--- a/code.go\n+++ b/code.go\n@@ -5,5 +5,5 @@\n }\n \n func b() int {\n-\treturn 1\n+\treturn 2\n }\n"
	if res.Text != wantDiff {
		t.Errorf("diff =\n%s\nwant\n%s", res.Text, wantDiff)
	}
	got, _ := os.ReadFile(p)
	if want := strings.Replace(src, "return 1\n}\n\nfunc b", "return 1\n}\n\nfunc b", 1); !strings.HasSuffix(string(got), "\treturn 2\n}\n") || !strings.HasPrefix(string(got), want[:30]) {
		t.Errorf("file = %q", got)
	}
	cases := map[string]struct {
		old, new string
		want     string
	}{
		"ambiguous": {"return", "x", "occurs 2 times"},
		"missing":   {"func c()", "x", "was not found"},
		"spaces":    {"func  a() int", "x", "different whitespace"},
		"noop":      {"func a", "func a", "identical"},
		"empty":     {"", "x", "oldText is empty"},
	}
	for name, c := range cases {
		_, err := call(t, ts["edit"], map[string]any{"path": "code.go", "oldText": c.old, "newText": c.new})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: edit = %v, want %q", name, err, c.want)
		}
	}
	if _, err := call(t, ts["edit"], map[string]any{"path": "none.go", "oldText": "a", "newText": "b"}); err == nil || !strings.Contains(err.Error(), "no such file") {
		t.Errorf("edit of a missing file = %v", err)
	}
	after, _ := os.ReadFile(p)
	if !bytes.Equal(after, got) {
		t.Error("a failed edit changed the file")
	}
}

func TestUnifiedDiffEdges(t *testing.T) {
	cases := []struct{ a, b, want string }{
		{"a\n", "b\n", "--- a/f\n+++ b/f\n@@ -1 +1 @@\n-a\n+b\n"},
		{"a", "a\nb", "--- a/f\n+++ b/f\n@@ -1 +1,2 @@\n-a\n\\ No newline at end of file\n+a\n+b\n\\ No newline at end of file\n"},
		{"x\n", "", "--- a/f\n+++ b/f\n@@ -1 +0,0 @@\n-x\n"},
	}
	for _, c := range cases {
		if got := UnifiedDiff("f", []byte(c.a), []byte(c.b), 3); got != c.want {
			t.Errorf("UnifiedDiff(%q, %q) =\n%q\nwant\n%q", c.a, c.b, got, c.want)
		}
	}
}

func TestAttach(t *testing.T) {
	ts, root, attached := setup(t)
	os.WriteFile(filepath.Join(root, "report.pdf"), []byte("%PDF"), 0o644)
	if _, err := call(t, ts["attach"], map[string]any{"path": "report.pdf", "title": "Report"}); err != nil {
		t.Fatal(err)
	}
	real, _ := filepath.EvalSymlinks(root)
	if len(*attached) != 1 || (*attached)[0] != filepath.Join(real, "report.pdf")+"|Report" {
		t.Errorf("attached = %v", *attached)
	}
	outside := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(outside, []byte("s"), 0o644)
	os.Symlink(outside, filepath.Join(root, "link"))
	os.Symlink(filepath.Dir(outside), filepath.Join(root, "linkdir"))
	for _, p := range []string{outside, "link", "linkdir/secret", "../secret"} {
		if _, err := call(t, ts["attach"], map[string]any{"path": p}); !errors.Is(err, ErrOutside) {
			t.Errorf("attach %s = %v, want a refusal", p, err)
		}
	}
	if len(*attached) != 1 {
		t.Errorf("refused attachments were delivered: %v", *attached)
	}
}

func TestReadOnlyAllow(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "channels", "a"), 0o755)
	os.WriteFile(filepath.Join(root, "channels", "a", "log"), []byte("private"), 0o644)
	os.WriteFile(filepath.Join(root, "MOTHER.md"), []byte("guide"), 0o644)
	ts, err := ReadOnly(root, func(_ context.Context, abs string) error {
		if strings.Contains(abs, "/channels/") {
			return errors.New("another channel's files are not yours to read")
		}
		return nil
	})
	if err != nil || len(ts) != 1 || ts[0].Spec().Name != "read" {
		t.Fatalf("ReadOnly = %v, %v", ts, err)
	}
	if res, err := call(t, ts[0], map[string]any{"path": "MOTHER.md"}); err != nil || res.Text != "guide" {
		t.Errorf("read MOTHER.md = %+v, %v", res, err)
	}
	if _, err := call(t, ts[0], map[string]any{"path": "channels/a/log"}); err == nil || !strings.Contains(err.Error(), "not yours") {
		t.Errorf("read of a denied path = %v", err)
	}
}

// Alive reports whether pid is a running (not zombie) process.
func Alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesised command name.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		return s[i+2] != 'Z'
	}
	return true
}

// BenchmarkSpillWriter pushes 64 MB of output through the bash output
// collector: allocations per operation stay near the tail window, not the
// output size.
func BenchmarkSpillWriter(b *testing.B) {
	dir := b.TempDir()
	line := []byte(strings.Repeat("x", 99) + "\n")
	chunk := bytes.Repeat(line, 320) // 32 KB writes, like a pipe
	b.ReportAllocs()
	b.SetBytes(int64(len(chunk)) * 2048)
	for b.Loop() {
		w := &spillWriter{maxLines: MaxLines, maxBytes: MaxBytes, open: func() (*os.File, error) {
			return os.CreateTemp(dir, "out-*.log")
		}}
		for range 2048 {
			w.Write(chunk)
		}
		w.close()
		os.Remove(w.file.Name())
	}
}

func BenchmarkResolve(b *testing.B) {
	ws, _, _ := fixture(b)
	for b.Loop() {
		if _, err := ws.Resolve("dir/up/dir/file.txt"); err != nil {
			b.Fatal(err)
		}
	}
}
