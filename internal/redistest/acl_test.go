package redistest

import (
	"context"
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"
)

func TestACLRestrictedUser(t *testing.T) {
	checkStopped(t)
	ctx := context.Background()
	srv := Start(t,
		User("app", "app-pass", "~app:*", "&app:*", "+get", "+set", "+ping", "+eval"),
		User("reader", "", "~*", "+get"),
		DisableDefaultUser())

	app := goredis.NewClient(srv.UserOptions("app"))
	defer app.Close()
	if err := app.Set(ctx, "app:a", "1", 0).Err(); err != nil {
		t.Fatalf("app writes its own key: %v", err)
	}
	// Keys outside the pattern, commands outside the set, and a script
	// that reaches for an undeclared key are all refused.
	for name, err := range map[string]error{
		"other key":        app.Set(ctx, "other:a", "1", 0).Err(),
		"other command":    app.Del(ctx, "app:a").Err(),
		"flushall":         app.FlushAll(ctx).Err(),
		"script elsewhere": app.Eval(ctx, "return redis.call('SET', KEYS[1], '1')", []string{"other:b"}).Err(),
	} {
		if err == nil || !strings.Contains(err.Error(), "NOPERM") {
			t.Errorf("%s: err = %v, want NOPERM", name, err)
		}
	}
	if err := app.Eval(ctx, "return redis.call('SET', KEYS[1], '2')", []string{"app:b"}).Err(); err != nil {
		t.Errorf("script on its own key: %v", err)
	}

	// The URL carries the user.
	o, err := goredis.ParseURL(srv.UserURL("app"))
	if err != nil {
		t.Fatal(err)
	}
	if o.Username != "app" || o.Password != "app-pass" {
		t.Fatalf("UserURL = %s", srv.UserURL("app"))
	}
	if err := ping(o); err != nil {
		t.Fatalf("ping as app by URL: %v", err)
	}

	// A user without a password, read-only.
	reader := goredis.NewClient(srv.UserOptions("reader"))
	defer reader.Close()
	if v, err := reader.Get(ctx, "app:a").Result(); err != nil || v != "1" {
		t.Fatalf("reader: %q, %v", v, err)
	}

	// The default user is off: a client that does not log in, or logs in
	// as default, can do nothing.
	anon := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), MaxRetries: -1})
	defer anon.Close()
	if err := anon.Get(ctx, "app:a").Err(); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("anonymous client: err = %v, want NOAUTH", err)
	}
	// The harness still can.
	if err := srv.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if n, _ := srv.Client().DBSize(ctx).Result(); n != 0 {
		t.Fatalf("dbsize after flush = %d", n)
	}
}

func TestACLRequirePass(t *testing.T) {
	checkStopped(t)
	ctx := context.Background()
	srv := Start(t, RequirePass("pw"))
	if err := ping(&goredis.Options{Addr: srv.Addr()}); err == nil || !strings.Contains(err.Error(), "NOAUTH") {
		t.Fatalf("no password: err = %v, want NOAUTH", err)
	}
	if err := ping(&goredis.Options{Addr: srv.Addr(), Password: "pw"}); err != nil {
		t.Fatal(err)
	}
	// Users survive a restart (they live in the ACL file).
	srv.Restart()
	if err := srv.Client().Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
}

// TestACLAndTLS combines both, as a managed service would.
func TestACLAndTLS(t *testing.T) {
	checkStopped(t)
	srv := Start(t, TLS(TLSOptions{}), User("app", "pw", "~app:*", "+ping", "+set"), DisableDefaultUser())
	if err := ping(srv.UserOptions("app")); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(srv.UserURL("app"), "rediss://app:pw@127.0.0.1:") {
		t.Fatalf("UserURL = %s", srv.UserURL("app"))
	}
}
