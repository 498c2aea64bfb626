package main

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/mother-chat/mother/internal/testenv"
	"github.com/mother-chat/mother/pkg/model/ollama/ollamatest"
)

// dataTreeDiff lists what differs between two trees, sorted; with
// dirTimes false the directories' times are left out.
func dataTreeDiff(a, b map[string]string, dirTimes bool) []string {
	norm := func(v string) string {
		if !dirTimes && strings.HasPrefix(v, "d") {
			return strings.Fields(v)[0]
		}
		return v
	}
	var out []string
	for p, v := range a {
		if w, ok := b[p]; !ok {
			out = append(out, "gone: "+p)
		} else if norm(v) != norm(w) {
			out = append(out, "changed: "+p)
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			out = append(out, "new: "+p)
		}
	}
	sort.Strings(out)
	return out
}

// dataFormatFile reads DATA/state/format.json ("" when absent).
func dataFormatFile(t *testing.T, data string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(data, "state/format.json"))
	if os.IsNotExist(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// dataOldDirectory is a data directory as Mother 0.1.0 leaves it: one
// conversation in the terminal channel, no format file. This release's
// first start writes the same files but for state/format.json and the
// lock state/lock, which 0.1.0 never had; they are taken away.
func dataOldDirectory(t *testing.T, ollamaURL string) string {
	t.Helper()
	data := t.TempDir()
	r := runMother(t, "hello\n", []string{"MOTHER_OLLAMA_URL=" + ollamaURL + "/v1", "MOTHER_MODEL_ID=tiny"}, "--cli", data)
	if r.code != 0 {
		t.Fatalf("first start: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if got := dataFormatFile(t, data); got != `{"format":1,"release":"0.2.0"}` {
		t.Fatalf("a new directory's format file = %q", got)
	}
	if _, err := os.Stat(filepath.Join(data, "state/upgrade")); !os.IsNotExist(err) {
		t.Errorf("a new directory got a snapshot: %v", err)
	}
	for _, f := range []string{"state/format.json", "state/lock"} {
		if err := os.Remove(filepath.Join(data, f)); err != nil {
			t.Fatal(err)
		}
	}
	return data
}

func TestDataNewerFormatRefusedUntouched(t *testing.T) {
	t.Parallel()
	fake := ollamatest.New(ollamatest.Turn{Text: "Hello."})
	defer fake.Close()
	data := dataOldDirectory(t, fake.URL)
	if err := os.WriteFile(filepath.Join(data, "state/format.json"), []byte(`{"format":2,"release":"0.3.0"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	before := testenv.Tree(t, data)
	asked := len(fake.Requests())
	want := "the data directory " + data + " is format 2, written by Mother 0.3.0; this is Mother 0.2.0, which reads format 1 and older: install Mother 0.3.0 again, or run `mother rollback --to 0.2.0 " + data + "` with it"
	env := []string{"MOTHER_OLLAMA_URL=" + fake.URL + "/v1", "MOTHER_MODEL_ID=tiny"}
	for _, c := range []struct {
		name, prefix string
		args         []string
	}{
		{"terminal", "mother", []string{"--cli", data}},
		{"daemon", "mother", []string{data}},
		{"check-config", "mother", []string{"--check-config", data}},
		{"setup", "mother setup", []string{"setup", "--non-interactive", data}},
		{"link", "mother link", []string{"link", "whatsapp", "wa", data}},
		{"migrate into it", "mother migrate", []string{"migrate", t.TempDir(), data, "--adapter", "discord"}},
	} {
		r := runMother(t, "hello\n", env, c.args...)
		if r.code != 3 || r.stderr != c.prefix+": "+want+"\n" {
			t.Errorf("%s: exit %d, stderr %q\nwant exit 3 and the one line %q", c.name, r.code, r.stderr, c.prefix+": "+want)
		}
	}
	if diff := dataTreeDiff(before, testenv.Tree(t, data), true); len(diff) != 0 {
		t.Errorf("the refused directory changed: %v", diff)
	}
	if n := len(fake.Requests()) - asked; n != 0 {
		t.Errorf("the model got %d requests from a refused Mother", n)
	}
}

func TestDataOldDirectoryMigratedThenRolledBack(t *testing.T) {
	t.Parallel()
	fake := ollamatest.New(ollamatest.Turn{Text: "Hello."}, ollamatest.Turn{Text: "Again."}, ollamatest.Turn{Text: "Once more."})
	defer fake.Close()
	env := []string{"MOTHER_OLLAMA_URL=" + fake.URL + "/v1", "MOTHER_MODEL_ID=tiny"}
	data := dataOldDirectory(t, fake.URL)
	old := testenv.Tree(t, data)

	// --check-config says what starting would change, and changes nothing.
	r := runMother(t, "", env, "--check-config", data)
	wantPreview := "data directory: format 0 (Mother 0.1.x); starting Mother 0.2.0 migrates it to format 1, a snapshot in state/upgrade before each step, `mother rollback` undoes it:\n  0→1: writes state/format.json; no file of Mother 0.1 changes\n"
	if r.code != 0 || !strings.HasPrefix(r.stdout, "configuration OK") || !strings.HasSuffix(r.stdout, wantPreview) {
		t.Errorf("--check-config: exit %d, stdout %q\nwant it to end %q", r.code, r.stdout, wantPreview)
	}
	if diff := dataTreeDiff(old, testenv.Tree(t, data), true); len(diff) != 0 {
		t.Errorf("--check-config changed %v", diff)
	}

	// Started, this release migrates it before she opens anything: the
	// step changes no file of 0.1.0, and keeps a snapshot.
	r = runMother(t, "again\n", env, "--cli", "--log-level", "info", data)
	if r.code != 0 || !strings.Contains(r.stderr, `msg="data directory migrated" component=daemon from=0 to=1`) {
		t.Fatalf("start on the 0.1.0 directory: exit %d, stderr:\n%s", r.code, r.stderr)
	}
	if got := dataFormatFile(t, data); got != `{"format":1,"release":"0.2.0"}` {
		t.Errorf("format file after the migration = %q", got)
	}
	var m struct {
		From, To    int
		FromRelease string `json:"fromRelease"`
		ToRelease   string `json:"toRelease"`
	}
	b, err := os.ReadFile(filepath.Join(data, "state/upgrade/0-1/manifest.json"))
	if err != nil || json.Unmarshal(b, &m) != nil || m.From != 0 || m.To != 1 || m.FromRelease != "0.1.0" || m.ToRelease != "0.2.0" {
		t.Errorf("snapshot manifest %s (%v): want 0→1 from 0.1.0 to 0.2.0", b, err)
	}
	if msgs := readLog(t, data); len(msgs) != 4 || msgs[3].Text != "Again." {
		t.Errorf("after the migration the log has %d messages: %+v", len(msgs), msgs)
	}
	r = runMother(t, "", env, "--check-config", data)
	if !strings.HasSuffix(r.stdout, "data directory: format 1 (last run by Mother 0.2.0); nothing to migrate\n") {
		t.Errorf("--check-config after the migration: %q", r.stdout)
	}

	// Rolled back, every file 0.1.0 had is as the run left it, and what
	// 0.1.0 never had (the format file, the snapshot) is gone; the
	// rollback touches nothing else.
	migrated := testenv.Tree(t, data)
	r = runMother(t, "", nil, "rollback", data)
	wantSaid := "rolled " + data + " back for Mother 0.1.0: format 1 to 0 (no file to restore); state/format.json removed. Data written since the upgrade to the restored files is not kept.\n"
	if r.code != 0 || r.stdout != wantSaid || r.stderr != "" {
		t.Errorf("rollback: exit %d, stdout %q, stderr %q\nwant %q", r.code, r.stdout, r.stderr, wantSaid)
	}
	after := testenv.Tree(t, data)
	var gone []string
	for _, d := range dataTreeDiff(migrated, after, false) {
		if !strings.HasPrefix(d, "gone: ") {
			t.Errorf("the rollback did more than remove files: %s", d)
		}
		gone = append(gone, strings.TrimPrefix(d, "gone: "))
	}
	wantGone := []string{"state/format.json", "state/upgrade", "state/upgrade/0-1", "state/upgrade/0-1/manifest.json"}
	if strings.Join(gone, " ") != strings.Join(wantGone, " ") {
		t.Errorf("the rollback removed %v, want %v", gone, wantGone)
	}
	// Against the 0.1.0 directory: what the run wrote (the conversation,
	// its ledger and marker, the chick records compacted at start, the
	// regenerated REFERENCE.md, the history index derived from the
	// conversation), and the lock file.
	for _, d := range dataTreeDiff(old, after, false) {
		ran := false
		for _, p := range []string{"workspace/channels/cli/local/", "workspace/REFERENCE.md", "chicks/chicks.jsonl", "chicks/usage/", "state/inflight/", "state/recall.db"} {
			ran = ran || strings.Contains(d, " "+p)
		}
		if d != "new: state/lock" && !ran {
			t.Errorf("after the rollback, unlike the 0.1.0 directory: %s", d)
		}
	}

	// Nothing more to roll back; started again, she migrates again.
	r = runMother(t, "", nil, "rollback", "--to", "0.1.3", data)
	if r.code != 0 || r.stdout != "nothing to roll back: "+data+" is format 0, which Mother 0.1.3 reads\n" {
		t.Errorf("second rollback: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	r = runMother(t, "once more\n", env, "--cli", data)
	if r.code != 0 || dataFormatFile(t, data) != `{"format":1,"release":"0.2.0"}` {
		t.Errorf("start after the rollback: exit %d, format %q, stderr:\n%s", r.code, dataFormatFile(t, data), r.stderr)
	}
}

func TestDataRollbackRefusedWhileMotherRuns(t *testing.T) {
	t.Parallel()
	fake := ollamatest.New(ollamatest.Turn{Text: "Hello."})
	defer fake.Close()
	data := dataOldDirectory(t, fake.URL)
	cmd := exec.CommandContext(t.Context(), motherBin, "--cli", data)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir(), "USER=mario", "MOTHER_GRPC_LISTEN=127.0.0.1:0", "MOTHER_OLLAMA_URL=" + fake.URL + "/v1", "MOTHER_MODEL_ID=tiny"}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), "mother ready") {
				close(ready)
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		t.Fatal("mother not ready within 60 s")
	}
	running := testenv.Tree(t, data)
	r := runMother(t, "", nil, "rollback", data)
	if r.code != 1 || !strings.HasPrefix(r.stderr, "mother rollback: Mother is running on "+data) || !strings.HasSuffix(r.stderr, "stop her first (systemctl stop mother), then roll back\n") {
		t.Errorf("rollback under a running Mother: exit %d, stderr %q", r.code, r.stderr)
	}
	if got := dataFormatFile(t, data); got != `{"format":1,"release":"0.2.0"}` {
		t.Errorf("format file after the refused rollback = %q", got)
	}
	for _, d := range dataTreeDiff(running, testenv.Tree(t, data), false) {
		// What the running Mother writes meanwhile (her channel, its
		// marker, the history index in the background) is hers.
		if !strings.Contains(d, "workspace/channels/") && !strings.Contains(d, "state/inflight") && !strings.Contains(d, "state/recall.db") {
			t.Errorf("the refused rollback changed %s", d)
		}
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("mother: %v", err)
	}
	r = runMother(t, "", nil, "rollback", data)
	if r.code != 0 || !strings.Contains(r.stdout, "format 1 to 0") {
		t.Errorf("rollback once she stopped: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestDataConfigFieldOfANewerRelease(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	if err := os.MkdirAll(filepath.Join(data, "state"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "config.json"), []byte(`{"chicks": {"foo": 1}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runMother(t, "", nil, "--check-config", data)
	if r.code != 2 || !strings.Contains(r.stderr, "chicks.foo: unknown field") {
		t.Errorf("unknown field: exit %d, stderr %q", r.code, r.stderr)
	}
	// Last run by 0.3.0, of the same format: that release is named.
	if err := os.WriteFile(filepath.Join(data, "state/format.json"), []byte(`{"format":1,"release":"0.3.0"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--check-config", data}, {"--cli", data}} {
		r = runMother(t, "", nil, args...)
		want := "chicks.foo: not known to Mother 0.2.0; the data directory was last run by Mother 0.3.0, which may have added it: remove it to run 0.2.0, or run Mother 0.3.0 again"
		if r.code != 2 || !strings.Contains(r.stderr, want) {
			t.Errorf("%v: exit %d, stderr %q\nwant exit 2 and %q", args, r.code, r.stderr, want)
		}
	}
	if got := dataFormatFile(t, data); got != `{"format":1,"release":"0.3.0"}` {
		t.Errorf("a refused start rewrote the format file: %q", got)
	}
}
