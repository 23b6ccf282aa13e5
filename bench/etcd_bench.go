package main

// `go run . -only etcd`: onetick on etcd beside onetick on Redis and on
// PostgreSQL, in one run: tick delay and claim throughput, one replica
// each. etcd is a single member started here (Debian's etcd-server, its
// default heartbeat and election timeout, its WAL fsynced on every
// commit, as in production), on free loopback ports, in a temporary data
// directory; Redis is the run's redis-server, PostgreSQL the machine's
// server (a fresh schema per scenario).

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onetick/onetick"
	otetcd "github.com/onetick/onetick/etcd"
	"github.com/onetick/onetick/testsupport/redisserver"
)

// etcdServer is one etcd process.
type etcdServer struct {
	dir     string
	port    int
	proc    *redisserver.Process
	version string
}

func (s *etcdServer) endpoint() string { return "http://127.0.0.1:" + strconv.Itoa(s.port) }

func (s *etcdServer) stop() {
	s.proc.Kill()
	_ = os.RemoveAll(s.dir)
}

func freeTCPPort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// startEtcd starts a single-member etcd with its default timings.
func startEtcd() (*etcdServer, error) {
	bin, err := exec.LookPath("etcd")
	if err != nil {
		if bin, err = exec.LookPath("/usr/bin/etcd"); err != nil {
			return nil, fmt.Errorf("etcd not found on PATH or at /usr/bin/etcd (scripts/install-deps.sh installs Debian's etcd-server)")
		}
	}
	dir, err := os.MkdirTemp("", "onetick-bench-etcd-")
	if err != nil {
		return nil, err
	}
	s := &etcdServer{dir: dir}
	peerPort := 0
	if s.port, err = freeTCPPort(); err == nil {
		peerPort, err = freeTCPPort()
	}
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if out, err := exec.Command(bin, "--version").Output(); err == nil {
		s.version = strings.TrimPrefix(strings.SplitN(string(out), "\n", 2)[0], "etcd Version: ")
	}
	peer := "http://127.0.0.1:" + strconv.Itoa(peerPort)
	args := []string{"--name", "b", "--data-dir", dir + "/data",
		"--listen-client-urls", s.endpoint(), "--advertise-client-urls", s.endpoint(),
		"--listen-peer-urls", peer, "--initial-advertise-peer-urls", peer,
		"--initial-cluster", "b=" + peer, "--initial-cluster-state", "new",
		"--logger", "zap", "--log-outputs", "stderr"}
	p, err := redisserver.Launch(redisserver.Command{Bin: bin, Args: args, Dir: dir, Ready: "serving client traffic"})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := p.Wait(60 * time.Second); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("etcd: %w", err)
	}
	s.proc = p
	return s, nil
}

// startOnetickEtcd starts replica id of jobs on etcd under keyPrefix,
// with its own client; r, if set, records each claimed tick when the
// sink receives it.
func startOnetickEtcd(endpoint, keyPrefix string, id int, jobs []onetick.Job, r *recorder, logs *logCounter) (*otPGInst, error) {
	b, err := otetcd.Open(context.Background(), otetcd.Config{Endpoints: []string{endpoint}}, otetcd.Options{Prefix: keyPrefix})
	if err != nil {
		return nil, err
	}
	return startOnetickOn(b, id, jobs, onetick.LeaseConfig{}, r, logs)
}

