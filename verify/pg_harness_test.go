//go:build verify

package verify

// Fleets on PostgreSQL: the configuration (backend.postgres, the URL from
// each replica's environment so that one replica can go through a proxy),
// reading the stream table, and a private PostgreSQL server that a
// scenario may kill and restart without touching the machine's shared one.

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/pgtest"
	otpostgres "github.com/onetick/onetick/postgres"
)

// pgURLEnv carries each replica's PostgreSQL URL (config: url: ${...}).
const pgURLEnv = "ONETICK_VERIFY_PG_URL"

// pgConfigYAML is configYAML (same lease, same jobs, same stream names)
// on PostgreSQL at dbURL (unless the replica's environment names another),
// in schema.
func pgConfigYAML(dbURL, schema string) string {
	return onBackend(configYAML, "backend:\n  postgres:\n    url: ${"+pgURLEnv+":-"+dbURL+"}\n    schema: "+schema+"\n")
}

// onBackend replaces the backend section of a configuration built on
// fleetYAML (everything before its lease section) with section.
func onBackend(yaml, section string) string {
	_, rest, ok := strings.Cut(yaml, "\nlease:")
	if !ok {
		panic("the configuration has no lease section")
	}
	return section + "lease:" + rest
}

// withJobs replaces the jobs of a configuration built on fleetYAML
// (everything after its jobs line) with jobs.
func withJobs(yaml, jobs string) string {
	head, _, ok := strings.Cut(yaml, "\njobs:\n")
	if !ok {
		panic("the configuration has no jobs section")
	}
	return head + "\njobs:\n" + jobs
}

// PGFleet is a fleet on PostgreSQL.
type PGFleet struct {
	*Fleet
	URL    string // the server the replicas use unless told otherwise
	Schema string
}

// NewPGFleet prepares a fleet for scenario on the PostgreSQL at dbURL, in
// a fresh schema (dropped at the end of the test when on the shared
// server; a private server goes away whole).
func NewPGFleet(t *testing.T, scenario, dbURL string) *PGFleet {
	t.Helper()
	return newPGFleet(t, scenario, dbURL, func(y string) string { return y })
}

// newPGFleet is NewPGFleet with the configuration passed through edit.
func newPGFleet(t *testing.T, scenario, dbURL string, edit func(yaml string) string) *PGFleet {
	t.Helper()
	var schema string
	if dbURL == pgtest.URL() {
		schema = pgtest.Schema(t)
	} else {
		schema = fmt.Sprintf("ot_verify_%d", time.Now().UnixNano()%1e9)
	}
	dir := t.TempDir()
	cfg := filepath.Join(dir, "onetick.yaml")
	if err := os.WriteFile(cfg, []byte(edit(pgConfigYAML(dbURL, schema))), 0o644); err != nil {
		t.Fatal(err)
	}
	pg, err := otpostgres.Open(context.Background(), dbURL, otpostgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	f := &Fleet{t: t, Scenario: scenario, cfgPath: cfg, bus: newBus(), pg: pg, final: map[*Replica]Metrics{}}
	// Registered after pgtest.Schema's cleanup: runs before it, so the
	// replicas are gone when the schema is dropped.
	t.Cleanup(f.close)
	return &PGFleet{Fleet: f, URL: dbURL, Schema: schema}
}

// StartOn starts a replica whose PostgreSQL URL is dbURL (a proxy).
func (p *PGFleet) StartOn(name, dbURL string) *Replica {
	p.t.Helper()
	return p.Fleet.Start(name, WithEnv(pgURLEnv+"="+dbURL))
}

// readPGStream reads a stream from the table, retrying for a while: the
// pool's connections die with a restarted server and are replaced on the
// next use.
func (f *Fleet) readPGStream(stream string) ([]onetick.TickRecord, error) {
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		recs, err := f.pg.ReadStream(ctx, stream, 0)
		cancel()
		if err == nil || time.Now().After(deadline) {
			return recs, err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pgHistory reads the leadership history (newest first).
func (f *Fleet) pgHistory(n int) ([]onetick.Term, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return f.pg.History(ctx, n)
}

// withHost returns dbURL with its host:port replaced by addr.
func withHost(t *testing.T, dbURL, addr string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = addr
	return u.String()
}

// hostOf is the host:port of dbURL.
func hostOf(t *testing.T, dbURL string) string {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// PGServer is a private PostgreSQL server: its own data directory (trust
// authentication), its own port, run as the postgres user (PostgreSQL
// refuses to run as root), in its own process group so that a kill takes
// the postmaster and every backend at once.
type PGServer struct {
	t    *testing.T
	bin  string
	dir  string // data directory
	sock string // Unix socket directory
	port int
	cred *syscall.Credential

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	log  *os.File
}

// pgBinDir is the newest /usr/lib/postgresql/*/bin.
func pgBinDir(t *testing.T) string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, k int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vk, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[k])))
		return vi < vk
	})
	if len(dirs) == 0 {
		t.Fatal("no PostgreSQL binaries in /usr/lib/postgresql/*/bin (make verify installs them through scripts/install-deps.sh)")
	}
	return dirs[len(dirs)-1]
}

