// Package etcdtest starts real etcd processes for tests: Debian's
// etcd-server (/usr/bin/etcd, `make test` installs it through
// scripts/install-deps.sh), one single-member cluster per Start, on free
// loopback ports, in a data directory of its own, stopped by the test's
// cleanup. It never embeds an etcd server in the test binary.
package etcdtest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/testsupport/redisserver"
)

// readyLine is what etcd (3.4, zap logger) logs once it serves clients.
const readyLine = "serving client traffic"

// MaxTxnOps is the --max-txn-ops the test servers run with: etcd's
// default, so the backend's chunking of large claims is what the tests
// exercise.
const MaxTxnOps = 128

// Server is one etcd process.
type Server struct {
	// Port is the client port, PeerPort the peer port.
	Port, PeerPort int

	// Certs, for a server started by StartTLS: its CA, server and client
	// certificates.
	Certs *redistest.Certs

	dir  string
	name string // member name ("t" for a single-member server)
	// cluster is --initial-cluster (the member alone when empty);
	// heartbeat and election are the timings in ms.
	cluster             string
	heartbeat, election int
	// advertise, when set, is the peer URL the member advertises (a
	// gate in front of its peer port).
	advertise string

	mu   sync.Mutex
	log  []string
	proc *redisserver.Process
}

// Binary returns the etcd binary: etcd on PATH or /usr/bin/etcd.
func Binary() (string, error) {
	if p, err := exec.LookPath("etcd"); err == nil {
		return p, nil
	}
	if p, err := exec.LookPath("/usr/bin/etcd"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("etcd not found on PATH or at /usr/bin/etcd (scripts/install-deps.sh installs Debian's etcd-server)")
}

// Start starts a single-member etcd for tb and stops it at tb's cleanup.
// Heartbeat and election timeout are short (10ms, 100ms) so that etcd
// grants leases as short as one second, like a LAN deployment tuned for
// short leases; a failed start (a port taken meanwhile) is retried on new
// ports.
func Start(tb testing.TB) *Server { return start(tb, nil) }

// StartTLS is Start for a server that speaks TLS to clients (https) and
// requires a client certificate signed by its CA (--client-cert-auth).
func StartTLS(tb testing.TB) *Server { return start(tb, redistest.NewCerts(tb)) }

func start(tb testing.TB, certs *redistest.Certs) *Server {
	tb.Helper()
	bin, err := Binary()
	if err != nil {
		tb.Fatal(err)
	}
	var last error
	for range 3 {
		s := &Server{dir: tb.TempDir(), Certs: certs, name: "t", heartbeat: 10, election: 100}
		if s.Port, err = redisserver.FreePort(); err != nil {
			tb.Fatal(err)
		}
		if s.PeerPort, err = redisserver.FreePort(); err != nil {
			tb.Fatal(err)
		}
		if last = s.start(bin); last == nil {
			tb.Cleanup(s.Kill)
			return s
		}
	}
	tb.Fatalf("start etcd: %v", last)
	return nil
}

func (s *Server) start(bin string) error {
	p, err := s.launch(bin)
	if err != nil {
		return err
	}
	if err := p.Wait(30 * time.Second); err != nil {
		p.Kill()
		return err
	}
	s.setProc(p)
	return nil
}

// launch starts the etcd process and returns at once (the members of a
// cluster are ready only once a quorum of them runs).
func (s *Server) launch(bin string) (*redisserver.Process, error) {
	client, peer := s.Endpoint(), "http://127.0.0.1:"+strconv.Itoa(s.PeerPort)
	adv := peer
	if s.advertise != "" {
		adv = s.advertise
	}
	cluster := s.cluster
	if cluster == "" {
		cluster = s.name + "=" + adv
	}
	args := []string{"--name", s.name, "--data-dir", s.dir + "/data",
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", adv,
		"--initial-cluster", cluster, "--initial-cluster-state", "new",
		"--heartbeat-interval", strconv.Itoa(s.heartbeat), "--election-timeout", strconv.Itoa(s.election),
		"--max-txn-ops", strconv.Itoa(MaxTxnOps), "--logger", "zap", "--log-outputs", "stderr"}
	if c := s.Certs; c != nil {
		args = append(args, "--cert-file", c.ServerCertFile, "--key-file", c.ServerKeyFile,
			"--trusted-ca-file", c.CAFile, "--client-cert-auth")
	}
	return redisserver.Launch(redisserver.Command{Bin: bin, Args: args, Dir: s.dir, Ready: readyLine, Log: s.appendLog})
}

func (s *Server) setProc(p *redisserver.Process) {
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
}

// Kill kills the process (SIGKILL) and waits until it has exited; a
// killed server stays killed (its data directory is kept).
func (s *Server) Kill() {
	s.mu.Lock()
	p := s.proc
	s.proc = nil
	s.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// Alive reports whether the process runs (started and not killed).
func (s *Server) Alive() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil
}

func (s *Server) appendLog(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, line)
	if len(s.log) > 500 {
		s.log = s.log[len(s.log)-500:]
	}
}

// Log returns the server's last log lines.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return strings.Join(s.log, "\n")
}

// Endpoint is the server's client URL.
func (s *Server) Endpoint() string {
	scheme := "http"
	if s.Certs != nil {
		scheme = "https"
	}
	return scheme + "://127.0.0.1:" + strconv.Itoa(s.Port)
}

// Client returns a client of the server, closed at tb's cleanup.
func (s *Server) Client(tb testing.TB) *clientv3.Client {
	tb.Helper()
	cfg := clientv3.Config{Endpoints: []string{s.Endpoint()}, DialTimeout: 10 * time.Second, Logger: zap.NewNop()}
	if s.Certs != nil {
		cfg.TLS = s.Certs.ClientConfig(true)
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Prefix returns a key prefix of its own for one test's state.
func Prefix() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "t" + hex.EncodeToString(b[:]) + "/"
}
