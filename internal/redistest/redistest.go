// Package redistest starts real redis-server processes on free loopback
// ports for tests, and lets a test kill, pause, resume and restart them.
//
// Start gives one standalone server, optionally behind TLS (TLS) and with
// ACL users (User, RequirePass, DisableDefaultUser). StartSentinel gives a
// primary with replicas watched by Sentinels, StartCluster a Redis Cluster.
// Every process is killed at the end of the test that started it; a
// process also dies with the test binary (see launch). The processes
// themselves are started by package testsupport/redisserver, which the
// benchmark harness uses too.
package redistest

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick/testsupport/redisserver"
)

// Option configures a server started by Start (or a data node of a
// topology, through the topology's NodeOptions).
type Option func(*config)

type config struct {
	args []string
	tls  *TLSOptions
	acl  aclConfig
	// conf holds lines of a config file the server starts from. Settings
	// that Redis itself may change and persist (CONFIG REWRITE after a
	// Sentinel reconfiguration) go here rather than on the command line,
	// where they would override the rewritten file on a restart.
	conf []string
	// cluster asks for a second free port, the cluster bus.
	cluster bool
}

// AppendOnly turns on AOF persistence with fsync on every write.
func AppendOnly() Option {
	return Args("--appendonly", "yes", "--appendfsync", "always")
}

// KeyspaceEvents enables keyspace notifications for generic and expired
// events, so watchers hear about lease expiry.
func KeyspaceEvents() Option {
	return Args("--notify-keyspace-events", "Kgx")
}

// Args adds redis-server command-line arguments, for settings no other
// option covers (for example Args("--min-replicas-to-write", "1")).
func Args(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// Start starts a redis-server on a free port; it is killed at the end of
// the test. The binary comes from PATH; `make test` installs it.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	var c config
	for _, o := range opts {
		o(&c)
	}
	s := newServer(tb, &c)
	if err := s.startFresh(); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	return s
}

// newServer prepares a server (its directory, certificates and ACL file)
// without starting it, and registers its kill with the test's cleanup.
func newServer(tb testing.TB, c *config) *Server {
	tb.Helper()
	bin := serverBinary(tb)
	s := &Server{tb: tb, dir: tb.TempDir(), bin: bin, ready: readyLine}
	if c.tls != nil {
		s.certs = c.tls.Certs
		if s.certs == nil {
			s.certs = NewCerts(tb)
		}
		s.tlsAuth = c.tls.ClientAuth
		if s.tlsAuth == "" {
			s.tlsAuth = ClientCertRequired
		}
	}
	s.setupACL(&c.acl)
	if len(c.conf) > 0 {
		s.confFile = writeFile(tb, s.dir, "redis.conf", c.conf)
	}
	extra := append([]string(nil), c.args...)
	cluster := c.cluster
	s.argv = func(port int) []string {
		var a []string
		if s.confFile != "" {
			a = append(a, s.confFile)
		}
		a = append(a, redisserver.BaseArgs(s.dir)...)
		if s.certs != nil {
			a = append(a, "--port", "0", "--tls-port", strconv.Itoa(port),
				"--tls-cert-file", s.certs.ServerCertFile, "--tls-key-file", s.certs.ServerKeyFile,
				"--tls-ca-cert-file", s.certs.CAFile, "--tls-auth-clients", string(s.tlsAuth))
		} else {
			a = append(a, "--port", strconv.Itoa(port))
		}
		if s.aclFile != "" {
			a = append(a, "--aclfile", s.aclFile)
		}
		if cluster {
			if s.BusPort == 0 {
				s.BusPort = freePort(tb)
			}
			a = append(a, "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-port", strconv.Itoa(s.BusPort))
		}
		return append(a, extra...)
	}
	tb.Cleanup(s.cleanup)
	return s
}

func serverBinary(tb testing.TB) string {
	tb.Helper()
	bin, err := redisserver.Binary()
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	return bin
}

// startFresh starts the server on a newly chosen free port, choosing again
// when another process took the port between the choice and the bind.
func (s *Server) startFresh() error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		s.Port = freePort(s.tb)
		s.BusPort = 0
		if err = s.start(); err == nil {
			return nil
		}
	}
	return err
}

// startAll starts servers at once, each on a new free port; one whose
// port was taken meanwhile starts again on another.
func startAll(ss []*Server) error {
	waits := make([]func() error, len(ss))
	for i, s := range ss {
		s.Port, s.BusPort = freePort(s.tb), 0
		waits[i] = s.launch()
	}
	var errs []error
	for i, wait := range waits {
		if err := wait(); err != nil {
			if err := ss[i].startFresh(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func freePort(tb testing.TB) int {
	p, err := redisserver.FreePort()
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	return p
}

// Addr is host:port.
func (s *Server) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// Dir is the server's working directory (its config, ACL and data files).
func (s *Server) Dir() string { return s.dir }

// URL is the redis:// URL of database 0 (rediss:// when the server speaks
// TLS), without credentials.
func (s *Server) URL() string {
	scheme := "redis"
	if s.certs != nil {
		scheme = "rediss"
	}
	return scheme + "://" + s.Addr() + "/0"
}

// UserURL is the URL of database 0 with the credentials of a user created
// by the User option.
func (s *Server) UserURL(name string) string {
	s.tb.Helper()
	u, err := url.Parse(s.URL())
	if err != nil {
		s.tb.Fatalf("redistest: %v", err)
	}
	u.User = url.UserPassword(name, s.userPassword(name))
	return u.String()
}

// Options are client options with full rights on the server: its TLS
// settings (with the client certificate) and, when the default user needs
// a password or is disabled, an administrator's credentials.
func (s *Server) Options() *goredis.Options {
	o := &goredis.Options{Addr: s.Addr(), Username: s.adminUser, Password: s.adminPass}
	if s.certs != nil {
		o.TLSConfig = s.certs.ClientConfig(true)
	}
	return o
}

// UserOptions are client options that log in as a user created by the
// User option (with the client certificate when the server speaks TLS).
func (s *Server) UserOptions(name string) *goredis.Options {
	s.tb.Helper()
	o := s.Options()
	o.Username, o.Password = name, s.userPassword(name)
	return o
}

// Client returns a client with full rights (see Options) that is closed at
// the end of the test.
func (s *Server) Client() *goredis.Client {
	c := goredis.NewClient(s.Options())
	s.tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Flush empties the server.
func (s *Server) Flush(ctx context.Context) error {
	c := goredis.NewClient(s.Options())
	defer c.Close()
	return c.FlushAll(ctx).Err()
}

// probe is a short-lived administrative connection for the harness's own
// questions (roles, replication state). It does not retry and gives up
// quickly, so that a paused or killed server answers with an error rather
// than stalling the poll that asked.
func (s *Server) probe() *goredis.Client {
	o := s.Options()
	o.MaxRetries = -1
	o.DialTimeout = 300 * time.Millisecond
	o.ReadTimeout = 500 * time.Millisecond
	o.WriteTimeout = 500 * time.Millisecond
	o.PoolSize = 1
	return goredis.NewClient(o)
}

// do runs one command on the server through a probe connection.
func (s *Server) do(ctx context.Context, args ...any) (any, error) {
	c := s.probe()
	defer c.Close()
	return c.Do(ctx, args...).Result()
}
