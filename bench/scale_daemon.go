package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// The scale part runs the daemon as a real process (cmd/onetick), as an
// operator would: its RSS is the process's, its start-up includes reading
// the file, and nothing of the harness shares its heap.

// buildOnetick builds cmd/onetick into dir and returns the binary's path.
func buildOnetick(dir string) (string, error) {
	bin := filepath.Join(dir, "onetick")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/onetick")
	cmd.Dir = ".."
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/onetick: %v: %s", err, out)
	}
	return bin, nil
}

// daemon is one `onetick run` process whose JSON log is read line by line.
type daemon struct {
	cmd     *exec.Cmd
	started time.Time
	done    chan struct{}

	mu     sync.Mutex
	first  map[string]logLine // first line of each message
	all    map[string][]logLine
	tail   []string // last lines, for errors
	warns  int
	errors int
	cond   *sync.Cond
}

type logLine struct {
	at     time.Time // when the harness read it
	fields map[string]any
}

// startDaemon runs `onetick run -config cfg -log-format json`.
func startDaemon(bin, cfg string, args ...string) (*daemon, error) {
	return startProcess(exec.Command(bin, append([]string{"run", "-config", cfg, "-log-format", "json"}, args...)...))
}

// startProcess starts cmd, whose standard error is a JSON log (slog's
// JSON handler), read line by line.
func startProcess(cmd *exec.Cmd) (*daemon, error) {
	cmd.Stdout = nil
	errp, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	d := &daemon{cmd: cmd, done: make(chan struct{}), first: map[string]logLine{}, all: map[string][]logLine{}}
	d.cond = sync.NewCond(&d.mu)
	d.started = time.Now()
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		defer close(d.done)
		sc := bufio.NewScanner(errp)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			now := time.Now()
			var m map[string]any
			line := sc.Text()
			d.mu.Lock()
			d.tail = append(d.tail, line)
			if len(d.tail) > 20 {
				d.tail = d.tail[1:]
			}
			if json.Unmarshal([]byte(line), &m) == nil {
				msg, _ := m["msg"].(string)
				l := logLine{at: now, fields: m}
				if _, ok := d.first[msg]; !ok {
					d.first[msg] = l
				}
				if len(d.all[msg]) < 100 {
					d.all[msg] = append(d.all[msg], l)
				}
				switch m["level"] {
				case "WARN":
					d.warns++
				case "ERROR":
					d.errors++
				}
			}
			d.cond.Broadcast()
			d.mu.Unlock()
		}
		_ = cmd.Wait()
		d.mu.Lock()
		d.cond.Broadcast()
		d.mu.Unlock()
	}()
	return d, nil
}

// waitFor waits for the first log line with message msg after the n-th
// (count lines of that message seen so far), up to timeout.
func (d *daemon) waitFor(msg string, n int, timeout time.Duration) (logLine, error) {
	deadline := time.Now().Add(timeout)
	t := time.AfterFunc(timeout, func() {
		d.mu.Lock()
		d.cond.Broadcast()
		d.mu.Unlock()
	})
	defer t.Stop()
	d.mu.Lock()
	defer d.mu.Unlock()
	for len(d.all[msg]) <= n {
		select {
		case <-d.done:
			return logLine{}, fmt.Errorf("onetick exited before logging %q; last lines:\n%s", msg, strings.Join(d.tail, "\n"))
		default:
		}
		if time.Now().After(deadline) {
			return logLine{}, fmt.Errorf("no %q logged within %s; last lines:\n%s", msg, timeout, strings.Join(d.tail, "\n"))
		}
		d.cond.Wait()
	}
	return d.all[msg][n], nil
}

func (d *daemon) count(msg string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.all[msg])
}

func (d *daemon) problems() (warns, errors int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.warns, d.errors
}

// memory returns the process's VmRSS and VmHWM (peak RSS) in bytes.
func (d *daemon) memory() (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", d.cmd.Process.Pid))
	if err != nil {
		return 0, 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmRSS":
			rss = n << 10
		case "VmHWM":
			hwm = n << 10
		}
	}
	return rss, hwm
}

// cpu returns the process's user+system CPU time so far.
func (d *daemon) cpu() time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", d.cmd.Process.Pid))
	if err != nil {
		return 0
	}
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 {
		s = s[i+2:]
	}
	f := strings.Fields(s)
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * (time.Second / 100) // USER_HZ is 100 on Linux
}

// stop sends SIGTERM and waits (SIGKILL after 20 s).
func (d *daemon) stop() {
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// runCLI runs one onetick command and returns how long it took.
func runCLI(ctx context.Context, bin string, args ...string) (time.Duration, error) {
	start := time.Now()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	if err != nil {
		return 0, fmt.Errorf("onetick %s: %v: %s", strings.Join(args, " "), err, lastLines(string(out), 5))
	}
	return time.Since(start), nil
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// writeJobsFile writes a configuration (or, with header "", a jobs file)
// of n jobs named tenant-NNNNNNN with schedule sched, all on stream.
func writeJobsFile(path, header string, n int, sched, stream string) error {
	return writeJobs(path, header, 0, n, sched, stream)
}

// writeJobsFileFrom writes a jobs file of the n jobs from number first.
func writeJobsFileFrom(path string, first, n int, sched, stream string) error {
	return writeJobs(path, "", first, n, sched, stream)
}

func writeJobs(path, header string, first, n int, sched, stream string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString(header)
	w.WriteString("jobs:\n")
	for i := first; i < first+n; i++ {
		fmt.Fprintf(w, "  - name: tenant-%07d\n    schedule: %q\n    stream: %s\n", i, sched, stream)
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func baseConfig(redisURL string) string {
	return "backend:\n  redis:\n    url: " + redisURL + "\nhttp:\n  listen: \"off\"\nrole: scheduler\n"
}
