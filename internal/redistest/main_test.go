package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks for leaked goroutines and, independently of the
// package's own bookkeeping, that no child process (a redis-server, a
// redis-cli) outlives the tests: /proc lists the test binary's children.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if left := children(); len(left) > 0 {
			fmt.Fprintf(os.Stderr, "redistest: processes left running after the tests: %s\n", strings.Join(left, "; "))
			code = 1
		}
		os.Exit(code)
	}))
}

// children lists this process's child processes as "pid (name)", from
// the parent pid field of /proc/PID/stat.
func children() []string {
	self := strconv.Itoa(os.Getpid())
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var left []string
	for _, p := range stats {
		b, err := os.ReadFile(p)
		if err != nil { // the process exited meanwhile
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		st := string(b)
		end := strings.LastIndexByte(st, ')')
		if end < 0 {
			continue
		}
		f := strings.Fields(st[end+1:])
		if len(f) > 1 && f[1] == self {
			left = append(left, st[:end+1])
		}
	}
	return left
}

// checkStopped fails the test at its end if a process it started still
// runs; registered first, it runs after every other cleanup. (TestMain
// checks, through /proc, that no child at all is left.)
func checkStopped(t *testing.T) {
	t.Cleanup(func() {
		for _, pid := range livePids(t.Name()) {
			t.Errorf("redistest: process %d still running after the test's cleanup", pid)
		}
	})
}
