package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// redisServer is one redis-server process on a free loopback port, started
// from PATH without persistence. (The main module's internal/redistest
// cannot be imported from this module.)
type redisServer struct {
	Port int
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

func startRedis() (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, fmt.Errorf("redis-server not found on PATH (make bench installs it via make deps): %w", err)
	}
	dir, err := os.MkdirTemp("", "onetick-bench-redis-")
	if err != nil {
		return nil, err
	}
	var last error
	for attempt := 0; attempt < 5; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s := &redisServer{Port: port, dir: dir}
		if last = s.start(bin); last == nil {
			return s, nil
		}
	}
	return nil, last
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (s *redisServer) start(bin string) error {
	cmd := exec.Command(bin, "--port", strconv.Itoa(s.Port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--dir", s.dir, "--logfile", "", "--daemonize", "no")
	cmd.Dir = s.dir
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return err
	}
	ready := make(chan struct{})
	done := make(chan struct{})
	var logBuf strings.Builder
	var signalled atomic.Bool
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if signalled.Load() {
				continue
			}
			line := sc.Text()
			logBuf.WriteString(line + "\n")
			if strings.Contains(line, "Ready to accept connections") {
				signalled.Store(true)
				close(ready)
			}
		}
		_, _ = io.Copy(io.Discard, out)
		_ = cmd.Wait()
		close(done)
	}()
	select {
	case <-ready:
	case <-done:
		return fmt.Errorf("redis-server on port %d exited before it was ready:\n%s", s.Port, logBuf.String())
	case <-time.After(20 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("redis-server on port %d not ready after 20s", s.Port)
	}
	s.cmd, s.done = cmd, done
	return nil
}

func (s *redisServer) Addr() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }
func (s *redisServer) URL() string  { return "redis://" + s.Addr() + "/0" }

// Stop kills the server and removes its directory.
func (s *redisServer) Stop() {
	if s.cmd != nil {
		_ = s.cmd.Process.Kill()
		<-s.done
		s.cmd = nil
	}
	_ = os.RemoveAll(s.dir)
}

// newClient returns a go-redis client that counts its round trips (one per
// command sent outside a pipeline, one per pipeline).
func (s *redisServer) newClient(rt *atomic.Int64) *goredis.Client {
	c := goredis.NewClient(&goredis.Options{Addr: s.Addr()})
	if rt != nil {
		c.AddHook(rtHook{rt})
	}
	return c
}

type rtHook struct{ n *atomic.Int64 }

func (h rtHook) DialHook(next goredis.DialHook) goredis.DialHook { return next }
func (h rtHook) ProcessHook(next goredis.ProcessHook) goredis.ProcessHook {
	return func(ctx context.Context, cmd goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}
func (h rtHook) ProcessPipelineHook(next goredis.ProcessPipelineHook) goredis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []goredis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmds)
	}
}

// admin is the harness's own connection: flush, INFO, reading results.
type admin struct{ c *goredis.Client }

func (a admin) flush(ctx context.Context) error {
	if err := a.c.FlushAll(ctx).Err(); err != nil {
		return err
	}
	return a.c.ConfigResetStat(ctx).Err()
}

// commandCalls returns the number of commands Redis executed (INFO
// commandstats: every command, including those run inside Lua scripts, and
// the EVALSHA/EVAL calls themselves), excluding the harness's own INFO,
// CONFIG and FLUSHALL.
func (a admin) commandCalls(ctx context.Context) (int64, error) {
	s, err := a.c.Info(ctx, "commandstats").Result()
	if err != nil {
		return 0, err
	}
	var total int64
	for line := range strings.SplitSeq(s, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		switch strings.TrimPrefix(name, "cmdstat_") {
		case "info", "config|resetstat", "flushall", "config":
			continue
		}
		for f := range strings.SplitSeq(rest, ",") {
			if k, v, _ := strings.Cut(f, "="); k == "calls" {
				n, _ := strconv.ParseInt(v, 10, 64)
				total += n
			}
		}
	}
	return total, nil
}

func (a admin) usedMemory(ctx context.Context) (int64, error) {
	s, err := a.c.Info(ctx, "memory").Result()
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "used_memory:"); ok {
			return strconv.ParseInt(v, 10, 64)
		}
	}
	return 0, fmt.Errorf("used_memory not in INFO memory")
}

func (a admin) version(ctx context.Context) string {
	s, err := a.c.Info(ctx, "server").Result()
	if err != nil {
		return "?"
	}
	for line := range strings.SplitSeq(s, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "?"
}
