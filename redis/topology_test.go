package redis_test

import (
	"context"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/backendtest"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/redis"
)

// harnessFor is the conformance harness over clients made by newClient
// (closed at the end of each subtest) and a flush of the whole store.
func harnessFor(newClient func() goredis.UniversalClient, flush func(t *testing.T), opts redis.Options) backendtest.Harness {
	h := harness(nil, nil)
	h.New = func(t *testing.T) onetick.Backend {
		flush(t)
		c := newClient()
		t.Cleanup(func() { _ = c.Close() })
		return redis.New(c, opts)
	}
	h.NewRetained = func(t *testing.T, r onetick.LedgerRetention) onetick.Backend {
		flush(t)
		c := newClient()
		t.Cleanup(func() { _ = c.Close() })
		o := opts
		o.Ledger = r
		return redis.New(c, o)
	}
	return h
}

// TestConformanceTLS: the suite over TLS, verifying the server with the
// test's CA and presenting a client certificate (tls-auth-clients yes).
func TestConformanceTLS(t *testing.T) {
	srv := redistest.Start(t, redistest.TLS(redistest.TLSOptions{ClientAuth: redistest.ClientCertRequired}))
	if !strings.HasPrefix(srv.URL(), "rediss://") {
		t.Fatalf("URL %s", srv.URL())
	}
	backendtest.Exercise(t, harnessFor(func() goredis.UniversalClient { return goredis.NewClient(srv.Options()) },
		func(t *testing.T) {
			if err := srv.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}, redis.Options{}))
}

// MinimalACL is the ACL a onetick user needs on a Redis whose key prefix
// is prefix: its keys, its channels and keyspace notifications of them,
// and the commands of the scripts and reads (the README quotes it). Streams
// named outside the prefix need their own key patterns. Shards' views
// (redis.ShardPrefix) are covered too: P:NN is under P:*, and for a
// prefix with a hash tag {t} the views' tags {t:NN.k} are under {t:*.
func MinimalACL(prefix string) []string {
	pats := []string{prefix + ":*"}
	if i := strings.IndexByte(prefix, '{'); i >= 0 {
		if j := strings.IndexByte(prefix[i+1:], '}'); j > 0 {
			pats = append(pats, prefix[:i+1+j]+":*")
		}
	}
	acl := []string{"resetkeys"}
	for _, p := range pats {
		acl = append(acl, "~"+p)
	}
	acl = append(acl, "resetchannels")
	for _, p := range pats {
		acl = append(acl, "&"+p, "&__keyspace@*__:"+p)
	}
	return append(acl,
		"-@all",
		"+@read", "+@write", "+@stream", "+@hash", "+@list", "+@set", "+@sortedset", "+@string", "+@keyspace",
		"+@scripting", "+@pubsub", "+@connection", "+time",
		"-@dangerous",
	)
}

// TestConformanceACL: the suite as a user that may do what MinimalACL
// allows and nothing more (the default user is off); every stream of the
// suite lives under the prefix.
func TestConformanceACL(t *testing.T) {
	srv := redistest.Start(t, redistest.DisableDefaultUser(), redistest.User("onetick", "acl-test-password", MinimalACL("onetick")...))
	h := harnessFor(func() goredis.UniversalClient { return goredis.NewClient(srv.UserOptions("onetick")) },
		func(t *testing.T) {
			if err := srv.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}, redis.Options{})
	h.StreamKey = func(name string) string { return "onetick:s:" + name }
	backendtest.Exercise(t, h)
	// And the user cannot touch a key outside the prefix.
	c := goredis.NewClient(srv.UserOptions("onetick"))
	defer c.Close()
	if err := c.Set(context.Background(), "other:key", "x", 0).Err(); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("SET outside the prefix: %v, want NOPERM", err)
	}
}

// TestConformanceSentinel: the suite through a go-redis failover client
// that asks three Sentinels for the primary.
func TestConformanceSentinel(t *testing.T) {
	topo := redistest.StartSentinel(t, redistest.SentinelOptions{})
	backendtest.Exercise(t, harnessFor(func() goredis.UniversalClient { return goredis.NewFailoverClient(topo.FailoverOptions()) },
		func(t *testing.T) {
			if err := topo.Primary().Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}, redis.Options{}))
}

// TestConformanceCluster: the suite on a Redis Cluster of three primaries:
// every key under the hash-tagged prefix, streams included, so each claim
// is one script on one node.
func TestConformanceCluster(t *testing.T) {
	c := redistest.StartCluster(t, redistest.ClusterOptions{})
	newClient := func() *goredis.ClusterClient {
		return goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Addrs(), Password: c.Password()})
	}
	h := harnessFor(func() goredis.UniversalClient { return newClient() },
		func(t *testing.T) {
			if err := c.Flush(context.Background()); err != nil {
				t.Fatal(err)
			}
		}, redis.Options{Prefix: "{onetick}"})
	h.StreamKey = func(name string) string { return "{onetick}:s:" + name }
	backendtest.Exercise(t, h)
}
