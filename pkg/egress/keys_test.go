package egress

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mother-chat/mother/pkg/wire"
)

func TestLoadSecretCreatesOnceAndKeeps(t *testing.T) {
	dir := t.TempDir()
	s1, err := LoadSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, SecretFile))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v, want 0600", fi.Mode().Perm())
	}
	s2, err := LoadSecret(dir)
	if err != nil {
		t.Fatal(err)
	}
	if s1.GateToken("i", "h") != s2.GateToken("i", "h") || s1.ChickKey("i", "h", "c") != s2.ChickKey("i", "h", "c") {
		t.Error("a reloaded secret derives other tokens")
	}
	if s1.ChickKey("i", "h", "c1") == s1.ChickKey("i", "h", "c2") || s1.GateToken("i", "h1") == s1.GateToken("i", "h2") {
		t.Error("different names derive the same token")
	}
	if s1.ChickKey("i", "h1", "c") == s1.ChickKey("i", "h2", "c") {
		t.Error("a chick key is good at another host's gate")
	}
	if s1.ChickKey("i", "h", "c") == s1.NestKey("i", "h", "c") {
		t.Error("a nest-only key is the proxy key")
	}
	if s1.GateToken("i", "h") == s1.ChickKey("i", "h", "i\x00h") {
		t.Error("a chick key can pass for a gate token")
	}
	// The gate checks a key against its own token, without the secret.
	tok := s1.GateToken("i", "h")
	if ok, proxy := wire.CheckChickKey(tok, "c", s1.ChickKey("i", "h", "c")); !ok || !proxy {
		t.Errorf("the gate's check of an isolated chick's key: %v %v, want true true", ok, proxy)
	}
	if ok, proxy := wire.CheckChickKey(tok, "c", s1.NestKey("i", "h", "c")); !ok || proxy {
		t.Errorf("the gate's check of a nest-only key: %v %v, want true false", ok, proxy)
	}
	if ok, _ := wire.CheckChickKey(tok, "c2", s1.ChickKey("i", "h", "c")); ok {
		t.Error("the gate takes chick c's key for chick c2")
	}
	other := NewSecret([]byte("0123456789abcdef0123456789abcdef"))
	if other.ChickKey("i", "h", "c") == s1.ChickKey("i", "h", "c") {
		t.Error("two secrets derive the same key")
	}
}

func TestLoadSecretRefusesShortFile(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, SecretFile), []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadSecret(dir); err == nil {
		t.Fatal("a 5-byte secret was accepted")
	}
}
