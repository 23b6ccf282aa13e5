//go:build linux

package executor_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onetick/onetick/executor"
)

// helperEnv makes the test binary run orphanHelper instead of the tests.
const helperEnv = "EXECUTOR_TEST_ORPHAN_HELPER"

// runHelperIfAsked turns this process into orphanHelper when the test that
// needs one started it.
func runHelperIfAsked() {
	if os.Getenv(helperEnv) != "" {
		os.Exit(orphanHelper())
	}
}

// orphanHelper plays onetick: it runs a command whose shell backgrounds a
// grandchild, logging JSON to stdout, and blocks until it is killed.
func orphanHelper() int {
	log := slog.New(slog.NewJSONHandler(os.Stdout, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c, err := executor.NewCommand(executor.CommandConfig{Argv: sh(grandchildScript), KillGrace: 2 * time.Second, Env: []string{raceNoSleep}, Logger: log})
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		return 1
	}
	err = c.Execute(context.Background(), executor.Run{Job: "orphan", Slot: testSlot, Attempt: 1})
	fmt.Fprintln(os.Stderr, "helper: Execute returned, but it should have been killed first:", err)
	return 1
}

const prSetChildSubreaper = 36

func setSubreaper(t *testing.T, on bool) {
	v := 0
	if on {
		v = 1
	}
	if _, _, e := syscall.RawSyscall(syscall.SYS_PRCTL, prSetChildSubreaper, uintptr(v), 0); e != 0 {
		t.Fatalf("prctl(PR_SET_CHILD_SUBREAPER): %v", e)
	}
}

// TestCommandDiesWithOnetick kills "onetick" (a helper process running the
// executor) with SIGKILL while its command runs, and checks that the
// command's whole process group, backgrounded grandchild included, is
// gone.
//
// The wait is on a signal, not a poll: the test process makes itself a
// child subreaper, so the orphaned supervisor is re-parented to it and
// wait4 on the supervisor's pid returns when the supervisor exits. The
// supervisor exits only once the group is gone, which the test then checks
// directly. A deadline turns a hang into a failure.
func TestCommandDiesWithOnetick(t *testing.T) {
	setSubreaper(t, true)
	defer setSubreaper(t, false)

	helper := exec.Command(os.Args[0], "-test.run=^$")
	helper.Env = append(os.Environ(), helperEnv+"=1")
	helper.Stderr = os.Stderr
	out, err := helper.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := helper.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan map[string]any)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var m map[string]any
			if json.Unmarshal(sc.Bytes(), &m) == nil {
				lines <- m
			}
		}
	}()
	var pgid, supervisor, bg int
	deadline := time.After(60 * time.Second)
	for pgid == 0 || bg == 0 {
		select {
		case m, ok := <-lines:
			if !ok {
				t.Fatal("helper exited early")
			}
			if m["msg"] == "command started" {
				pgid, supervisor = int(m["pid"].(float64)), int(m["supervisor"].(float64))
			}
			if l, _ := m["line"].(string); strings.HasPrefix(l, "bg ") {
				bg, _ = strconv.Atoi(strings.TrimPrefix(l, "bg "))
			}
		case <-deadline:
			helper.Process.Kill()
			t.Fatal("helper did not start its command within 60s")
		}
	}
	if !groupAlive(pgid) || !alive(bg) || !alive(supervisor) {
		t.Fatal("command not running before the kill")
	}

	helper.Process.Signal(syscall.SIGKILL)
	helper.Wait()
	for range lines { // the pipe closed with the helper
	}

	exited := make(chan error, 1)
	go func() {
		var ws syscall.WaitStatus
		_, err := syscall.Wait4(supervisor, &ws, 0, nil)
		exited <- err
	}()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("waiting for the orphaned supervisor: %v", err)
		}
	case <-time.After(60 * time.Second):
		syscall.Kill(-pgid, syscall.SIGKILL)
		syscall.Kill(supervisor, syscall.SIGKILL)
		<-exited
		t.Fatal("the supervisor outlived onetick by 60s")
	}
	if groupAlive(pgid) {
		syscall.Kill(-pgid, syscall.SIGKILL)
		t.Fatalf("process group %d outlived onetick", pgid)
	}
	if alive(bg) {
		syscall.Kill(bg, syscall.SIGKILL)
		t.Fatalf("grandchild %d outlived onetick", bg)
	}
}

// liveMembers lists the processes of group pgid that are not zombies,
// from /proc: after a SIGKILL a member stays a zombie until its parent (or
// init, which the test cannot rely on) reaps it, and a zombie runs nothing.
func liveMembers(t *testing.T, pgid int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var live []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // exited meanwhile
		}
		// pid (comm) state ppid pgrp ...; comm may contain spaces.
		i := strings.LastIndexByte(string(stat), ')')
		f := strings.Fields(string(stat[i+1:]))
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" {
			live = append(live, pid)
		}
	}
	return live
}

func TestSupervisorStopsTheRunWhenSignalled(t *testing.T) {
	c, rec := newCommand(t, executor.CommandConfig{Argv: sh(grandchildScript), KillGrace: time.Minute})
	r := startRun(t, c, rec)
	defer r.cancel()
	syscall.Kill(r.supervisor, syscall.SIGTERM)
	err := <-r.done
	var ee *executor.ExitError
	if !errors.As(err, &ee) || ee.Signal != syscall.SIGTERM || !strings.Contains(err.Error(), "supervisor was signalled") {
		t.Fatalf("Execute = %v, want the command ended by SIGTERM through its signalled supervisor", err)
	}
	assertAllGone(t, r.pgid, r.bg)
}

// A frozen supervisor cannot stop the run: Execute's backstop kills the
// group and the supervisor after KillGrace plus its margins (about ten
// seconds here).
func TestFrozenSupervisorIsKilledByTheBackstop(t *testing.T) {
	c, rec := newCommand(t, executor.CommandConfig{Argv: sh(grandchildScript), KillGrace: 100 * time.Millisecond})
	r := startRun(t, c, rec)
	syscall.Kill(r.supervisor, syscall.SIGSTOP)
	r.cancel()
	if err := <-r.done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Execute = %v, want context.Canceled", err)
	}
	rec.WaitFor(t, "backstop warning", func(e entry) bool { return strings.Contains(e.Msg, "did not stop in time") })
	if live := liveMembers(t, r.pgid); len(live) > 0 {
		syscall.Kill(-r.pgid, syscall.SIGKILL)
		t.Fatalf("processes %v of the group are alive after the backstop", live)
	}
	if alive(r.supervisor) {
		t.Fatalf("supervisor %d alive after the backstop", r.supervisor)
	}
}
