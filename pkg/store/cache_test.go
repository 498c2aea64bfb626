package store

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/mother-chat/mother/pkg/model"
)

// TestLoadContextReadsOnlyWhatIsNew checks the kept parse: loads after
// appends and rewrites see exactly the file, callers' changes to what they
// got do not leak into the next load, and only maxCachedContexts channels
// keep theirs.
func TestLoadContextReadsOnlyWhatIsNew(t *testing.T) {
	t.Parallel()
	st, ch := openTest(t, t.TempDir())
	rec := func(text string) ContextRecord {
		return ContextRecord{Type: RecordMessage, Message: &model.Message{Role: model.RoleUser, Content: text}}
	}
	texts := func(s ContextState) []string {
		var out []string
		for _, r := range s.Records {
			if r.Message != nil {
				out = append(out, r.Message.Content)
			}
		}
		return out
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(ch.AppendContext(rec("a"), rec("b")))
	s1, err := ch.LoadContext()
	must(err)
	if got := fmt.Sprint(texts(s1)); got != "[a b]" {
		t.Fatalf("first load %s", got)
	}
	s1.Records = append(s1.Records[:1], rec("scribbled"))
	s1.Seen["x"] = true
	must(ch.AppendContext(rec("c"), ContextRecord{Type: RecordSeen, MsgID: "m9", LogEnd: 42}))
	b, err := os.ReadFile(ch.ContextPath())
	must(err)
	must(os.WriteFile(ch.ContextPath(), bytes.Replace(b, []byte(`"c"`), []byte(`"C"`), 1), 0o600))
	s2, err := ch.LoadContext()
	must(err)
	must(os.WriteFile(ch.ContextPath(), b, 0o600))
	if got := fmt.Sprint(texts(s2)); got != "[a b c]" || len(s2.Records) != 4 || s2.Seen["x"] || !s2.Seen["m9"] || s2.Cursor != (Cursor{Offset: 42, LastID: "m9"}) {
		t.Fatalf("second load %v %+v", texts(s2), s2)
	}
	// The appended records went into the kept parse as written: the load
	// read nothing back (bytes changed under the store are not seen), and
	// what it holds is what a fresh read of the file gives.
	ch.dropCache()
	fresh, err := ch.LoadContext()
	must(err)
	kept, _ := json.Marshal(s2)
	read, _ := json.Marshal(fresh)
	if !bytes.Equal(kept, read) {
		t.Fatalf("kept parse after appends:\n%s\nthe file read afresh:\n%s", kept, read)
	}
	must(ch.RewriteContext([]ContextRecord{rec("summary")}))
	s3, err := ch.LoadContext()
	must(err)
	if got := fmt.Sprint(texts(s3)); got != "[summary]" || len(s3.Seen) != 0 {
		t.Fatalf("load after a rewrite %s %+v", got, s3)
	}
	// Loading more channels than are kept drops the oldest parse; a load
	// after that reads the file again, with the same result.
	for i := range maxCachedContexts {
		other, err := st.Channel("test", fmt.Sprintf("O%d", i))
		must(err)
		_, err = other.LoadContext()
		must(err)
	}
	ch.mu.Lock()
	dropped := ch.cache == nil
	ch.mu.Unlock()
	if !dropped {
		t.Error("the oldest channel kept its parsed context")
	}
	s4, err := ch.LoadContext()
	must(err)
	if got := fmt.Sprint(texts(s4)); got != "[summary]" {
		t.Errorf("load after the drop %s", got)
	}
}

// TestDropContextCaches: the idle trim's drop forgets every kept parse,
// and the next load reads the file again with the same result.
func TestDropContextCaches(t *testing.T) {
	t.Parallel()
	st, ch := openTest(t, t.TempDir())
	other, err := st.Channel("test", "other")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*Channel{ch, other} {
		if err := c.AppendContext(ContextRecord{Type: RecordMessage, Message: &model.Message{Role: model.RoleUser, Content: "hello"}}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.LoadContext(); err != nil {
			t.Fatal(err)
		}
	}
	st.DropContextCaches()
	for _, c := range []*Channel{ch, other} {
		c.mu.Lock()
		kept := c.cache != nil
		c.mu.Unlock()
		if kept {
			t.Errorf("channel %s kept its parsed context after the drop", c.ID)
		}
		s, err := c.LoadContext()
		if err != nil || len(s.Records) != 1 || s.Records[0].Message.Content != "hello" {
			t.Errorf("load after the drop: %+v, %v", s, err)
		}
	}
	st.lruMu.Lock()
	n := len(st.cached)
	st.lruMu.Unlock()
	if n != 2 {
		t.Errorf("%d channels kept after loading two again, want 2", n)
	}
}

// TestOpenContextFollowsWritesInPlace: the state OpenContext hands out is
// the kept parse itself; appends and a rewrite through the Channel change
// it in place to exactly what a fresh read of the file gives; while it is
// held the store's cache limit and the idle drop leave it alone, and once
// released they drop it.
func TestOpenContextFollowsWritesInPlace(t *testing.T) {
	t.Parallel()
	st, ch := openTest(t, t.TempDir())
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	msg := func(id, text string, end int64) ContextRecord {
		return ContextRecord{Type: RecordMessage, MsgID: id, LogEnd: end, Message: &model.Message{Role: model.RoleUser, Content: text}}
	}
	// freshly compares held with what a store opened afresh reads.
	freshly := func(held *ContextState, when string) {
		t.Helper()
		st2, err := Open(st.dataDir, Options{})
		must(err)
		defer st2.Close()
		c2, err := st2.Channel(ch.Adapter, ch.ID)
		must(err)
		read, err := c2.LoadContext()
		must(err)
		a, _ := json.Marshal(held)
		b, _ := json.Marshal(read)
		if !bytes.Equal(a, b) {
			t.Fatalf("%s: the held state\n%s\nthe file read afresh\n%s", when, a, b)
		}
	}
	must(ch.AppendContext(msg("m1", "a", 10)))
	held, release, err := ch.OpenContext()
	must(err)
	if len(held.Records) != 1 || !held.IDs["m1"] || held.Cursor.Offset != 10 {
		t.Fatalf("opened %+v", held)
	}
	must(ch.AppendContext(msg("m2", "b", 20), ContextRecord{Type: RecordSeen, MsgID: "r1"}, ContextRecord{Type: RecordSeen, MsgID: "m3", LogEnd: 30}))
	if len(held.Records) != 4 || !held.IDs["m2"] || !held.Seen["r1"] || !held.IDs["r1"] || held.Cursor != (Cursor{Offset: 30, LastID: "m3"}) {
		t.Fatalf("after appends %+v", held)
	}
	freshly(held, "after appends")
	again, release2, err := ch.OpenContext()
	must(err)
	if again != held {
		t.Fatal("a second OpenContext parsed the context again")
	}
	release2()
	// Held: neither the cache limit nor the idle drop take it.
	for i := range maxCachedContexts + 1 {
		other, err := st.Channel("test", fmt.Sprintf("O%d", i))
		must(err)
		_, err = other.LoadContext()
		must(err)
	}
	st.DropContextCaches()
	must(ch.RewriteContext([]ContextRecord{{Type: RecordSession}, {Type: RecordCompaction, Summary: "s", MsgID: "m3", LogEnd: 30, Seen: []string{"r1"}}, msg("", "kept", 0)}))
	if len(held.Records) != 3 || held.IDs["m2"] || !held.Seen["r1"] || held.Cursor != (Cursor{Offset: 30, LastID: "m3"}) {
		t.Fatalf("after the rewrite %+v", held)
	}
	freshly(held, "after the rewrite")
	must(ch.AppendContext(msg("m4", "c", 40)))
	freshly(held, "after an append past the rewrite")
	ch.mu.Lock()
	kept := ch.cache == held
	ch.mu.Unlock()
	if !kept {
		t.Fatal("the held state was dropped or replaced")
	}
	// Released (twice is harmless): the drop asked for meanwhile happens.
	release()
	release()
	ch.mu.Lock()
	dropped := ch.cache == nil && ch.holders == 0
	ch.mu.Unlock()
	if !dropped {
		t.Error("the released state was kept after a drop was asked for while it was held")
	}
}
