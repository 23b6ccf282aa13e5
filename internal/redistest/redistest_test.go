package redistest

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

func TestStartRestartKill(t *testing.T) {
	checkStopped(t)
	ctx := context.Background()
	srv := Start(t, AppendOnly())
	c := srv.Client()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	pid, port := srv.Pid(), srv.Port
	srv.Restart()
	if srv.Port != port || srv.Pid() == pid {
		t.Fatalf("restart: port %d→%d pid %d→%d, want same port, new pid", port, srv.Port, pid, srv.Pid())
	}
	// The append-only file was replayed.
	if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("after restart: %q, %v", v, err)
	}
	srv.Kill()
	if srv.Running() || srv.Pid() != 0 {
		t.Fatal("killed server still reported running")
	}
	if _, err := net.DialTimeout("tcp", srv.Addr(), time.Second); err == nil {
		t.Fatal("killed server still accepts connections")
	}
}

func TestPauseResume(t *testing.T) {
	checkStopped(t)
	ctx := context.Background()
	srv := Start(t)
	srv.Pause()
	if !srv.Paused() {
		t.Fatal("Paused() = false after Pause")
	}
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), ReadTimeout: 200 * time.Millisecond, MaxRetries: -1})
	defer c.Close()
	if err := c.Ping(ctx).Err(); !isTimeout(err) {
		t.Fatalf("ping of a paused server: %v, want a timeout", err)
	}
	srv.Resume()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("ping after resume: %v", err)
	}
}

// TestArgsAndLog checks that raw arguments reach the server and that its
// log is kept.
func TestArgsAndLog(t *testing.T) {
	checkStopped(t)
	srv := Start(t, KeyspaceEvents(), Args("--maxmemory", "12mb"))
	cfg, err := srv.Client().ConfigGet(context.Background(), "maxmemory").Result()
	if err != nil || cfg["maxmemory"] != "12582912" {
		t.Fatalf("maxmemory = %v, %v", cfg, err)
	}
	if !containsLine(srv.Log(), readyLine) {
		t.Fatalf("log lacks %q:\n%s", readyLine, srv.Log())
	}
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func containsLine(log, s string) bool {
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, s) {
			return true
		}
	}
	return false
}