// etcdSection runs the etcd part and returns its markdown.
func (e *env) etcdSection(ctx context.Context) (string, error) {
	srv, err := startEtcd()
	if err != nil {
		return "", err
	}
	defer srv.stop()
	pool, err := pgxpool.New(ctx, pgURL())
	if err != nil {
		return "", err
	}
	defer pool.Close()
	if err := pool.Ping(ctx); err != nil {
		return "", fmt.Errorf("PostgreSQL at %s: %w (scripts/install-deps.sh installs and starts it)", pgURL(), err)
	}
	p := &pgEnv{env: e, adm: pgAdmin{pool: pool}, logs: e.ot.c}
	defer p.adm.dropSchemas(context.Background())
	seq := 0
	onEtcd := func(n int) func(r *recorder) (*otPGInst, error) {
		seq++
		keyPrefix := fmt.Sprintf("bench%d/", seq)
		return func(r *recorder) (*otPGInst, error) {
			return startOnetickEtcd(srv.endpoint(), keyPrefix, 0, everyJobs(n, "1s"), r, p.logs)
		}
	}

	var out strings.Builder
	fmt.Fprintf(&out, "## etcd: onetick on etcd beside Redis and PostgreSQL\n\netcd %s, one member started by the harness (default heartbeat 100 ms and election timeout 1 s, WAL fsynced per commit, --max-txn-ops 128: a large claim is split into transactions of at most 128 operations), in a temporary directory on the machine's disk; Redis the run's redis-server; PostgreSQL %s on 127.0.0.1:5432. One replica each, default lease, an in-process goroutine with its own client; one store at a time.\n\n",
		srv.version, p.adm.version(ctx))
	t := &table{cols: []string{"redis", "pg", "etcd"}, title: map[string]string{"redis": "onetick on Redis", "pg": "onetick on PostgreSQL", "etcd": "onetick on etcd"}}
	ot := e.systems()[0]
	setDelay := func(row *row, key string, ds []time.Duration, err error) {
		if err != nil || len(ds) == 0 {
			row.text(key, "error: %v (%d samples)", err, len(ds))
			return
		}
		row.set(key, cell{text: fmtDur(pct(ds, 50)) + " / " + fmtDur(pct(ds, 99)), vals: []float64{pct(ds, 50).Seconds(), pct(ds, 99).Seconds()}})
	}
	for _, n := range []int{1, 1000} {
		row := t.add(fmt.Sprintf("Tick delay p50 / p99, %d job(s) due each second", n),
			fmt.Sprintf("claimed tick handed to the sink − slot; %s after 2 s warm-up", map[bool]string{true: "10 slots (p99 is the maximum)", false: "4 slots (4000 samples)"}[n == 1]))
		progress("etcd: tick delay, %d jobs, Redis", n)
		rr := e.scenarioDelay(ctx, ot, n)
		setDelay(row, "redis", rr.ds, rr.err)
		progress("etcd: tick delay, %d jobs, PostgreSQL", n)
		ds, err := p.pgDelay(ctx, n)
		setDelay(row, "pg", ds, err)
		progress("etcd: tick delay, %d jobs, etcd", n)
		ds, err = delayOn(n, onEtcd(n))
		setDelay(row, "etcd", ds, err)
	}
	bigN, bigRun := 10_000, 10*time.Second
	if quick {
		bigN, bigRun = 2_000, 5*time.Second
	}
	rThr := t.add(fmt.Sprintf("Claim throughput, %d jobs due at once (ticks/s)", bigN),
		"jobs \"@every 1s\": ticks of the first slot / (last claim − slot); claims of up to 2000 ticks (Redis: one Lua call; PostgreSQL: one transaction; etcd: transactions of at most 128 operations)")
	rBig := t.add(fmt.Sprintf("Tick delay p50 / p99, %d jobs due each second", bigN), fmt.Sprintf("the same run, slots after the first over %s", bigRun))
	progress("etcd: %d jobs, Redis", bigN)
	rb := e.scenarioBig(ctx, bigN, bigRun)
	progress("etcd: %d jobs, PostgreSQL", bigN)
	pb := p.pgBig(ctx, bigN, bigRun)
	progress("etcd: %d jobs, etcd", bigN)
	eb := bigOn(bigN, bigRun, onEtcd(bigN))
	var notes []string
	for _, x := range []struct {
		key string
		r   bigResult
	}{{"redis", rb}, {"pg", pb}, {"etcd", eb}} {
		if n := bigRows(rThr, rBig, x.key, t.title[x.key], bigN, x.r); n != "" {
			notes = append(notes, n)
		}
	}
	fmt.Fprintf(&out, "Each other column's figure is followed by its ratio **column / onetick on Redis** in brackets: above 1 the number is larger (worse for delays, better for throughput).\n\n")
	out.WriteString(t.markdown())
	if len(notes) > 0 {
		out.WriteString("\nNotes:\n\n")
		for _, n := range notes {
			out.WriteString("- " + n + "\n")
		}
	}
	return out.String(), nil
}
