package nest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/mother-chat/mother/pkg/atomicfile"
	"github.com/mother-chat/mother/pkg/clock"
	"github.com/mother-chat/mother/pkg/fsync"
	"github.com/mother-chat/mother/pkg/wire"
)

// TLS is the nest's certificate for ChickService: a private CA of this
// Mother's and a server certificate it signed for wire.NestServerName.
// Chicks receive the CA certificate (public) and trust nothing else, so a
// token on the LAN travels encrypted to the one Mother that started the
// chick.
type TLS struct {
	// CAPEM is the CA certificate, for the chicks.
	CAPEM []byte
	// Creds are the server's credentials for grpc.Creds.
	Creds credentials.TransportCredentials
	// NotAfter is when the server certificate expires.
	NotAfter time.Time
}

// Files of LoadTLS, in its directory.
const (
	CAFile        = "ca.pem"
	CAKeyFile     = "ca-key.pem"
	ServerFile    = "nest.pem"
	ServerKeyFile = "nest-key.pem"
)

// Lifetimes of what LoadTLS creates. A server certificate with less than
// renewBefore left is issued again (same CA, so running chicks are not
// affected).
const (
	caLifetime     = 20 * 365 * 24 * time.Hour
	serverLifetime = 2 * 365 * 24 * time.Hour
	renewBefore    = 30 * 24 * time.Hour
)

// LoadTLS reads the nest's CA and server certificate from dir, creating
// them on first use (ECDSA P-256). The directory is mode 0700, the keys
// 0600. c is the clock (nil: the wall clock).
func LoadTLS(dir string, c clock.Clock) (*TLS, error) {
	now := clock.OrReal(c).Now
	if err := fsync.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("nest tls: %w", err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("nest tls: %w", err)
	}
	caCert, caKey, caPEM, err := loadOrCreateCA(dir, now())
	if err != nil {
		return nil, fmt.Errorf("nest tls: %w", err)
	}
	pair, leaf, err := loadOrCreateServer(dir, caCert, caKey, now())
	if err != nil {
		return nil, fmt.Errorf("nest tls: %w", err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS13}
	return &TLS{CAPEM: caPEM, Creds: credentials.NewTLS(cfg), NotAfter: leaf.NotAfter}, nil
}

func loadOrCreateCA(dir string, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	certPath, keyPath := filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile)
	certPEM, cerr := os.ReadFile(certPath)
	keyPEM, kerr := os.ReadFile(keyPath)
	if cerr == nil && kerr == nil {
		cert, key, err := parsePair(certPEM, keyPEM)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("%s: %w (remove %s and %s to make a new CA; running chicks then cannot reconnect)", dir, err, CAFile, CAKeyFile)
		}
		return cert, key, certPEM, nil
	}
	if !errors.Is(cerr, os.ErrNotExist) || !errors.Is(kerr, os.ErrNotExist) {
		return nil, nil, nil, fmt.Errorf("%s: need both %s and %s (%v, %v)", dir, CAFile, CAKeyFile, cerr, kerr)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Mother nest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(caLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := writeKey(keyPath, key); err != nil {
		return nil, nil, nil, err
	}
	if err := atomicfile.WriteFile(certPath, certPEM, 0o600); err != nil {
		return nil, nil, nil, err
	}
	return cert, key, certPEM, nil
}

func loadOrCreateServer(dir string, ca *x509.Certificate, caKey *ecdsa.PrivateKey, now time.Time) (tls.Certificate, *x509.Certificate, error) {
	certPath, keyPath := filepath.Join(dir, ServerFile), filepath.Join(dir, ServerKeyFile)
	certPEM, cerr := os.ReadFile(certPath)
	keyPEM, kerr := os.ReadFile(keyPath)
	if cerr == nil && kerr == nil {
		if pair, err := tls.X509KeyPair(certPEM, keyPEM); err == nil {
			leaf, err := x509.ParseCertificate(pair.Certificate[0])
			if err == nil && leaf.CheckSignatureFrom(ca) == nil && now.Before(leaf.NotAfter.Add(-renewBefore)) {
				return pair, leaf, nil
			}
		}
		// Expiring, unreadable or from another CA: issue a new one.
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: wire.NestServerName},
		DNSNames:     []string{wire.NestServerName},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(serverLifetime),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	if err := writeKey(keyPath, key); err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	if err := atomicfile.WriteFile(certPath, certPEM, 0o600); err != nil {
		return tls.Certificate{}, nil, err
	}
	pair, err := tls.X509KeyPair(certPEM, mustKeyPEM(key))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	leaf, _ := x509.ParseCertificate(der)
	return pair, leaf, nil
}

func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, *ecdsa.PrivateKey, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, nil, errors.New("not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, nil, err
	}
	if !cert.IsCA {
		return nil, nil, errors.New("not a CA certificate")
	}
	return cert, key, nil
}

func mustKeyPEM(key *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		panic("marshal a freshly generated key: " + err.Error())
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	return atomicfile.WriteFile(path, mustKeyPEM(key), 0o600)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic("crypto/rand failed: " + err.Error())
	}
	return n
}
