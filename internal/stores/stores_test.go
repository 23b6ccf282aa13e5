package stores

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/config"
	"github.com/onetick/onetick/internal/etcdtest"
	"github.com/onetick/onetick/internal/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func parse(t *testing.T, yaml string) *config.File {
	t.Helper()
	f, err := config.Parse("test.yaml", []byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// use checks that an open handle works: the backend answers, the worker
// store registers a consumer; then that Close closes the backend.
func use(t *testing.T, h *Handle, kind Kind) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if h.Kind() != kind || h.Description().Kind != kind {
		t.Errorf("kind %q, description %+v, want %q", h.Kind(), h.Description(), kind)
	}
	if _, err := h.Backend().Time(ctx); err != nil {
		t.Fatalf("Time: %v", err)
	}
	ws, err := h.WorkStore("stores-test")
	if err != nil {
		t.Fatal(err)
	}
	if err := ws.Register(ctx, "consumer-1", []string{"stores-test:stream"}, time.Minute); err != nil {
		t.Fatalf("Register: %v", err)
	}
	if _, err := ws.Status(ctx, []string{"a"}); err != nil {
		t.Fatalf("Status: %v", err)
	}
	// Every store keeps the run ledger.
	lg, err := h.Ledger()
	if err != nil {
		t.Fatalf("Ledger of the %s store: %v", kind, err)
	}
	if p, err := lg.Runs(ctx, onetick.RunQuery{Job: "a"}); err != nil || len(p.Runs) != 0 {
		t.Fatalf("Runs of an empty ledger: %+v, %v", p, err)
	}
	if err := h.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := h.Backend().Time(ctx); err == nil {
		t.Error("the backend answers after Close")
	}
}

