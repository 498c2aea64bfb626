// Package egress is Mother's side of chick isolation (docs/isolation.md):
// the secret that gate tokens and chick gate keys derive from, and the
// policy that decides what a chick may reach through its host's gate.
package egress

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/wire"
)

// SecretFile is the gate secret's file name (in the nest's TLS directory).
const SecretFile = "gate.key"

// Secret is the key gate tokens and chick gate keys derive from. Derived,
// not stored, so gates and chicks keep working across a Mother restart.
type Secret struct{ key []byte }

// LoadSecret reads dir/gate.key, creating it (32 random bytes, 0600) on
// first use.
func LoadSecret(dir string) (Secret, error) {
	path := filepath.Join(dir, SecretFile)
	b, err := os.ReadFile(path)
	if err == nil {
		if len(b) < 32 {
			return Secret{}, fmt.Errorf("gate secret %s: %d bytes, want 32 (remove it to make a new one)", path, len(b))
		}
		return Secret{key: b}, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return Secret{}, fmt.Errorf("gate secret: %w", err)
	}
	b = make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return Secret{}, fmt.Errorf("gate secret: %w", err)
	}
	if err := fsync.MkdirAll(dir, 0o700); err != nil {
		return Secret{}, fmt.Errorf("gate secret: %w", err)
	}
	if err := atomicfile.WriteFile(path, b, 0o600); err != nil {
		return Secret{}, fmt.Errorf("gate secret: %w", err)
	}
	return Secret{key: b}, nil
}

// NewSecret is a Secret from key (tests).
func NewSecret(key []byte) Secret { return Secret{key: key} }

func (s Secret) mac(parts ...string) string {
	m := hmac.New(sha256.New, s.key)
	for i, p := range parts {
		if i > 0 {
			m.Write([]byte{0})
		}
		m.Write([]byte(p))
	}
	return hex.EncodeToString(m.Sum(nil))
}

// GateToken is the GateService token of the gate of host for instance.
func (s Secret) GateToken(instance, host string) string { return s.mac("gate", instance, host) }

// ChickKey is the gate key of isolated chick id on host's gate for
// instance (wire.ChickGateKey of that gate's token): it names that chick
// to that gate, on both of its sockets.
func (s Secret) ChickKey(instance, host, id string) string {
	return wire.ChickGateKey(s.GateToken(instance, host), id)
}

// NestKey is the gate key of chick id of network "none" on host's gate
// (wire.ChickNestKey): it opens that gate's nest.sock only.
func (s Secret) NestKey(instance, host, id string) string {
	return wire.ChickNestKey(s.GateToken(instance, host), id)
}

// Equal compares two tokens or keys in constant time.
func Equal(a, b string) bool { return hmac.Equal([]byte(a), []byte(b)) }
