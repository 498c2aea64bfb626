package dataformat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"github.com/mother-chat/mother/internal/testenv"
	"github.com/mother-chat/mother/pkg/atomicfile"
)

// treeDiff lists what differs between two trees, sorted, leaving out the
// paths ignore names (and what is under them). Directories' times count
// only with the paths ignored at all: a rollback restores files, and the
// directory that held a snapshot cannot have its time back.
func treeDiff(a, b map[string]string, ignore ...string) []string {
	if len(ignore) > 0 {
		a, b = noDirTimes(a), noDirTimes(b)
	}
	var out []string
	skip := func(p string) bool {
		for _, i := range ignore {
			if p == i || strings.HasPrefix(p, i+"/") {
				return true
			}
		}
		return false
	}
	for p, v := range a {
		if skip(p) {
			continue
		}
		if w, ok := b[p]; !ok {
			out = append(out, "gone: "+p)
		} else if v != w {
			out = append(out, "changed: "+p)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok && !skip(p) {
			out = append(out, "new: "+p)
		}
	}
	sort.Strings(out)
	return out
}

// noDirTimes is tr without the directories' times.
func noDirTimes(tr map[string]string) map[string]string {
	out := map[string]string{}
	for p, v := range tr {
		if strings.HasPrefix(v, "d") {
			v = strings.Fields(v)[0]
		}
		out[p] = v
	}
	return out
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// oldDir is a data directory as Mother 0.1 leaves it: no format file.
func oldDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	write(t, filepath.Join(dir, "config.json"), `{"model": {"provider": "ollama"}}`)
	write(t, filepath.Join(dir, "workspace/MEMORY.md"), "# Memory\n")
	write(t, filepath.Join(dir, "workspace/channels/cli/local/log.jsonl"), `{"id":"1","text":"hello"}`+"\n")
	write(t, filepath.Join(dir, "chicks/instance"), "m-1a2b3c\n")
	write(t, filepath.Join(dir, "chicks/chicks.jsonl"), `{"id":"c-1","state":"done"}`+"\n"+`{"id":"c-2","state":"failed"}`+"\n")
	write(t, filepath.Join(dir, "state/inflight/cli/local.json"), `{}`)
	return dir
}

func readInfo(t *testing.T, dir string) (Info, bool) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, File))
	if errors.Is(err, fs.ErrNotExist) {
		return Info{}, false
	}
	if err != nil {
		t.Fatal(err)
	}
	var in Info
	if err := json.Unmarshal(b, &in); err != nil {
		t.Fatalf("%s: %v", File, err)
	}
	return in, true
}