// StartPGServer initialises and starts a private server on a free port;
// it is killed and its directory removed at the end of the test.
func StartPGServer(t *testing.T) *PGServer {
	t.Helper()
	s := &PGServer{t: t, bin: pgBinDir(t)}
	root, err := os.MkdirTemp("", "onetick-verify-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	s.dir, s.sock = filepath.Join(root, "data"), filepath.Join(root, "sock")
	for _, d := range []string{s.dir, s.sock} {
		if err := os.Mkdir(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("running as root and no postgres user to run a private server as (the postgresql package creates it): %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		for _, d := range []string{root, s.dir, s.sock} {
			if err := os.Chown(d, uid, gid); err != nil {
				t.Fatal(err)
			}
		}
	}
	initdb := exec.Command(filepath.Join(s.bin, "initdb"), "-D", s.dir, "-U", "postgres", "-A", "trust", "--no-sync", "-E", "UTF8", "--locale", "C")
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	initdb.Dir = root
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	s.log, err = os.Create(filepath.Join(root, "postgres.log"))
	if err != nil {
		t.Fatal(err)
	}
	if s.cred != nil {
		_ = os.Chown(s.log.Name(), int(s.cred.Uid), int(s.cred.Gid))
	}
	s.port = freePort(t)
	s.start()
	t.Cleanup(func() {
		s.kill()
		s.log.Close()
		if t.Failed() {
			if b, err := os.ReadFile(s.log.Name()); err == nil {
				t.Logf("private PostgreSQL log (last 3000 bytes):\n%s", lastBytes(string(b), 3000))
			}
		}
	})
	return s
}

func lastBytes(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func freePort(t *testing.T) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// URL is the server's URL (database postgres, user postgres).
func (s *PGServer) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", s.port)
}

// Addr is its TCP address.
func (s *PGServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.port) }

// start runs the postmaster and waits until it accepts connections.
func (s *PGServer) start() {
	s.t.Helper()
	cmd := exec.Command(filepath.Join(s.bin, "postgres"), "-D", s.dir, "-p", strconv.Itoa(s.port),
		"-k", s.sock, "-c", "listen_addresses=127.0.0.1", "-c", "max_connections=100", "-c", "shared_buffers=16MB")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Setpgid: true}
	cmd.Dir = filepath.Dir(s.dir)
	cmd.Stdout, cmd.Stderr = s.log, s.log
	if err := cmd.Start(); err != nil {
		s.t.Fatalf("starting postgres: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.mu.Lock()
	s.cmd, s.done = cmd, done
	s.mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		c, err := pgx.Connect(ctx, s.URL())
		if err == nil {
			err = c.Ping(ctx)
			c.Close(ctx)
		}
		cancel()
		if err == nil {
			return
		}
		select {
		case <-done:
			b, _ := os.ReadFile(s.log.Name())
			s.t.Fatalf("postgres exited at start:\n%s", lastBytes(string(b), 3000))
		default:
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("postgres on port %d does not answer after 30s: %v", s.port, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// kill sends SIGKILL to the server's whole process group (postmaster and
// backends: a crash, no shutdown checkpoint) and waits for the postmaster.
func (s *PGServer) kill() {
	s.mu.Lock()
	cmd, done := s.cmd, s.done
	s.cmd = nil
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	<-done
	// The backends are gone too when the group is empty.
	for i := 0; i < 100; i++ {
		if err := syscall.Kill(-cmd.Process.Pid, 0); err != nil {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Kill crashes the server (SIGKILL to every one of its processes).
func (s *PGServer) Kill() { s.kill() }

// Restart starts it again on the same port and data directory (crash
// recovery replays the WAL: every committed transaction is kept).
func (s *PGServer) Restart() { s.start() }
