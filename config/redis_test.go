package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRedisURL(t *testing.T) {
	cases := []struct {
		url, user, pw, want string
	}{
		{"redis://h:6379/2", "", "", "redis://h:6379/2"},
		{"redis://u:old@h:6379/2", "", "new", "redis://u:new@h:6379/2"},
		{"redis://u:old@h:6379/2", "x", "", "redis://x:old@h:6379/2"},
		{"redis://h:6379", "", "p@ss:w/rd", "redis://:p%40ss%3Aw%2Frd@h:6379"},
		{"redis://h:6379", "bob", "", "redis://bob@h:6379"},
		{"rediss://h", "bob", "pw", "rediss://bob:pw@h"},
	}
	for _, c := range cases {
		f := &File{Backend: Backend{Redis: &Redis{URL: c.url, Username: c.user, Password: c.pw}}}
		if got := f.RedisURL(); got != c.want {
			t.Errorf("RedisURL(%q, %q, %q) = %q, want %q", c.url, c.user, c.pw, got, c.want)
		}
		o, err := f.RedisOptions()
		if err != nil {
			t.Fatal(err)
		}
		if c.pw != "" && o.Password != c.pw {
			t.Errorf("%q: go-redis password %q, want %q", c.url, o.Password, c.pw)
		}
		if m := f.MaskedRedisURL(); c.pw != "" && strings.Contains(m, c.pw) {
			t.Errorf("masked URL %q shows the password", m)
		}
	}
	if got := (&File{}).RedisURL(); got != "" {
		t.Errorf("no redis: %q", got)
	}
	if o, err := (&File{}).RedisOptions(); o != nil || err != nil {
		t.Errorf("no redis: %v %v", o, err)
	}
}

// writeCert writes a self-signed certificate and its key to dir.
func writeCert(t *testing.T, dir string) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "redis.test"}, DNSNames: []string{"redis.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return certFile, keyFile
}

func TestTLSConfig(t *testing.T) {
	dir := t.TempDir()
	writeCert(t, dir)
	path := filepath.Join(dir, "onetick.yaml")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	// Relative names are resolved against the file's directory.
	write("backend:\n  redis:\n    url: rediss://redis.test:6380\n    tls:\n      ca_file: cert.pem\n      cert_file: cert.pem\n      key_file: key.pem\n")
	f, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	tc, err := f.TLSConfig()
	if err != nil {
		t.Fatal(err)
	}
	if tc.RootCAs == nil || len(tc.Certificates) != 1 || tc.ServerName != "redis.test" || tc.MinVersion != tls.VersionTLS12 || tc.InsecureSkipVerify {
		t.Errorf("tls config = %+v", tc)
	}
	if !f.Backend.Redis.TLS.Enabled {
		t.Error("rediss:// does not imply tls.enabled")
	}
	o, err := f.RedisOptions()
	if err != nil || o.TLSConfig == nil || o.TLSConfig.RootCAs == nil {
		t.Errorf("RedisOptions = %+v, %v", o, err)
	}

	// enabled with redis://, and server_name.
	write("backend:\n  redis:\n    url: redis://10.0.0.1:6380\n    tls:\n      enabled: true\n      server_name: redis.test\n      insecure_skip_verify: true\n")
	f, err = Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if tc, err := f.TLSConfig(); err != nil || tc == nil || tc.ServerName != "redis.test" || !tc.InsecureSkipVerify || tc.RootCAs != nil {
		t.Errorf("tls config = %+v, %v", tc, err)
	}

	// A missing file is named, with its field and line.
	write("backend:\n  redis:\n    url: rediss://h\n    tls:\n      ca_file: missing.pem\n")
	f, err = Load(path)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.TLSConfig()
	var e *Error
	if !errors.As(err, &e) || e.Field != "backend.redis.tls.ca_file" || e.Line != 5 || !errors.Is(err, fs.ErrNotExist) ||
		!strings.Contains(err.Error(), filepath.Join(dir, "missing.pem")) {
		t.Errorf("missing ca: %v", err)
	}

	// Not PEM.
	write("backend:\n  redis:\n    url: rediss://h\n    tls:\n      ca_file: onetick.yaml\n")
	f, _ = Load(path)
	if _, err := f.TLSConfig(); err == nil || !strings.Contains(err.Error(), "backend.redis.tls.ca_file: no PEM certificates") {
		t.Errorf("bad ca: %v", err)
	}

	// A key that is not the certificate's.
	other := t.TempDir()
	writeCert(t, other)
	write("backend:\n  redis:\n    url: rediss://h\n    tls:\n      cert_file: cert.pem\n      key_file: " + filepath.Join(other, "key.pem") + "\n")
	f, _ = Load(path)
	if _, err := f.TLSConfig(); err == nil || !strings.Contains(err.Error(), "backend.redis.tls.key_file") {
		t.Errorf("mismatched key: %v", err)
	}
	write("backend:\n  redis:\n    url: rediss://h\n    tls:\n      cert_file: nope.pem\n      key_file: key.pem\n")
	f, _ = Load(path)
	if _, err := f.TLSConfig(); err == nil || !strings.Contains(err.Error(), ":5: backend.redis.tls.cert_file: cannot read") {
		t.Errorf("missing cert: %v", err)
	}

	// TLS off.
	f = mustParse(t, "backend:\n  redis:\n    url: redis://h\n", noEnv)
	if tc, err := f.TLSConfig(); tc != nil || err != nil {
		t.Errorf("TLS off: %v, %v", tc, err)
	}
}
