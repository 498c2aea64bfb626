package egress

import (
	"os"
	"path/filepath"
	"testing"
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
	if s1.GateToken("i", "h") != s2.GateToken("i", "h") || s1.ChickKey("c") != s2.ChickKey("c") {
		t.Error("a reloaded secret derives other tokens")
	}
	if s1.ChickKey("c1") == s1.ChickKey("c2") || s1.GateToken("i", "h1") == s1.GateToken("i", "h2") {
		t.Error("different names derive the same token")
	}
	if s1.GateToken("i", "h") == s1.ChickKey("i\x00h") {
		t.Error("a chick key can pass for a gate token")
	}
	other := NewSecret([]byte("0123456789abcdef0123456789abcdef"))
	if other.ChickKey("c") == s1.ChickKey("c") {
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
