package redistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// ClientAuth is redis-server's tls-auth-clients setting.
type ClientAuth string

const (
	// ClientCertRequired refuses clients without a certificate signed by
	// the CA (Redis's default).
	ClientCertRequired ClientAuth = "yes"
	// ClientCertOptional accepts clients without a certificate, but
	// verifies one that is presented.
	ClientCertOptional ClientAuth = "optional"
	// NoClientCert does not ask clients for a certificate.
	NoClientCert ClientAuth = "no"
)

// TLSOptions configure TLS.
type TLSOptions struct {
	// ClientAuth says whether clients need a certificate; zero means
	// ClientCertRequired, as in Redis.
	ClientAuth ClientAuth
	// Certs are the certificates to use; nil generates a fresh set.
	// Share one set between servers that talk to each other.
	Certs *Certs
}

// TLS makes the server speak only TLS: --tls-port on the server's port
// and --port 0, with the test's certificates.
func TLS(o TLSOptions) Option {
	return func(c *config) { c.tls = &o }
}

// TLS returns the certificates of a server started with the TLS option,
// nil for a plain-text server.
func (s *Server) TLS() *Certs { return s.certs }

// Certs are a CA, a server certificate signed by it for 127.0.0.1, ::1
// and localhost, and a client certificate signed by it, written as PEM
// files (ECDSA P-256 keys) to a directory of the test.
type Certs struct {
	Dir            string
	CAFile         string
	ServerCertFile string
	ServerKeyFile  string
	ClientCertFile string
	ClientKeyFile  string

	pool   *x509.CertPool
	client tls.Certificate
}

// NewCerts generates a CA and the server and client certificates it
// signs, valid for a day, in a temporary directory of the test.
func NewCerts(tb testing.TB) *Certs {
	tb.Helper()
	dir := tb.TempDir()
	c := &Certs{
		Dir:            dir,
		CAFile:         filepath.Join(dir, "ca.crt"),
		ServerCertFile: filepath.Join(dir, "server.crt"),
		ServerKeyFile:  filepath.Join(dir, "server.key"),
		ClientCertFile: filepath.Join(dir, "client.crt"),
		ClientKeyFile:  filepath.Join(dir, "client.key"),
		pool:           x509.NewCertPool(),
	}
	// Backdated a little, so that a clock a moment behind still accepts.
	notBefore := time.Now().Add(-time.Hour)
	notAfter := notBefore.Add(25 * time.Hour)

	caKey := newKey(tb)
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(tb),
		Subject:               pkix.Name{CommonName: "redistest CA"},
		NotBefore:             notBefore,
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		tb.Fatalf("redistest: CA certificate: %v", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		tb.Fatalf("redistest: CA certificate: %v", err)
	}
	c.pool.AddCert(ca)
	writePEM(tb, c.CAFile, "CERTIFICATE", caDER)

	issue := func(cn string, usage []x509.ExtKeyUsage, ips []net.IP, dns []string, certFile, keyFile string) tls.Certificate {
		key := newKey(tb)
		tmpl := &x509.Certificate{
			SerialNumber: serial(tb),
			Subject:      pkix.Name{CommonName: cn},
			NotBefore:    notBefore,
			NotAfter:     notAfter,
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  usage,
			IPAddresses:  ips,
			DNSNames:     dns,
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
		if err != nil {
			tb.Fatalf("redistest: %s certificate: %v", cn, err)
		}
		keyDER, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			tb.Fatalf("redistest: %s key: %v", cn, err)
		}
		writePEM(tb, certFile, "CERTIFICATE", der)
		writePEM(tb, keyFile, "PRIVATE KEY", keyDER)
		return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
	}
	// The server certificate also serves as a client certificate: a
	// replica or a cluster node presents it when it connects to another.
	issue("redistest server", []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		[]net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, []string{"localhost"},
		c.ServerCertFile, c.ServerKeyFile)
	c.client = issue("redistest client", []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}, nil, nil,
		c.ClientCertFile, c.ClientKeyFile)
	return c
}

// ClientConfig is a client TLS configuration that trusts the CA, with the
// client certificate or without it. The server name is left for the
// client to fill from the address it dials (127.0.0.1 or localhost).
func (c *Certs) ClientConfig(withClientCert bool) *tls.Config {
	cfg := &tls.Config{RootCAs: c.pool, MinVersion: tls.VersionTLS12}
	if withClientCert {
		cfg.Certificates = []tls.Certificate{c.client}
	}
	return cfg
}

// CAPool is a pool that holds the CA.
func (c *Certs) CAPool() *x509.CertPool { return c.pool.Clone() }

func newKey(tb testing.TB) *ecdsa.PrivateKey {
	tb.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatalf("redistest: key: %v", err)
	}
	return k
}

func serial(tb testing.TB) *big.Int {
	tb.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		tb.Fatalf("redistest: serial: %v", err)
	}
	return n
}

func writePEM(tb testing.TB, path, typ string, der []byte) {
	tb.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
}
