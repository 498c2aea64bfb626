package main

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.mau.fi/whatsmeow/proto/waAdv"
	"go.mau.fi/whatsmeow/types"

	"github.com/mother-chat/mother/pkg/adapters/whatsapp"
)

// linkDevice stores a linked device in the session file, as a successful
// pairing does (whatsmeow saves it).
func linkDevice(t *testing.T, path string) {
	t.Helper()
	s, err := whatsapp.OpenSession(context.Background(), path, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	dev, err := s.Device(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	id := types.NewADJID("4915100000001", 0, 4)
	dev.ID = &id
	dev.Account = &waAdv.ADVSignedDeviceIdentity{Details: []byte("d"), AccountSignatureKey: make([]byte, 32), AccountSignature: make([]byte, 64), DeviceSignature: make([]byte, 64)}
	if err := dev.Save(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// TestWhatsAppSessionChecks runs the real binary: --check-config reports a
// session never linked, a bad admin id, a logged-out session and a
// corrupted file, each naming the adapter and the way out; mother link
// refuses what cannot be linked and leaves a linked session alone; a
// daemon start without a session and without a terminal fails saying how
// to link.
func TestWhatsAppSessionChecks(t *testing.T) {
	t.Parallel()
	data := t.TempDir()
	write := func(cfg string) {
		if err := os.WriteFile(filepath.Join(data, "config.json"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	check := func(want string, code int) {
		t.Helper()
		r := runMother(t, "", nil, "--check-config", data)
		if r.code != code || !strings.Contains(r.stderr+r.stdout, want) {
			t.Errorf("--check-config: exit %d (want %d), output lacks %q:\n%s%s", r.code, code, want, r.stdout, r.stderr)
		}
	}
	write(`{"adapters": {"wa": {"type": "whatsapp", "admins": ["+49 151 2345678"]}, "tg": {"type": "telegram", "botToken": "123:abc"}}}`)
	check("adapters.wa: admins[0]: \"+49 151 2345678\" is not a phone-number JID", 2)

	write(`{"adapters": {"wa": {"type": "whatsapp", "admins": ["4915112345678@s.whatsapp.net"]}, "tg": {"type": "telegram", "botToken": "123:abc"}}}`)
	check("adapters.wa: not linked: no session at", 2)
	session := whatsapp.SessionPath(data, "wa")
	if _, err := os.Stat(session); err == nil {
		t.Errorf("--check-config created the session file")
	}

	// No terminal (stderr is a pipe): the daemon cannot show a QR code.
	r := runMother(t, "", nil, data)
	if r.code == 0 || !strings.Contains(r.stderr, "mother link whatsapp wa DATA") {
		t.Errorf("start without a session: exit %d, stderr lacks the way to link:\n%s", r.code, r.stderr)
	}

	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"link", "telegram", "tg", data}, "nothing to link"},
		{[]string{"link", "whatsapp", "nope", data}, `no adapter "nope"`},
		{[]string{"link", "whatsapp", "tg", data}, `adapter "tg" is of type "telegram"`},
		{[]string{"link", "whatsapp"}, "usage: mother link whatsapp"},
	} {
		r := runMother(t, "", nil, c.args...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("mother %s: exit %d (want 2), stderr lacks %q:\n%s", strings.Join(c.args, " "), r.code, c.want, r.stderr)
		}
	}

	linkDevice(t, session)
	check("configuration OK", 0)
	r = runMother(t, "", nil, "link", "whatsapp", "wa", data)
	if r.code != 0 || !strings.Contains(r.stdout, "already linked to +4915100000001") {
		t.Errorf("link of a linked adapter: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if st, err := os.Stat(session); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("session file %v, %v: want mode 0600", st, err)
	}

	s, err := whatsapp.OpenSession(context.Background(), session, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.MarkLoggedOut(context.Background(), "primary device was logged out", time.Now()); err != nil {
		t.Fatal(err)
	}
	s.Close()
	check("adapters.wa: logged out (", 2)
	check("primary device was logged out): link again with `mother link whatsapp wa DATA`", 2)

	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(session + suffix)
	}
	if err := os.WriteFile(session, []byte(strings.Repeat("not a database ", 20)), 0o600); err != nil {
		t.Fatal(err)
	}
	check("is unusable", 2)
	check("move the file away and link again", 2)
}
