package sqlite_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/sqlite"
)

// Helper processes: the test binary re-executed with envHelper naming
// what to do and envFile the store. They talk to the test through
// standard input and output, one line per message.
const (
	envHelper = "ONETICK_SQLITE_HELPER"
	envFile   = "ONETICK_SQLITE_FILE"
	envLog    = "ONETICK_SQLITE_LOG"
	envName   = "ONETICK_SQLITE_NAME"
	envTTL    = "ONETICK_SQLITE_TTL"
	envCount  = "ONETICK_SQLITE_COUNT"
)

// crashJobs are the jobs the claimer claims; crashBase is their first
// slot, far enough in the past that no claim is early.
var crashJobs = []string{"j0", "j1", "j2", "j3"}

const crashStep = 1000

func crashBase() onetick.Slot { return onetick.Slot(1_600_000_000_000) }

// runHelperIfAsked runs the helper process named in the environment and
// exits; otherwise it returns.
func runHelperIfAsked() {
	var err error
	switch os.Getenv(envHelper) {
	case "":
		return
	case "claimer":
		err = claimer()
	case "racer":
		err = racer()
	case "reader":
		err = reader()
	case "writer":
		err = writer()
	default:
		err = fmt.Errorf("unknown helper %q", os.Getenv(envHelper))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

// claimer claims batches of ticks in a loop, as a leader catching up
// would, until it is killed. It prints "claiming" before each claim; after
// it, it appends the ids of the ticks answered Claimed to the log (with
// fsync) and then prints "batch".
func claimer() error {
	ctx := context.Background()
	b, err := sqlite.Open(os.Getenv(envFile), sqlite.Options{})
	if err != nil {
		return err
	}
	log, err := os.OpenFile(os.Getenv(envLog), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	// The killed predecessor's lease, a minute long, is taken over at
	// once: its process is gone.
	const ttl = time.Minute
	g, err := b.Acquire(ctx, os.Getenv(envName), ttl)
	if err != nil {
		return err
	}
	lease := g.Lease
	last, err := b.LastFired(ctx, crashJobs)
	if err != nil {
		return err
	}
	next := map[string]onetick.Slot{}
	for _, j := range crashJobs {
		next[j] = crashBase()
		if s, ok := last[j]; ok {
			next[j] = s + crashStep
		}
	}
	var prev []onetick.Tick
	for n := 0; ; n++ {
		if _, err := b.Renew(ctx, lease, ttl); err != nil {
			return err
		}
		var batch []onetick.Tick
		if n%3 == 2 && prev != nil {
			batch = prev // a retry of the previous claim, as after a lost answer
		} else {
			for _, j := range crashJobs {
				for k := 0; k < 50; k++ {
					batch = append(batch, onetick.Tick{Job: j, Slot: next[j], Stream: "crash:" + j, Payload: `{}`, Retention: 24 * time.Hour})
					next[j] += crashStep
				}
			}
		}
		prev = batch
		fmt.Println("claiming")
		res, err := b.Claim(ctx, lease, batch)
		if err != nil {
			return err
		}
		var sb strings.Builder
		for i, o := range res.Outcomes {
			if o != onetick.Claimed {
				return fmt.Errorf("tick %s: %v", batch[i].ID(), o)
			}
			sb.WriteString(batch[i].ID() + "\n")
		}
		if _, err := log.WriteString(sb.String()); err != nil {
			return err
		}
		if err := log.Sync(); err != nil {
			return err
		}
		fmt.Println("batch")
	}
}

// raceResult is what a racer reports.
type raceResult struct {
	Name   string        `json:"name"`
	Won    bool          `json:"won"`
	Lease  onetick.Lease `json:"lease"`            // the lease won, or the holder's
	Error  string        `json:"error,omitempty"`  // unexpected errors
	Fenced bool          `json:"fenced,omitempty"` // a loser's claim with a forged lease was fenced
}

// racer opens the store, says "ready", waits for "go" on standard input,
// tries to acquire the lease once (for envTTL, default a minute) and
// reports. Then it lives on until its standard input closes, and exits
// without releasing what it won: the lease stays in the file, as a
// crashed leader's would.
func racer() error {
	ctx := context.Background()
	name := os.Getenv(envName)
	ttl := time.Minute
	if s := os.Getenv(envTTL); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return err
		}
		ttl = d
	}
	b, err := sqlite.Open(os.Getenv(envFile), sqlite.Options{})
	if err != nil {
		return err
	}
	defer b.Close()
	fmt.Println("ready")
	in := bufio.NewReader(os.Stdin)
	if _, err := in.ReadString('\n'); err != nil {
		return err
	}
	defer func() { _, _ = io.Copy(io.Discard, in) }()
	r := raceResult{Name: name}
	g, err := b.Acquire(ctx, name, ttl)
	var he *onetick.HeldError
	switch {
	case err == nil:
		r.Won, r.Lease = true, g.Lease
	case errors.As(err, &he):
		r.Lease = he.Leader.Lease
		// A loser that believes itself leader with the holder's epoch
		// under its own name is fenced.
		forged := onetick.Lease{Holder: name, Epoch: he.Leader.Lease.Epoch}
		_, cerr := b.Claim(ctx, forged, []onetick.Tick{{Job: "race", Slot: crashBase(), Stream: "race", Payload: "{}", Retention: time.Hour}})
		r.Fenced = errors.Is(cerr, onetick.ErrFenced)
	default:
		r.Error = err.Error()
	}
	return json.NewEncoder(os.Stdout).Encode(r)
}

// writer acquires the lease and claims envCount batches of ten ticks of
// job "w", one transaction each, printing "claimed <last slot>" after each
// claim returned; then it says "idle" and waits, writing nothing more,
// until it is killed or its standard input closes.
func writer() error {
	ctx := context.Background()
	n, err := strconv.Atoi(os.Getenv(envCount))
	if err != nil {
		return err
	}
	b, err := sqlite.Open(os.Getenv(envFile), sqlite.Options{})
	if err != nil {
		return err
	}
	defer b.Close()
	g, err := b.Acquire(ctx, "writer", time.Hour)
	if err != nil {
		return err
	}
	s := crashBase()
	for i := 0; i < n; i++ {
		var batch []onetick.Tick
		for k := 0; k < 10; k++ {
			batch = append(batch, onetick.Tick{Job: "w", Slot: s, Stream: "w", Payload: `{"n":1}`, Retention: 24 * time.Hour})
			s += crashStep
		}
		if _, err := b.Claim(ctx, g.Lease, batch); err != nil {
			return err
		}
		fmt.Println("claimed", int64(s-crashStep))
	}
	fmt.Println("idle")
	_, err = io.Copy(io.Discard, os.Stdin)
	return err
}

// readerReport is one round of a reader's reads.
type readerReport struct {
	Leader onetick.Lease `json:"leader"`
	Last   onetick.Slot  `json:"last"`
	Terms  int           `json:"terms"`
	Dead   int64         `json:"dead"`
	Error  string        `json:"error,omitempty"`
}

// reader reads what `onetick status` reads, in rounds, while another
// process writes: it says "ready", then reads once per line on standard
// input and reports each round.
func reader() error {
	ctx := context.Background()
	b, err := sqlite.Open(os.Getenv(envFile), sqlite.Options{})
	if err != nil {
		return err
	}
	defer b.Close()
	fmt.Println("ready")
	enc := json.NewEncoder(os.Stdout)
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var r readerReport
		err := func() error {
			info, err := b.Leader(ctx)
			if err != nil {
				return err
			}
			r.Leader = info.Lease
			last, err := b.LastFired(ctx, []string{"w"})
			if err != nil {
				return err
			}
			r.Last = last["w"]
			terms, err := b.History(ctx, 10)
			if err != nil {
				return err
			}
			r.Terms = len(terms)
			if _, err := b.Stream(ctx, "w"); err != nil {
				return err
			}
			st, err := b.WorkerStore("").Status(ctx, []string{"w"})
			if err != nil {
				return err
			}
			r.Dead = st.Dead
			return nil
		}()
		if err != nil {
			r.Error = err.Error()
		}
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return in.Err()
}

// helper is a running helper process.
type helper struct {
	t      *testing.T
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string
	stderr *syncWriter
	done   chan struct{}
	once   sync.Once
}

// startHelper starts the helper kind on file with extra environment.
func startHelper(t *testing.T, kind, file string, env ...string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append([]string{envHelper + "=" + kind, envFile + "=" + file}, env...)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	h := &helper{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 1024), stderr: &syncWriter{}, done: make(chan struct{})}
	cmd.Stderr = h.stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
		_ = cmd.Wait()
		close(h.done)
	}()
	t.Cleanup(func() { h.kill() })
	return h
}

