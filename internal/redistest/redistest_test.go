package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
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
	pid = srv.Pid()
	srv.Kill()
	if srv.Running() || srv.Pid() != 0 {
		t.Fatal("killed server still reported running")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("process %d after Kill: %v, want ESRCH", pid, err)
	}
	if pids := livePids(t.Name()); len(pids) > 0 {
		t.Fatalf("still tracked as running: %v", pids)
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

// TestServerDiesWithTestBinary runs this test again in a child process,
// which starts a server and exits without its cleanups (as a test binary
// killed by a timeout would): the server must die with it.
func TestServerDiesWithTestBinary(t *testing.T) {
	if os.Getenv("REDISTEST_ORPHAN") == "1" {
		srv := Start(t)
		fmt.Println("pid", srv.Pid())
		os.Exit(0)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithTestBinary$")
	cmd.Env = append(os.Environ(), "REDISTEST_ORPHAN=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	var pid int
	for _, line := range strings.Split(string(out), "\n") {
		if _, err := fmt.Sscanf(line, "pid %d", &pid); err == nil {
			break
		}
	}
	if pid == 0 {
		t.Fatalf("child printed no pid:\n%s", out)
	}
	err = poll(10*time.Second, func(context.Context) error {
		if alive(pid) {
			return fmt.Errorf("redis-server %d of the exited child is alive", pid)
		}
		return nil
	})
	if err != nil {
		// Leave nothing behind even when the test fails.
		_ = syscall.Kill(pid, syscall.SIGKILL)
		t.Fatal(err)
	}
}

// alive says whether a process exists and is not a zombie (a killed
// orphan stays one until the machine's init reaps it).
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	st := string(b)
	f := strings.Fields(st[strings.LastIndexByte(st, ')')+1:])
	return len(f) > 0 && f[0] != "Z"
}
