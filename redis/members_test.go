package redis_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/backendtest"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/redis"
)

// membersHarness runs each case on a flushed store whose clients newClient
// makes; the store's clock is Redis's own (TIME), so the suite waits TTLs
// out.
func membersHarness(newClient func() goredis.UniversalClient, flush func(context.Context) error, opts redis.Options) backendtest.MembersHarness {
	return backendtest.MembersHarness{New: func(t *testing.T) backendtest.MembersStore {
		if err := flush(context.Background()); err != nil {
			t.Fatal(err)
		}
		c := newClient()
		t.Cleanup(func() { _ = c.Close() })
		return redis.New(c, opts)
	}}
}

func TestMembers(t *testing.T) {
	srv := redistest.Start(t)
	backendtest.Members(t, membersHarness(func() goredis.UniversalClient { return goredis.NewClient(srv.Options()) }, srv.Flush, redis.Options{}))
	// The fleet's key: <prefix>:members, a sorted set that expires with
	// its last entry.
	c := goredis.NewClient(srv.Options())
	defer c.Close()
	b := redis.New(c, redis.Options{})
	ctx := context.Background()
	if err := srv.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Heartbeat(ctx, "a", time.Minute); err != nil {
		t.Fatal(err)
	}
	if typ, err := c.Type(ctx, "onetick:members").Result(); err != nil || typ != "zset" {
		t.Fatalf("onetick:members is a %q (%v), want a zset", typ, err)
	}
	if pttl, err := c.PTTL(ctx, "onetick:members").Result(); err != nil || pttl <= 0 || pttl > time.Minute {
		t.Fatalf("onetick:members expires in %s (%v), want within the ttl", pttl, err)
	}
}

// The script's commands are within the README's ACL.
func TestMembersACL(t *testing.T) {
	srv := redistest.Start(t, redistest.DisableDefaultUser(), redistest.User("onetick", "acl-test-password", MinimalACL("onetick")...))
	backendtest.Members(t, membersHarness(func() goredis.UniversalClient { return goredis.NewClient(srv.UserOptions("onetick")) }, srv.Flush, redis.Options{}))
}

// On a Cluster the prefix is hash-tagged ({onetick}), so the members key
// is in the fleet's slot and the script runs on that slot's primary.
func TestMembersCluster(t *testing.T) {
	cl := redistest.StartCluster(t, redistest.ClusterOptions{})
	newClient := func() goredis.UniversalClient {
		return goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: cl.Addrs(), Password: cl.Password()})
	}
	backendtest.Members(t, membersHarness(newClient, cl.Flush, redis.Options{Prefix: "{onetick}"}))
	c := newClient()
	defer c.Close()
	ctx := context.Background()
	if err := cl.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	live, err := redis.New(c, redis.Options{Prefix: "{onetick}"}).Heartbeat(ctx, "a", time.Minute)
	if err != nil || !slices.Equal(live, []string{"a"}) {
		t.Fatalf("heartbeat: %q, %v", live, err)
	}
	if n, err := c.ZCard(ctx, "{onetick}:members").Result(); err != nil || n != 1 {
		t.Fatalf("{onetick}:members holds %d (%v), want 1", n, err)
	}
	if redis.Slot("{onetick}:members") != redis.Slot("{onetick}:leader") {
		t.Fatal("the members key is not in the fleet's slot")
	}
}

// A members key of another type is reported as damage naming the key,
// and left as it was.
func TestMembersWrongType(t *testing.T) {
	srv := redistest.Start(t)
	c := goredis.NewClient(srv.Options())
	defer c.Close()
	ctx := context.Background()
	if err := c.Set(ctx, "onetick:members", "x", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, err := redis.New(c, redis.Options{}).Heartbeat(ctx, "a", time.Minute)
	var d *onetick.DamageError
	if !errors.As(err, &d) || d.Key != "onetick:members" || d.Kind != onetick.DamageType || !errors.Is(err, onetick.ErrDamaged) {
		t.Fatalf("heartbeat on a string key: %v, want damage of onetick:members", err)
	}
	err = redis.New(c, redis.Options{}).Leave(ctx, "a")
	if !errors.As(err, &d) || d.Key != "onetick:members" || d.Kind != onetick.DamageType {
		t.Fatalf("leave on a string key: %v, want damage of onetick:members", err)
	}
	if v, err := c.Get(ctx, "onetick:members").Result(); err != nil || v != "x" {
		t.Fatalf("the damaged key was changed: %q, %v", v, err)
	}
}