// line waits for the helper's next line of output.
func (h *helper) line() string {
	h.t.Helper()
	select {
	case l, ok := <-h.lines:
		if !ok {
			<-h.done
			h.t.Fatalf("helper exited (%v); stderr:\n%s", h.cmd.ProcessState, h.stderr.String())
		}
		return l
	case <-time.After(30 * time.Second):
		h.t.Fatalf("no output from the helper within 30s; stderr:\n%s", h.stderr.String())
	}
	return ""
}

func (h *helper) send(s string) {
	h.t.Helper()
	if _, err := io.WriteString(h.stdin, s+"\n"); err != nil {
		h.t.Fatalf("write to helper: %v", err)
	}
}

// kill sends SIGKILL, waits for the process to be gone and returns the
// lines it printed that were not read yet.
func (h *helper) kill() []string {
	var rest []string
	h.once.Do(func() {
		_ = h.cmd.Process.Signal(syscall.SIGKILL)
		for l := range h.lines {
			rest = append(rest, l)
		}
		<-h.done
	})
	return rest
}

// wait closes the helper's input and waits for it to exit on its own.
func (h *helper) wait() {
	h.t.Helper()
	_ = h.stdin.Close()
	for range h.lines {
	}
	<-h.done
	h.once.Do(func() {})
	if !h.cmd.ProcessState.Success() {
		h.t.Fatalf("helper failed (%v); stderr:\n%s", h.cmd.ProcessState, h.stderr.String())
	}
}

type syncWriter struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func itoa(n int) string { return strconv.Itoa(n) }
