package wire

import (
	"crypto/tls"
	"crypto/x509"
	"errors"

	"google.golang.org/grpc/credentials"
)

// NestServerName is the name in the nest's TLS certificate. A chick checks
// it whatever address it dials (an IP, a LAN name, loopback), so the
// certificate does not depend on how Mother is reached; what makes it
// Mother is that it is signed by the CA the chick was given.
const NestServerName = "mother-nest"

// ClientTLS returns the transport credentials a chick dials the nest with:
// TLS 1.3, trusting only the CA in caPEM (Mother's own, passed in the
// chick's environment), for the name NestServerName.
func ClientTLS(caPEM []byte) (credentials.TransportCredentials, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return nil, errors.New("no CA certificate in the PEM data for the nest")
	}
	return credentials.NewTLS(&tls.Config{
		RootCAs:    pool,
		ServerName: NestServerName,
		MinVersion: tls.VersionTLS13,
	}), nil
}
