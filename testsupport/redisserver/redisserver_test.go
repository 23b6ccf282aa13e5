package redisserver_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/onetick/onetick/testsupport/redisserver"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// Start gives a server that answers with the arguments it was given, and
// Stop ends it and removes its directory.
func TestStartStop(t *testing.T) {
	s, err := redisserver.Start("--maxmemory-policy", "noeviction")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr(), MaxRetries: -1})
	defer c.Close()
	got, err := c.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil || got["maxmemory-policy"] != "noeviction" {
		t.Fatalf("CONFIG GET maxmemory-policy = %v, %v; want noeviction", got, err)
	}
	if d, err := c.ConfigGet(ctx, "dir").Result(); err != nil || d["dir"] != s.Dir {
		t.Fatalf("CONFIG GET dir = %v, %v; want %s", d, err, s.Dir)
	}
	if !strings.HasPrefix(s.URL(), "redis://127.0.0.1:") {
		t.Fatalf("URL %q", s.URL())
	}

	s.Stop()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("the server still answers after Stop")
	}
	if _, err := os.Stat(s.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("directory %s after Stop: %v", s.Dir, err)
	}
	s.Stop() // a second Stop does nothing
}

// A process that exits before its ready line makes Wait fail with its
// log, and Started and Exited see its pid.
func TestWaitReportsEarlyExit(t *testing.T) {
	var started, exited int
	p, err := redisserver.Launch(redisserver.Command{
		Args:    []string{"--no-such-option", "x"},
		Started: func(pid int) { started = pid },
		Exited:  func(pid int) { exited = pid },
	})
	if err != nil {
		t.Fatal(err)
	}
	err = p.Wait(0)
	if err == nil || !strings.Contains(err.Error(), "exited before it was ready") || !strings.Contains(err.Error(), "no-such-option") {
		t.Fatalf("Wait = %v; want an early exit with the log", err)
	}
	<-p.Done()
	if started == 0 || started != p.Pid() || exited != started {
		t.Fatalf("Started saw %d, Exited %d, pid %d", started, exited, p.Pid())
	}
}
