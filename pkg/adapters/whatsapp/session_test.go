package whatsapp

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mau.fi/whatsmeow/types"
)

// TestSessionStore exercises the real session file: whatsmeow's SQL store
// on the pure-Go SQLite driver.
func TestSessionStore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "state", "whatsapp", "wa.db")
	s, err := OpenSession(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, filepath.Dir(path)} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		want := os.FileMode(0o600)
		if st.IsDir() {
			want = 0o700
		}
		if st.Mode().Perm() != want {
			t.Errorf("%s has mode %v, want %v", p, st.Mode().Perm(), want)
		}
	}
	// Foreign keys hold on every connection of the pool, not just the
	// first (whatsmeow's schema relies on cascading deletes).
	var conns []*sql.Conn
	for range 3 {
		c, err := s.db.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
	}
	for i, c := range conns {
		var on int
		if err := c.QueryRowContext(ctx, "PRAGMA foreign_keys").Scan(&on); err != nil || on != 1 {
			t.Errorf("connection %d: foreign_keys = %d, %v; want 1", i, on, err)
		}
		c.Close()
	}
	if _, err := s.State(ctx, "wa"); !errors.Is(err, ErrNotLinked) || !strings.Contains(err.Error(), "mother link whatsapp wa DATA") {
		t.Errorf("fresh session state = %v, want ErrNotLinked saying how to link", err)
	}
	// Store a device as pairing does (whatsmeow saves it on success).
	dev, err := s.Device(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dev.LID, dev.PushName = types.NewJID("100000000000001", types.HiddenUserServer), "Mother"
	saveLinkedDevice(t, dev, types.NewADJID("4915100000001", 0, 12))
	if fresh, err := s.MarkSeen(ctx, "chat/1", time.Now()); err != nil || !fresh {
		t.Fatalf("MarkSeen = %v, %v", fresh, err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Reopened: the same device, keys and all, and the handled ids.
	s, err = OpenSession(ctx, path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	got, err := s.State(ctx, "wa")
	if err != nil || got.User != "4915100000001" || got.Device != 12 {
		t.Fatalf("reopened state = %v, %v; want the linked device", got, err)
	}
	dev2, err := s.Device(ctx)
	if err != nil || string(dev2.IdentityKey.Priv[:]) != string(dev.IdentityKey.Priv[:]) || dev2.RegistrationID != dev.RegistrationID {
		t.Errorf("reopened device keys differ (err %v)", err)
	}
	if fresh, _ := s.MarkSeen(ctx, "chat/1", time.Now()); fresh {
		t.Errorf("a handled id was forgotten across a reopen")
	}
	if err := CheckSession(ctx, path, "wa"); err != nil {
		t.Errorf("CheckSession of a linked session = %v", err)
	}

	// A logout (whatsmeow deletes the device; the adapter records it).
	if err := dev2.Delete(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.MarkLoggedOut(ctx, "logged out from another device", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.State(ctx, "wa"); !errors.Is(err, ErrLoggedOut) || !strings.Contains(err.Error(), "logged out from another device") {
		t.Errorf("state after logout = %v", err)
	}
	if err := CheckSession(ctx, path, "wa"); !errors.Is(err, ErrLoggedOut) {
		t.Errorf("CheckSession after logout = %v", err)
	}
	if err := s.ClearLoggedOut(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := s.State(ctx, "wa"); !errors.Is(err, ErrNotLinked) {
		t.Errorf("state after clearing the logout = %v, want not linked (the device is gone)", err)
	}
	// Old ids are trimmed.
	if err := s.TrimSeen(ctx, time.Now().Add(seenKeep+time.Hour)); err != nil {
		t.Fatal(err)
	}
	if fresh, _ := s.MarkSeen(ctx, "chat/1", time.Now()); !fresh {
		t.Errorf("an id older than %v was kept", seenKeep)
	}
}

func TestSessionLooseModeTightened(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "wa.db")
	if err := os.WriteFile(path, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := OpenSession(t.Context(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if st, _ := os.Stat(path); st.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", st.Mode().Perm())
	}
}

func TestCorruptedSessionReported(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.db")
	os.WriteFile(garbage, []byte("this is not an SQLite database, just some text that is long enough to look like a header........"), 0o600)

	// A real session with its middle overwritten.
	torn := filepath.Join(dir, "torn.db")
	s, err := OpenSession(ctx, torn, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	data, _ := os.ReadFile(torn)
	for i := 100; i < len(data); i++ {
		data[i] = 0xA5
	}
	os.WriteFile(torn, data, 0o600)
	os.Remove(torn + "-wal")
	os.Remove(torn + "-shm")

	for _, p := range []string{garbage, torn} {
		_, err := OpenSession(ctx, p, nil)
		if err == nil {
			t.Errorf("OpenSession(%s): no error", filepath.Base(p))
			continue
		}
		for _, want := range []string{p, "unusable", "move the file away", "mother link whatsapp"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("OpenSession(%s) = %v; want it to say %q", filepath.Base(p), err, want)
			}
		}
		if err := CheckSession(ctx, p, "wa"); err == nil || !strings.Contains(err.Error(), "unusable") {
			t.Errorf("CheckSession(%s) = %v", filepath.Base(p), err)
		}
	}
	if err := CheckSession(ctx, filepath.Join(dir, "missing.db"), "wa"); !errors.Is(err, ErrNotLinked) {
		t.Errorf("CheckSession of a missing file = %v, want ErrNotLinked", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); err == nil {
		t.Errorf("CheckSession created the missing session file")
	}
}

// TestStartWithoutSession: a start with no linked session and no
// terminal fails with the way to link, and the status says so.
func TestStartWithoutSession(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, err := New(chatEnv(dir), Options{NoLinkPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	err = a.Start(t.Context(), newInbox())
	if !errors.Is(err, ErrNotLinked) || !strings.Contains(err.Error(), "mother link whatsapp wa DATA") {
		t.Fatalf("Start = %v, want ErrNotLinked with the way to link", err)
	}
	if st := a.Status(); st.State != "down" || !strings.Contains(st.LastError, "not linked") {
		t.Errorf("status = %+v", st)
	}
	if st, err := os.Stat(SessionPath(dir, "wa")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("session file: %v, %v", st, err)
	}
}
