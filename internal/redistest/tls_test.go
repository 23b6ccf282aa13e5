package redistest

import (
	"context"
	"crypto/x509"
	"errors"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

func ping(o *goredis.Options) error {
	o.MaxRetries = -1
	c := goredis.NewClient(o)
	defer c.Close()
	return c.Ping(context.Background()).Err()
}

func TestTLSClientCertRequired(t *testing.T) {
	checkStopped(t)
	srv := Start(t, TLS(TLSOptions{ClientAuth: ClientCertRequired}))
	if !strings.HasPrefix(srv.URL(), "rediss://127.0.0.1:") {
		t.Fatalf("URL = %s", srv.URL())
	}
	certs := srv.TLS()

	t.Run("CA and client certificate", func(t *testing.T) {
		if err := ping(&goredis.Options{Addr: srv.Addr(), TLSConfig: certs.ClientConfig(true)}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("by URL, localhost", func(t *testing.T) {
		o, err := goredis.ParseURL(strings.Replace(srv.URL(), "127.0.0.1", "localhost", 1))
		if err != nil {
			t.Fatal(err)
		}
		if o.TLSConfig.ServerName != "localhost" {
			t.Fatalf("ServerName = %q", o.TLSConfig.ServerName)
		}
		o.TLSConfig.RootCAs = certs.CAPool()
		o.TLSConfig.Certificates = certs.ClientConfig(true).Certificates
		if err := ping(o); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("without the CA", func(t *testing.T) {
		cfg := certs.ClientConfig(true)
		cfg.RootCAs = nil // the system roots do not know the test's CA
		err := ping(&goredis.Options{Addr: srv.Addr(), TLSConfig: cfg})
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) {
			t.Fatalf("err = %v, want x509.UnknownAuthorityError", err)
		}
	})
	t.Run("without a client certificate", func(t *testing.T) {
		err := ping(&goredis.Options{Addr: srv.Addr(), TLSConfig: certs.ClientConfig(false)})
		if err == nil {
			t.Fatal("a client without a certificate was served")
		}
		// TLS 1.3 finishes the client's side of the handshake before the
		// server checks the certificate: the refusal arrives as the
		// server's alert on the first read.
		if !strings.Contains(err.Error(), "remote error: tls: certificate required") {
			t.Fatalf("err = %v, want the server's certificate-required alert", err)
		}
	})
	t.Run("plain text", func(t *testing.T) {
		if err := ping(&goredis.Options{Addr: srv.Addr()}); err == nil {
			t.Fatal("a plain-text client was served on the TLS port")
		}
	})
	t.Run("admin client", func(t *testing.T) {
		if err := srv.Client().Set(context.Background(), "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if err := srv.Flush(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

func TestTLSClientCertOptionalAndNone(t *testing.T) {
	checkStopped(t)
	certs := NewCerts(t) // one CA for both servers
	for _, auth := range []ClientAuth{ClientCertOptional, NoClientCert} {
		t.Run(string(auth), func(t *testing.T) {
			srv := Start(t, TLS(TLSOptions{ClientAuth: auth, Certs: certs}))
			for _, withCert := range []bool{true, false} {
				if err := ping(&goredis.Options{Addr: srv.Addr(), TLSConfig: certs.ClientConfig(withCert)}); err != nil {
					t.Fatalf("client certificate %v: %v", withCert, err)
				}
			}
		})
	}
}

// TestTLSRestart checks that a TLS server comes back with its
// certificates.
func TestTLSRestart(t *testing.T) {
	checkStopped(t)
	srv := Start(t, TLS(TLSOptions{}))
	srv.Restart()
	if err := ping(srv.Options()); err != nil {
		t.Fatal(err)
	}
}
