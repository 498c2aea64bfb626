package setup

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/mother-chat/mother/pkg/fsync"
)

// DockerTLS are the files GenerateDockerTLS writes, by role.
type DockerTLS struct {
	Dir string
	// CA, Cert and Key are Mother's: tlsCA, tlsCert, tlsKey.
	CA, Cert, Key string
	// ServerCert and ServerKey go to the Docker host (/etc/docker/tls/,
	// with CA); CAKey should be kept offline.
	ServerCert, ServerKey, CAKey string
}

// DefaultTLSDays is how long the certificates are valid, as with
// deploy/inference/gen-docker-tls.sh.
const DefaultTLSDays = 825

// GenerateDockerTLS does what deploy/inference/gen-docker-tls.sh does, in
// Go: a private CA ("Mother Docker CA"), a server certificate for dockerd
// with serverName and ips as subject alternative names (serverAuth), and
// Mother's client certificate (CN mother, clientAuth), all valid for days
// from now, in dir under the script's file names (ca.pem, ca-key.pem,
// server-cert.pem, server-key.pem, cert.pem, key.pem; keys 0400,
// certificates 0444, dir 0700). Like the script it refuses a dir that
// already holds ca-key.pem. The keys are ECDSA P-256 (the script makes
// RSA 4096): dockerd takes both, and P-256 is what Mother's own nest TLS
// uses and takes no time on a Pi.
func GenerateDockerTLS(dir, serverName string, ips []net.IP, days int, now time.Time) (DockerTLS, error) {
	if serverName == "" {
		return DockerTLS{}, errors.New("docker TLS: the server's DNS name is required")
	}
	if days <= 0 {
		days = DefaultTLSDays
	}
	out := DockerTLS{Dir: dir,
		CA: filepath.Join(dir, "ca.pem"), CAKey: filepath.Join(dir, "ca-key.pem"),
		ServerCert: filepath.Join(dir, "server-cert.pem"), ServerKey: filepath.Join(dir, "server-key.pem"),
		Cert: filepath.Join(dir, "cert.pem"), Key: filepath.Join(dir, "key.pem")}
	if err := fsync.MkdirAll(dir, 0o700); err != nil {
		return out, fmt.Errorf("docker TLS: %w", err)
	}
	if _, err := os.Stat(out.CAKey); err == nil {
		return out, fmt.Errorf("docker TLS: %s exists; refusing to overwrite (remove the directory to start over)", out.CAKey)
	}
	notBefore := now.Add(-5 * time.Minute)
	notAfter := now.Add(time.Duration(days) * 24 * time.Hour)

	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return out, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "Mother Docker CA"},
		NotBefore: notBefore, NotAfter: notAfter, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return out, fmt.Errorf("docker TLS: CA: %w", err)
	}
	ca, _ := x509.ParseCertificate(caDER)
	leaf := func(cn string, usage x509.ExtKeyUsage, dns []string, ips []net.IP) ([]byte, *ecdsa.PrivateKey, error) {
		k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return nil, nil, err
		}
		t := &x509.Certificate{
			SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
			NotBefore: notBefore, NotAfter: notAfter,
			KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage: []x509.ExtKeyUsage{usage}, DNSNames: dns, IPAddresses: ips,
		}
		der, err := x509.CreateCertificate(rand.Reader, t, ca, &k.PublicKey, caKey)
		return der, k, err
	}
	srvDER, srvKey, err := leaf(serverName, x509.ExtKeyUsageServerAuth, []string{serverName}, ips)
	if err != nil {
		return out, fmt.Errorf("docker TLS: server certificate: %w", err)
	}
	cliDER, cliKey, err := leaf("mother", x509.ExtKeyUsageClientAuth, nil, nil)
	if err != nil {
		return out, fmt.Errorf("docker TLS: client certificate: %w", err)
	}
	for _, f := range []struct {
		path  string
		typ   string
		der   []byte
		key   *ecdsa.PrivateKey
		perm  os.FileMode
		isKey bool
	}{
		{out.CAKey, "", nil, caKey, 0o400, true},
		{out.CA, "CERTIFICATE", caDER, nil, 0o444, false},
		{out.ServerKey, "", nil, srvKey, 0o400, true},
		{out.ServerCert, "CERTIFICATE", srvDER, nil, 0o444, false},
		{out.Key, "", nil, cliKey, 0o400, true},
		{out.Cert, "CERTIFICATE", cliDER, nil, 0o444, false},
	} {
		block := &pem.Block{Type: f.typ, Bytes: f.der}
		if f.isKey {
			der, err := x509.MarshalECPrivateKey(f.key)
			if err != nil {
				return out, err
			}
			block = &pem.Block{Type: "EC PRIVATE KEY", Bytes: der}
		}
		if err := os.WriteFile(f.path, pem.EncodeToMemory(block), f.perm); err != nil {
			return out, fmt.Errorf("docker TLS: %w", err)
		}
	}
	return out, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}