func prepare(t *testing.T, dir, release string) *Dir {
	t.Helper()
	d, err := Prepare(dir, release)
	if err != nil {
		t.Fatalf("Prepare(%s): %v", release, err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestTableEndsAtCurrent(t *testing.T) {
	if latest() != Current {
		t.Errorf("the last step gives format %d, Current is %d", latest(), Current)
	}
	for i, s := range steps {
		if s.From != i || s.To != i+1 || s.Up == nil || s.Changes == "" {
			t.Errorf("steps[%d] = %d→%d (Up set: %v, %q): want %d→%d with Up and Changes", i, s.From, s.To, s.Up != nil, s.Changes, i, i+1)
		}
	}
	if f, err := FormatOf(Release, Release); err != nil || f != Current {
		t.Errorf("FormatOf(%s) = %d, %v; want %d", Release, f, err, Current)
	}
	if f, err := FormatOf("0.1.7", Release); err != nil || f != 0 {
		t.Errorf("FormatOf(0.1.7) = %d, %v; want 0", f, err)
	}
	if _, err := FormatOf("0.9.0", Release); err == nil || !strings.Contains(err.Error(), "this Mother (0.2.0) does not know which data format Mother 0.9.0 reads") {
		t.Errorf("FormatOf(0.9.0) = %v, want it unknown", err)
	}
	if _, err := FormatOf("latest", Release); err == nil {
		t.Error("FormatOf(latest) = nil error")
	}
}

func TestCompare(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{
		{"0.2.0", "0.2.0", 0}, {"0.2.0", "0.3.0", -1}, {"0.10.0", "0.9.9", 1}, {"1.0.0", "0.99.0", 1},
		{"v0.2.1", "0.2.0", 1}, {"0.2.0-dev", "0.2.0", 0}, {"dev", "0.1.0", -1}, {"0.2", "0.1.0", -1},
	} {
		if got := Compare(c.a, c.b); got != c.want {
			t.Errorf("Compare(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}

func TestFreshDirectoryGetsTheFormatWithoutSnapshot(t *testing.T) {
	for name, dir := range map[string]string{"absent": filepath.Join(t.TempDir(), "data"), "config only": t.TempDir()} {
		t.Run(name, func(t *testing.T) {
			if name == "config only" {
				write(t, filepath.Join(dir, "config.json"), "{}")
			}
			d := prepare(t, dir, "0.2.0")
			if !d.Fresh || len(d.Migrated) != 0 {
				t.Errorf("Prepare = fresh %v, migrated %d; want fresh, no step", d.Fresh, len(d.Migrated))
			}
			if in, ok := readInfo(t, dir); !ok || in != (Info{Format: 1, Release: "0.2.0"}) {
				t.Errorf("format file = %+v (there: %v), want format 1 by 0.2.0", in, ok)
			}
			if _, err := os.Stat(filepath.Join(dir, UpgradeDir)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("a new directory got a snapshot directory: %v", err)
			}
		})
	}
}

func TestOldDirectoryMigratesWithSnapshot(t *testing.T) {
	dir := oldDir(t)
	before := testenv.Tree(t, dir)
	d := prepare(t, dir, "0.2.0")
	if d.Fresh || len(d.Migrated) != 1 || d.Migrated[0].From != 0 || d.From != (Info{}) {
		t.Fatalf("Prepare = %+v, want one step from format 0", d)
	}
	if in, _ := readInfo(t, dir); in != (Info{Format: 1, Release: "0.2.0"}) {
		t.Errorf("format file = %+v", in)
	}
	s, ok, err := readSnapshot(dir, 0, 1)
	if err != nil || !ok {
		t.Fatalf("snapshot 0-1: %v, %v", ok, err)
	}
	if s.m.FromRelease != "0.1.0" || s.m.ToRelease != "0.2.0" || len(s.m.Files) != 1 || s.m.Files[0] != (snapFile{Path: File, Absent: true}) {
		t.Errorf("snapshot manifest = %+v, want from 0.1.0 to 0.2.0 with no file but the absent format file", s.m)
	}
	// Step 0→1 changes no store: everything else is as it was.
	if diff := treeDiff(before, testenv.Tree(t, dir), "state"); len(diff) != 0 {
		t.Errorf("migration 0→1 changed files of 0.1: %v", diff)
	}
	// A second start changes nothing.
	d.Close()
	mid := testenv.Tree(t, dir)
	d2 := prepare(t, dir, "0.2.0")
	if len(d2.Migrated) != 0 || d2.From != (Info{Format: 1, Release: "0.2.0"}) {
		t.Errorf("second Prepare = %+v, want nothing to do", d2)
	}
	if diff := treeDiff(mid, testenv.Tree(t, dir)); len(diff) != 0 {
		t.Errorf("second start changed %v", diff)
	}
}

func TestNewerFormatRefusedUntouched(t *testing.T) {
	dir := oldDir(t)
	write(t, filepath.Join(dir, File), `{"format":2,"release":"0.3.0"}`)
	before := testenv.Tree(t, dir)
	want := "the data directory " + dir + " is format 2, written by Mother 0.3.0; this is Mother 0.2.0, which reads format 1 and older: install Mother 0.3.0 again, or run `mother rollback --to 0.2.0 " + dir + "` with it"
	for name, f := range map[string]func() error{
		"Check":   func() error { _, err := Check(dir, "0.2.0"); return err },
		"Prepare": func() error { _, err := Prepare(dir, "0.2.0"); return err },
		"Preview": func() error { _, err := Preview(dir, "0.2.0"); return err },
	} {
		err := f()
		if !errors.Is(err, ErrNewer) || err.Error() != want {
			t.Errorf("%s = %v\nwant %s", name, err, want)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: the refusal is more than one line", name)
		}
	}
	if diff := treeDiff(before, testenv.Tree(t, dir)); len(diff) != 0 {
		t.Errorf("refused directory changed: %v", diff)
	}
}

func TestBadFormatFileRefused(t *testing.T) {
	for _, content := range []string{"", "{", `{"format":0}`, `{"format":"one"}`, `[]`} {
		dir := oldDir(t)
		write(t, filepath.Join(dir, File), content)
		before := testenv.Tree(t, dir)
		_, err := Prepare(dir, "0.2.0")
		if err == nil || !strings.Contains(err.Error(), "does not read as") {
			t.Errorf("Prepare with format file %q = %v, want it refused", content, err)
		}
		if diff := treeDiff(before, testenv.Tree(t, dir)); len(diff) != 0 {
			t.Errorf("format file %q: directory changed: %v", content, diff)
		}
	}
}

func TestRollbackToTheFirstRelease(t *testing.T) {
	dir := oldDir(t)
	before := testenv.Tree(t, dir)
	prepare(t, dir, "0.2.0").Close()
	msg, err := Rollback(dir, "0.1.0", "0.2.0")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(msg, "rolled "+dir+" back for Mother 0.1.0: format 1 to 0 (no file to restore); state/format.json removed") {
		t.Errorf("Rollback said %q", msg)
	}
	// As 0.1 left it, but for the lock file 0.1 never had.
	if diff := treeDiff(before, testenv.Tree(t, dir), "state/lock"); len(diff) != 0 {
		t.Errorf("after the rollback: %v", diff)
	}
	// Nothing more to do, and starting 0.2.0 again migrates again.
	msg, err = Rollback(dir, "0.1.0", "0.2.0")
	if err != nil || !strings.HasPrefix(msg, "nothing to roll back: "+dir+" is format 0") {
		t.Errorf("second rollback = %q, %v", msg, err)
	}
	if d := prepare(t, dir, "0.2.0"); len(d.Migrated) != 1 {
		t.Errorf("start after the rollback migrated %d steps, want 1", len(d.Migrated))
	}
}

func TestRollbackOfANewDirectory(t *testing.T) {
	// Made by 0.2.0: no snapshot, but 0→1 changes no file.
	dir := t.TempDir()
	prepare(t, dir, "0.2.0").Close()
	msg, err := Rollback(dir, "0.1.0", "0.2.0")
	if err != nil || !strings.Contains(msg, "format 1 to 0") {
		t.Fatalf("Rollback = %q, %v", msg, err)
	}
	if _, ok := readInfo(t, dir); ok {
		t.Error("the format file is still there")
	}
}

func TestRollbackRefusedWhileMotherRuns(t *testing.T) {
	dir := oldDir(t)
	d := prepare(t, dir, "0.2.0")
	held := testenv.Tree(t, dir)
	_, err := Rollback(dir, "0.1.0", "0.2.0")
	if !errors.Is(err, ErrCannot) || !strings.Contains(err.Error(), "Mother is running on "+dir) {
		t.Errorf("Rollback under a running Mother = %v", err)
	}
	d.Close()
	// A Mother of any release answers on her admin socket.
	l, err := net.Listen("unix", filepath.Join(dir, "mother.sock"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Rollback(dir, "0.1.0", "0.2.0")
	if !errors.Is(err, ErrCannot) || !strings.Contains(err.Error(), "admin socket") {
		t.Errorf("Rollback with the socket answering = %v", err)
	}
	l.Close()
	if diff := treeDiff(held, testenv.Tree(t, dir), "mother.sock"); len(diff) != 0 {
		t.Errorf("refused rollbacks changed %v", diff)
	}
	if _, err := Rollback(dir, "0.1.0", "0.2.0"); err != nil {
		t.Errorf("Rollback once she stopped: %v", err)
	}
}

// The test-only step 1→2 of a release 0.3.0 rewrites a real store file
// (each chick record gains a field) and the instance id, one after the
// other, with a crash point between them.
var testStep = Step{
	From: 1, To: 2, Changes: "chick records gain a version field; the instance id is upper-cased",
	Files: func(string) ([]string, error) { return []string{"chicks/chicks.jsonl", "chicks/instance"}, nil },
	Up: func(dir string) error {
		path := filepath.Join(dir, "chicks/chicks.jsonl")
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var out bytes.Buffer
		for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
			var rec map[string]any
			if err := json.Unmarshal(line, &rec); err != nil {
				return err
			}
			rec["v"] = 2
			nb, _ := json.Marshal(rec)
			out.Write(append(nb, '\n'))
		}
		if err := atomicfile.WriteFile(path, out.Bytes(), 0o600); err != nil {
			return err
		}
		if err := crash("between"); err != nil {
			return err
		}
		ipath := filepath.Join(dir, "chicks/instance")
		id, err := os.ReadFile(ipath)
		if err != nil {
			return err
		}
		return atomicfile.WriteFile(ipath, bytes.ToUpper(id), 0o600)
	},
}

// withRelease030 adds the test step and the series 0.3 for the test's
// length.
func withRelease030(t *testing.T) {
	saved, savedSeries := steps, series
	steps = append(append([]Step(nil), steps...), testStep)
	series = append(append(series[:0:0], series...), struct {
		series string
		format int
	}{"0.3", 2})
	t.Cleanup(func() { steps, series = saved, savedSeries })
}

// asRelease020 runs f with the real table, as Mother 0.2.0 would.
func asRelease020(f func()) {
	saved, savedSeries := steps, series
	steps, series = steps[:1], series[:2]
	defer func() { steps, series = saved, savedSeries }()
	f()
}

func TestTestStepSnapshotRefuseAndRollBack(t *testing.T) {
	dir := oldDir(t)
	prepare(t, dir, "0.2.0").Close()
	at020 := testenv.Tree(t, dir)
	withRelease030(t)
	d := prepare(t, dir, "0.3.0")
	d.Close()
	if len(d.Migrated) != 1 || d.Migrated[0].To != 2 {
		t.Fatalf("Prepare(0.3.0) migrated %+v", d.Migrated)
	}
	recs, _ := os.ReadFile(filepath.Join(dir, "chicks/chicks.jsonl"))
	if string(recs) != `{"id":"c-1","state":"done","v":2}`+"\n"+`{"id":"c-2","state":"failed","v":2}`+"\n" {
		t.Errorf("chicks.jsonl after 1→2:\n%s", recs)
	}
	s, ok, err := readSnapshot(dir, 1, 2)
	if !ok || err != nil || len(s.m.Files) != 3 || s.m.FromRelease != "0.2.0" || s.m.ToRelease != "0.3.0" {
		t.Fatalf("snapshot 1-2 = %+v, %v, %v", s.m, ok, err)
	}
	asRelease020(func() {
		// Mother 0.2.0 refuses it...
		if _, err := Prepare(dir, "0.2.0"); !errors.Is(err, ErrNewer) || !strings.Contains(err.Error(), "is format 2, written by Mother 0.3.0") {
			t.Errorf("0.2.0 on format 2 = %v", err)
		}
		// ...and rolls it back from the snapshot alone, byte for byte.
		msg, err := Rollback(dir, "0.2.0", "0.2.0")
		if err != nil || !strings.Contains(msg, "format 2 to 1 (restored chicks/chicks.jsonl, chicks/instance)") {
			t.Fatalf("Rollback(0.2.0) = %q, %v", msg, err)
		}
	})
	if diff := treeDiff(at020, testenv.Tree(t, dir), "state/lock"); len(diff) != 0 {
		t.Errorf("after rolling back to 0.2.0: %v", diff)
	}
	if in, _ := readInfo(t, dir); in != (Info{Format: 1, Release: "0.2.0"}) {
		t.Errorf("format file = %+v", in)
	}
}

func TestRollbackTwoStepsNewestFirst(t *testing.T) {
	dir := oldDir(t)
	before := testenv.Tree(t, dir)
	withRelease030(t)
	d := prepare(t, dir, "0.3.0")
	d.Close()
	if len(d.Migrated) != 2 {
		t.Fatalf("migrated %d steps, want 0→1→2", len(d.Migrated))
	}
	msg, err := Rollback(dir, "0.1.0", "0.3.0")
	if err != nil || !strings.Contains(msg, "format 2 to 1 (restored chicks/chicks.jsonl, chicks/instance), then format 1 to 0 (no file to restore); state/format.json removed") {
		t.Fatalf("Rollback = %q, %v", msg, err)
	}
	if diff := treeDiff(before, testenv.Tree(t, dir), "state/lock"); len(diff) != 0 {
		t.Errorf("after rolling back to 0.1.0: %v", diff)
	}
}

func TestRollbackRefusedWithoutTheSnapshot(t *testing.T) {
	dir := oldDir(t)
	prepare(t, dir, "0.2.0").Close()
	withRelease030(t)
	prepare(t, dir, "0.3.0").Close()
	if err := os.RemoveAll(filepath.Join(dir, UpgradeDir, "1-2")); err != nil {
		t.Fatal(err)
	}
	before := testenv.Tree(t, dir)
	_, err := Rollback(dir, "0.1.0", "0.3.0")
	if !errors.Is(err, ErrCannot) || !strings.Contains(err.Error(), "the snapshot of the migration from format 1 to 2") || !strings.Contains(err.Error(), "nothing was changed") {
		t.Errorf("Rollback without the snapshot = %v", err)
	}
	if diff := treeDiff(before, testenv.Tree(t, dir)); len(diff) != 0 {
		t.Errorf("refused rollback changed %v", diff)
	}
	// A snapshot that does not read is no better.
	write(t, filepath.Join(dir, UpgradeDir, "1-2/manifest.json"), "{")
	if _, err := Rollback(dir, "0.2.0", "0.3.0"); !errors.Is(err, ErrCannot) {
		t.Errorf("Rollback with a broken snapshot = %v", err)
	}
}

// crashes runs f with a crash at its n-th crash point, for n = 1, 2, ...
// until f runs through; each time from a copy of the directory made by
// setup. check looks at the directory after the crash.
func crashes(t *testing.T, setup func(t *testing.T) string, f func(dir string) error, check func(t *testing.T, dir, at string)) {
	for n := 1; ; n++ {
		dir := setup(t)
		i := 0
		at := ""
		crashPoint = func(what string) error {
			i++
			if i == n {
				at = what
				return errors.New("crash at " + what)
			}
			return nil
		}
		err := f(dir)
		crashPoint = nil
		if at == "" {
			if err != nil {
				t.Fatalf("run without a crash: %v", err)
			}
			if n < 3 {
				t.Fatalf("only %d crash points", n-1)
			}
			return
		}
		t.Run(fmt.Sprintf("%d %s", n, at), func(t *testing.T) { check(t, dir, at) })
	}
}

func TestCrashDuringMigration(t *testing.T) {
	withRelease030(t)
	setup := func(t *testing.T) string {
		dir := oldDir(t)
		asRelease020(func() { prepare(t, dir, "0.2.0").Close() })
		return dir
	}
	// What a whole migration gives, for comparison (times aside).
	clean := setup(t)
	prepare(t, clean, "0.3.0").Close()
	wantRecs, _ := os.ReadFile(filepath.Join(clean, "chicks/chicks.jsonl"))
	wantID, _ := os.ReadFile(filepath.Join(clean, "chicks/instance"))
	origRecs, _ := os.ReadFile(filepath.Join(setup(t), "chicks/chicks.jsonl"))
	crashes(t, setup, func(dir string) error {
		d, err := Prepare(dir, "0.3.0")
		d.Close()
		return err
	}, func(t *testing.T, dir, at string) {
		in, _ := readInfo(t, dir)
		if in.Format != 1 && in.Format != 2 {
			t.Fatalf("format %d after the crash", in.Format)
		}
		if in.Format == 1 {
			// What Mother 0.2.0 finds: the old files, the half-done
			// step undone from its snapshot.
			asRelease020(func() {
				d, err := Prepare(dir, "0.2.0")
				if err != nil {
					t.Fatalf("0.2.0 after the crash: %v", err)
				}
				d.Close()
			})
			if recs, _ := os.ReadFile(filepath.Join(dir, "chicks/chicks.jsonl")); !bytes.Equal(recs, origRecs) {
				t.Errorf("0.2.0 reads a half-migrated chicks.jsonl:\n%s", recs)
			}
		}
		// Started again, 0.3.0 finishes the migration as if nothing had
		// happened.
		d := prepare(t, dir, "0.3.0")
		d.Close()
		recs, _ := os.ReadFile(filepath.Join(dir, "chicks/chicks.jsonl"))
		id, _ := os.ReadFile(filepath.Join(dir, "chicks/instance"))
		if !bytes.Equal(recs, wantRecs) || !bytes.Equal(id, wantID) {
			t.Errorf("after the restart: chicks.jsonl %q, instance %q; want %q, %q", recs, id, wantRecs, wantID)
		}
		if in, _ := readInfo(t, dir); in != (Info{Format: 2, Release: "0.3.0"}) {
			t.Errorf("format file = %+v", in)
		}
		// And the snapshot is of the files as 0.2.0 had them.
		if _, err := Rollback(dir, "0.2.0", "0.3.0"); err != nil {
			t.Fatal(err)
		}
		if recs, _ := os.ReadFile(filepath.Join(dir, "chicks/chicks.jsonl")); !bytes.Equal(recs, origRecs) {
			t.Errorf("rolled back after a crash: chicks.jsonl\n%s", recs)
		}
	})
}

func TestCrashDuringRollback(t *testing.T) {
	withRelease030(t)
	var at020 map[string]string
	setup := func(t *testing.T) string {
		dir := oldDir(t)
		asRelease020(func() { prepare(t, dir, "0.2.0").Close() })
		at020 = testenv.Tree(t, dir)
		prepare(t, dir, "0.3.0").Close()
		return dir
	}
	crashes(t, setup, func(dir string) error {
		_, err := Rollback(dir, "0.2.0", "0.3.0")
		return err
	}, func(t *testing.T, dir, at string) {
		in, _ := readInfo(t, dir)
		if in.Format == 1 {
			// 0.2.0 started now puts the rest back itself.
			asRelease020(func() { prepare(t, dir, "0.2.0").Close() })
		} else if _, err := Rollback(dir, "0.2.0", "0.3.0"); err != nil {
			t.Fatalf("rollback run again: %v", err)
		}
		if diff := treeDiff(at020, testenv.Tree(t, dir), "state/lock", "state/upgrade/0-1"); len(diff) != 0 {
			t.Errorf("after the crash and a rerun: %v", diff)
		}
	})
}

func TestPreview(t *testing.T) {
	dir := oldDir(t)
	before := testenv.Tree(t, dir)
	got, err := Preview(dir, "0.2.0")
	if err != nil {
		t.Fatal(err)
	}
	want := "data directory: format 0 (Mother 0.1.x); starting Mother 0.2.0 migrates it to format 1, a snapshot in state/upgrade before each step, `mother rollback` undoes it:\n  0→1: writes state/format.json; no file of Mother 0.1 changes"
	if got != want {
		t.Errorf("Preview = %q\nwant %q", got, want)
	}
	if diff := treeDiff(before, testenv.Tree(t, dir)); len(diff) != 0 {
		t.Errorf("Preview changed %v", diff)
	}
	prepare(t, dir, "0.2.0").Close()
	if got, _ := Preview(dir, "0.2.0"); got != "data directory: format 1 (last run by Mother 0.2.0); nothing to migrate" {
		t.Errorf("Preview of a current directory = %q", got)
	}
	if got, _ := Preview(t.TempDir(), "0.2.0"); got != "data directory: new; starting Mother 0.2.0 writes state/format.json (format 1)" {
		t.Errorf("Preview of a new directory = %q", got)
	}
	withRelease030(t)
	got, _ = Preview(dir, "0.3.0")
	if !strings.Contains(got, "1→2: chick records gain a version field; the instance id is upper-cased (snapshot of chicks/chicks.jsonl, chicks/instance first)") {
		t.Errorf("Preview with a step that changes files = %q", got)
	}
}

func TestReleaseRecordedAtEachStart(t *testing.T) {
	dir := t.TempDir()
	prepare(t, dir, "0.2.0").Close()
	prepare(t, dir, "0.2.1").Close()
	if in, _ := readInfo(t, dir); in != (Info{Format: 1, Release: "0.2.1"}) {
		t.Errorf("format file = %+v, want the last release that ran", in)
	}
	if LastRelease(dir) != "0.2.1" {
		t.Errorf("LastRelease = %q", LastRelease(dir))
	}
}

func TestSecondMotherOnTheDirectory(t *testing.T) {
	dir := t.TempDir()
	first := prepare(t, dir, "0.2.0")
	// Same format, another release: runs beside her, the release left
	// as the first wrote it.
	second := prepare(t, dir, "0.2.1")
	second.Close()
	if in, _ := readInfo(t, dir); in.Release != "0.2.0" {
		t.Errorf("release = %q, want the first Mother's while she holds the directory", in.Release)
	}
	first.Close()
	// A migration is never run beside another Mother.
	old := oldDir(t)
	held, err := os.OpenFile(filepath.Join(old, "state/lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := syscall.Flock(int(held.Fd()), syscall.LOCK_SH); err != nil {
		t.Fatal(err)
	}
	before := testenv.Tree(t, old)
	if _, err := Prepare(old, "0.2.0"); err == nil || !strings.Contains(err.Error(), "another Mother is running on "+old) {
		t.Errorf("Prepare beside a running Mother = %v", err)
	}
	if diff := treeDiff(before, testenv.Tree(t, old)); len(diff) != 0 {
		t.Errorf("refused migration changed %v", diff)
	}
}