func TestMemory(t *testing.T) {
	var out bytes.Buffer
	h, err := Open(context.Background(), parse(t, "backend: {memory: {}}\n"), Options{Memory: true, Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	if d := h.Describe(context.Background()); d != "embedded (in-process)" {
		t.Errorf("Describe = %q", d)
	}
	if h.Sink() == nil {
		t.Fatal("no sink for the in-process store")
	}
	if err := h.Sink().Deliver(context.Background(), []onetick.TickRecord{{Job: "a", Slot: 1000, Tick: "t", Payload: `{"n":1}`}}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"job":"a"`) || !strings.Contains(out.String(), `"payload":{"n":1}`) {
		t.Errorf("sink wrote %q", out.String())
	}
	use(t, h, Memory)
}

func TestFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state", "onetick.db")
	f := parse(t, "backend:\n  file: {path: "+path+"}\n")
	p, mem, err := Embedded(f, "", false, os.Getenv)
	if err != nil || mem || p != path {
		t.Fatalf("Embedded = %q, %v, %v", p, mem, err)
	}
	msg, err := Migrate(context.Background(), f, Options{Path: p})
	if err != nil || !strings.Contains(msg, "no onetick state at "+path+" yet") {
		t.Fatalf("Migrate before the file exists: %q, %v", msg, err)
	}
	h, err := Open(context.Background(), f, Options{Path: p})
	if err != nil {
		t.Fatal(err)
	}
	if d := h.Description(); d.Path != path || d.Address != "" {
		t.Errorf("description %+v", d)
	}
	if d := h.Describe(context.Background()); d != "embedded (file "+path+")" {
		t.Errorf("Describe = %q", d)
	}
	if h.Sink() != nil {
		t.Error("a sink without Stdout")
	}
	use(t, h, File)
	if msg, err = Migrate(context.Background(), f, Options{Path: p}); err != nil || !strings.Contains(msg, "is at the current version") {
		t.Fatalf("Migrate: %q, %v", msg, err)
	}
}

func TestEmbeddedChoice(t *testing.T) {
	f := parse(t, "backend: {memory: {}}\n")
	if _, mem, err := Embedded(f, "", false, os.Getenv); err != nil || !mem {
		t.Fatalf("backend.memory: mem %v, %v", mem, err)
	}
	var inv *InvalidError
	if _, _, err := Embedded(f, "/tmp/x.db", false, os.Getenv); !errors.As(err, &inv) || !strings.Contains(err.Error(), "exclude each other") {
		t.Fatalf("--data with memory: %v", err)
	}
	if _, err := Open(context.Background(), parse(t, "jobs: []\n"), Options{}); !errors.As(err, &inv) {
		t.Fatalf("Open without a path or memory: %v", err)
	}
}

func TestRedis(t *testing.T) {
	prefix := fmt.Sprintf("ot_test_stores_%d_%d", os.Getpid(), time.Now().UnixNano())
	f := parse(t, "backend:\n  redis:\n    url: redis://127.0.0.1:6379/0\n    prefix: "+prefix+"\n    durability: replicated\n    replicas: 2\n")
	t.Cleanup(func() { dropKeys(t, prefix) })
	if o := f.BackendOptions(); o.Prefix != prefix || o.Durability != "replicated" || o.Replicas != 2 || o.ClockTolerance != config.DefaultClockTolerance {
		t.Errorf("BackendOptions = %+v", o)
	}
	h, err := Open(context.Background(), f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := h.Description(); d.Address != "redis://127.0.0.1:6379/0" || d.Prefix != prefix {
		t.Errorf("description %+v", d)
	}
	if d := h.Describe(context.Background()); !strings.HasPrefix(d, "redis redis://127.0.0.1:6379/0, durability replicated (2 replicas") {
		t.Errorf("Describe = %q", d)
	}
	if h.Sink() != nil {
		t.Error("a shared store has a sink")
	}
	use(t, h, Redis)
	msg, err := Migrate(context.Background(), f, Options{})
	if err != nil || !strings.Contains(msg, "Redis keeps no schema") {
		t.Fatalf("Migrate: %q, %v", msg, err)
	}
}

// The ledger section reaches Redis (off: the backend's reads refuse), and
// the handle's upkeep folds the ledger's log while it runs.
func TestRedisLedger(t *testing.T) {
	prefix := fmt.Sprintf("ot_test_stores_ledger_%d_%d", os.Getpid(), time.Now().UnixNano())
	t.Cleanup(func() { dropKeys(t, prefix) })
	ctx := context.Background()
	off := parse(t, "backend:\n  redis:\n    url: redis://127.0.0.1:6379/0\n    prefix: "+prefix+"\nledger: {off: true}\n")
	h, err := Open(ctx, off, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Backend().(onetick.Ledger).Runs(ctx, onetick.RunQuery{Job: "a"}); !errors.Is(err, onetick.ErrLedgerOff) {
		t.Fatalf("Runs of a Redis opened with ledger.off: %v", err)
	}
	_ = h.Close()

	on := parse(t, "backend:\n  redis:\n    url: redis://127.0.0.1:6379/0\n    prefix: "+prefix+"\n")
	if h, err = Open(ctx, on, Options{}); err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	b := h.Backend()
	g, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	slot := onetick.SlotOf(time.Now().Add(-time.Minute))
	if _, err := b.Claim(ctx, g.Lease, []onetick.Tick{{Job: "a", Slot: slot, Stream: prefix + ":s", Payload: "{}", Retention: time.Hour}}); err != nil {
		t.Fatal(err)
	}
	uctx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); h.Upkeep(uctx) }()
	defer func() { stop(); <-done }()
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
	defer c.Close()
	for deadline := time.Now().Add(30 * time.Second); ; {
		n, err := c.LLen(ctx, prefix+":ledger:log").Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the upkeep left %d entries in the ledger's log", n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n, err := c.HLen(ctx, prefix+":ledger").Result(); err != nil || n != 1 {
		t.Fatalf("%d records, %v: want the claim's", n, err)
	}
}

// dropKeys deletes what a test wrote under prefix.
func dropKeys(t *testing.T, prefix string) {
	c := goredis.NewClient(&goredis.Options{Addr: "127.0.0.1:6379"})
	defer c.Close()
	ctx := context.Background()
	keys, err := c.Keys(ctx, prefix+"*").Result()
	if err != nil {
		t.Errorf("listing %s*: %v", prefix, err)
		return
	}
	if len(keys) > 0 {
		if err := c.Del(ctx, keys...).Err(); err != nil {
			t.Errorf("deleting %s*: %v", prefix, err)
		}
	}
}

func TestPostgres(t *testing.T) {
	schema := pgtest.Schema(t)
	f := parse(t, "backend:\n  postgres:\n    url: "+pgtest.URL()+"\n    schema: "+schema+"\n    entry_retention: 2h\n")
	if o := f.PostgresOptions(); o.Schema != schema || o.EntryRetention != 2*time.Hour || o.ClockTolerance != config.DefaultClockTolerance {
		t.Errorf("PostgresOptions = %+v", o)
	}
	ctx := context.Background()
	if _, err := Open(ctx, f, Options{Schema: CheckSchema}); err == nil || !strings.Contains(err.Error(), "run `onetick migrate --config test.yaml`") {
		t.Fatalf("Open of an empty schema with CheckSchema: %v", err)
	}
	msg, err := Migrate(ctx, f, Options{})
	if err != nil || !strings.Contains(msg, "schema "+schema+" at ") || !strings.Contains(msg, "migrated to version") {
		t.Fatalf("Migrate: %q, %v", msg, err)
	}
	if msg, err = Migrate(ctx, f, Options{}); err != nil || !strings.Contains(msg, "nothing to do") {
		t.Fatalf("Migrate again: %q, %v", msg, err)
	}
	h, err := Open(ctx, f, Options{Schema: CheckSchema})
	if err != nil {
		t.Fatal(err)
	}
	if d := h.Description(); d.Schema != schema || d.Address == "" {
		t.Errorf("description %+v", d)
	}
	if d := h.Describe(ctx); !strings.Contains(d, "schema "+schema+", PostgreSQL ") || !strings.HasSuffix(d, " primary") {
		t.Errorf("Describe = %q", d)
	}
	uctx, cancel := context.WithCancel(ctx)
	cancel()
	h.Upkeep(uctx) // returns when its context ends
	use(t, h, Postgres)
}

// TestUnreachable: a store that does not answer is an error that names
// its masked address, never the password.
func TestUnreachable(t *testing.T) {
	const pw = "s3cretpw"
	for _, c := range []struct{ name, yaml, want string }{
		{"redis", "backend:\n  redis: {url: 'redis://:" + pw + "@127.0.0.1:1/0'}\n", "cannot reach Redis at redis://:xxxxx@127.0.0.1:1/0: "},
		{"sentinel", "backend:\n  redis:\n    sentinel: {primary: m, addrs: ['127.0.0.1:1'], password: " + pw + "}\n    password: " + pw + "\n",
			"cannot reach Redis at sentinel m via 127.0.0.1:1: "},
		{"postgres", "backend:\n  postgres: {url: 'postgres://u:" + pw + "@127.0.0.1:1/db?sslmode=disable'}\n", "cannot reach PostgreSQL at postgres://u:xxxxx@127.0.0.1:1/db?sslmode=disable: "},
		{"etcd", "backend:\n  etcd: {endpoints: ['http://127.0.0.1:1'], username: u, password: " + pw + "}\n", "cannot reach etcd at http://127.0.0.1:1 prefix onetick/: "},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			defer cancel()
			h, err := Open(ctx, parse(t, c.yaml), Options{})
			if err == nil {
				_ = h.Close()
				t.Fatal("opened an unreachable store")
			}
			if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), pw) {
				t.Fatalf("error %q, want it to contain %q and not the password", err, c.want)
			}
			var inv *InvalidError
			if errors.As(err, &inv) {
				t.Errorf("an unreachable store is not a configuration error: %v", err)
			}
		})
	}
}

// TestInvalid: a configuration whose client cannot be built is an
// *InvalidError naming the field.
func TestInvalid(t *testing.T) {
	f := parse(t, "backend:\n  redis:\n    url: rediss://127.0.0.1:1/0\n    tls: {ca_file: /nonexistent/ca.pem}\n")
	_, err := Open(context.Background(), f, Options{})
	var inv *InvalidError
	if !errors.As(err, &inv) || !strings.Contains(err.Error(), "backend.redis.tls.ca_file: cannot read /nonexistent/ca.pem") {
		t.Fatalf("Open: %v", err)
	}
}

// TestPostgresLedgerOff: the ledger section reaches the PostgreSQL
// backend: with ledger.off its reads fail with ErrLedgerOff.
func TestPostgresLedgerOff(t *testing.T) {
	schema := pgtest.Schema(t)
	f := parse(t, "backend:\n  postgres:\n    url: "+pgtest.URL()+"\n    schema: "+schema+"\nledger:\n  off: true\n")
	ctx := context.Background()
	h, err := Open(ctx, f, Options{Schema: MigrateSchema})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if _, err := h.Backend().(onetick.Ledger).Runs(ctx, onetick.RunQuery{Job: "a"}); !errors.Is(err, onetick.ErrLedgerOff) {
		t.Fatalf("Runs with ledger.off: %v, want ErrLedgerOff", err)
	}
}

// TestEtcd: backend.etcd opens the etcd store under its prefix, with the
// worker store and the run ledger; it keeps no schema. A TLS file that
// cannot be read is an *InvalidError naming the field.
func TestEtcd(t *testing.T) {
	s := etcdtest.Start(t)
	prefix := etcdtest.Prefix()
	f := parse(t, "backend:\n  etcd:\n    endpoints: ["+s.Endpoint()+"]\n    prefix: "+prefix+"\n")
	ctx := context.Background()
	if msg, err := Migrate(ctx, f, Options{}); err != nil || !strings.Contains(msg, "etcd keeps no schema") {
		t.Fatalf("Migrate: %q, %v", msg, err)
	}
	h, err := Open(ctx, f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if d := h.Description(); d.Prefix != prefix || !strings.Contains(d.Address, s.Endpoint()) {
		t.Errorf("description %+v", d)
	}
	if d := h.Describe(ctx); !strings.HasPrefix(d, "etcd "+s.Endpoint()) {
		t.Errorf("Describe = %q", d)
	}
	use(t, h, Etcd)

	bad := parse(t, "backend:\n  etcd:\n    endpoints: [https://127.0.0.1:1]\n    tls: {ca_file: /nonexistent/ca.pem}\n")
	_, err = Open(ctx, bad, Options{})
	var inv *InvalidError
	if !errors.As(err, &inv) || !strings.Contains(err.Error(), "backend.etcd.tls.ca_file: cannot read /nonexistent/ca.pem") {
		t.Fatalf("Open with an unreadable CA file: %v", err)
	}
}

// TestEtcdTLS: backend.etcd with https:// endpoints and the tls section
// reaches an etcd that requires TLS and a client certificate; without
// the client certificate the store does not answer.
func TestEtcdTLS(t *testing.T) {
	s := etcdtest.StartTLS(t)
	c := s.Certs
	f := parse(t, "backend:\n  etcd:\n    endpoints: ["+s.Endpoint()+"]\n    prefix: "+etcdtest.Prefix()+
		"\n    tls: {ca_file: "+c.CAFile+", cert_file: "+c.ClientCertFile+", key_file: "+c.ClientKeyFile+"}\n")
	h, err := Open(context.Background(), f, Options{})
	if err != nil {
		t.Fatal(err)
	}
	use(t, h, Etcd)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	noCert := parse(t, "backend:\n  etcd:\n    endpoints: ["+s.Endpoint()+"]\n    tls: {ca_file: "+c.CAFile+"}\n")
	if h, err := Open(ctx, noCert, Options{}); err == nil {
		_ = h.Close()
		t.Fatal("opened an etcd that requires a client certificate without one")
	}
}
