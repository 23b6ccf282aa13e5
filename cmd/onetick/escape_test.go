package main_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/redis"
	"github.com/onetick/onetick/worker"
)

// TestControlCharactersEscaped: what the store holds is printed with its
// control characters escaped, so a pause's reason of "\x1b[2J\r" cannot
// clear the operator's terminal or forge a line: in `jobs`, `status` (the
// pause and the control log), `pause` and `dead list` (a dead letter's
// error).
func TestControlCharactersEscaped(t *testing.T) {
	srv := redistest.Start(t)
	cfg := writeFile(t, "esc.yaml", fmt.Sprintf("backend:\n  redis:\n    url: %s\n    prefix: esc\njobs:\n  - {name: a, schedule: '@daily', stream: 'esc:a'}\n", srv.URL()))
	ctx := context.Background()
	be, err := redis.Open(srv.URL(), redis.Options{Prefix: "esc"})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	// Written to the store directly, as any client of it could.
	const reason, who = "\x1b[2J\rforged\x00line\u202e", "ev\x1b]0;title\x07il"
	if _, err := be.Pause(ctx, "a", onetick.Actor{Who: who, Reason: reason}); err != nil {
		t.Fatal(err)
	}
	// A dead letter whose error is full of escapes.
	if _, e, code := runCmd(t, nil, "trigger", "a", "--config", cfg, "--key", "k1"); code != 0 {
		t.Fatalf("trigger: %d %s", code, e)
	}
	store := be.WorkerStore("onetick")
	w, err := worker.New(worker.Config{Store: store, Consumer: "t", Logger: slog.New(slog.DiscardHandler), TakeoverIdle: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.HandleFunc("a", func(context.Context, *worker.Task) error {
		return errors.New("boom\x1b[31m\rforged")
	}, worker.WithStream("esc:a"), worker.WithMaxAttempts(1)); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	for end := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		dls, err := store.DeadLetters(ctx, "", 10)
		if err == nil && len(dls) == 1 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("no dead letter within 30s (%v)", err)
		}
	}
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	wantReason, wantWho := `\x1b[2J\rforged\x00line\u202e`, `ev\x1b]0;title\ail`
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"jobs"}, []string{wantWho, wantReason}},
		{[]string{"status"}, []string{wantWho, wantReason}},
		{[]string{"dead", "list"}, []string{`boom\x1b[31m\rforged`}},
	} {
		out, stderr, code := runCmd(t, nil, append(tc.args, "--config", cfg)...)
		if code != 0 {
			t.Fatalf("%v: exit %d %s", tc.args, code, stderr)
		}
		if i := strings.IndexFunc(out, func(r rune) bool { return r < ' ' && r != '\n' || r == 0x7f || r == '\u202e' }); i >= 0 {
			t.Errorf("%v prints a control character (%q at %d):\n%q", tc.args, out[i], i, out)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: %q not in\n%s", tc.args, w, out)
			}
		}
	}
}

// A new reason with control characters is refused (bad input, exit 2),
// and the refusal prints none of them.
func TestControlCharactersRefused(t *testing.T) {
	srv := redistest.Start(t)
	cfg := writeFile(t, "one.yaml", fmt.Sprintf("backend:\n  redis:\n    url: %s\n    prefix: one\njobs:\n  - {name: a, schedule: '@daily'}\n", srv.URL()))
	_, stderr, code := runCmd(t, nil, "pause", "a", "--reason", "again\rforged", "--config", cfg)
	if code != 2 || !strings.Contains(stderr, "reason must not contain control characters") || strings.ContainsRune(stderr, '\r') {
		t.Fatalf("pause with a CR in its reason: exit %d %q, want 2 and a refusal", code, stderr)
	}
	if out, _, _ := runCmd(t, nil, "jobs", "--config", cfg); strings.Contains(out, "paused") {
		t.Fatalf("the refused pause paused the job:\n%s", out)
	}
}

// TestErrorPrefixOnce: an error of the root package ("onetick: unknown
// job") is printed with one "onetick:" prefix, not two.
func TestErrorPrefixOnce(t *testing.T) {
	srv := redistest.Start(t)
	cfg := writeFile(t, "one.yaml", fmt.Sprintf("backend:\n  redis:\n    url: %s\n    prefix: one\njobs:\n  - {name: a, schedule: '@daily'}\n", srv.URL()))
	for _, args := range [][]string{{"pause", "nope", "--reason", "x"}, {"resume", "nope"}, {"trigger", "nope"}} {
		_, stderr, code := runCmd(t, nil, append(args, "--config", cfg)...)
		if code != 2 || !strings.HasPrefix(stderr, `onetick: unknown job "nope"`) || strings.Contains(stderr, "onetick: onetick:") {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
	}
}

// TestJobSetNames: a set name with a NUL, a control character or a space
// is refused (exit 2, named escaped, nothing applied), by the CLI and by
// the store itself.
func TestJobSetNames(t *testing.T) {
	srv := redistest.Start(t)
	cfg := writeFile(t, "sets.yaml", fmt.Sprintf("backend:\n  redis:\n    url: %s\n    prefix: sets\njobs: []\n", srv.URL()))
	jobs := writeFile(t, "jobs.yaml", "jobs:\n  - {name: t1, schedule: '@daily'}\n")
	for _, set := range []string{"bad\x01set", "esc\x1b[2J", "cr\rset", "del\x7f", "rtl\u202eset", "nbsp\u00a0set", "\xffbad"} {
		_, stderr, code := runCmd(t, nil, "jobs", "apply", "-f", jobs, "--set", set, "--config", cfg)
		if code != 2 || !strings.Contains(stderr, "job set") || strings.ContainsAny(stderr, "\x01\x1b\r\x7f\u202e") {
			t.Errorf("jobs apply --set %q: exit %d, stderr %q", set, code, stderr)
		}
	}
	be, err := redis.Open(srv.URL(), redis.Options{Prefix: "sets"})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	var in *onetick.InputError
	if _, err := be.ApplyJobs(context.Background(), "nul\x00set", nil, false); !errors.As(err, &in) {
		t.Errorf("ApplyJobs with a NUL in the set name: %v, want an InputError", err)
	}
	if out, stderr, code := runCmd(t, nil, "jobs", "--config", cfg); code != 0 || strings.Contains(out, "t1") {
		t.Errorf("jobs after the refusals: exit %d, %q %q: something was applied", code, out, stderr)
	}
}
