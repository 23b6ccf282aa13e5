package main_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/redis"
)

// TestDamagedStore is the operator scenario end to end: another
// application writes a string where job b's stream should be, then the
// lease and the history are damaged while no replica runs. Jobs a and c
// never stop and never get a tick twice, b resumes once its key is fixed,
// status and /readyz name the damage, and `onetick repair` moves what is
// onetick's aside only with --apply.
func TestDamagedStore(t *testing.T) {
	srv := redistest.Start(t)
	cfg := writeFile(t, "dmg.yaml", fmt.Sprintf(`backend:
  redis:
    url: %s
    prefix: dmg
lease:
  ttl: 2s
jobs:
  - {name: a, schedule: "@every 1s", stream: "x:a"}
  - {name: b, schedule: "@every 1s", stream: "x:b", prefer: duplicate}
  - {name: c, schedule: "@every 1s", stream: "x:c"}
`, srv.URL()))
	ctx := context.Background()
	be, err := redis.Open(srv.URL(), redis.Options{Prefix: "dmg"})
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	rc := be.Client()
	ids := func(stream string) int {
		t.Helper()
		recs, err := be.ReadStream(ctx, stream, 0)
		if err != nil {
			t.Fatalf("read %s: %v", stream, err)
		}
		seen := map[string]bool{}
		for _, r := range recs {
			if seen[r.Tick] {
				t.Fatalf("tick %s appears twice in %s", r.Tick, stream)
			}
			seen[r.Tick] = true
		}
		return len(recs)
	}
	waitEntries := func(stream string, n int) {
		t.Helper()
		for end := time.Now().Add(20 * time.Second); ids(stream) < n; time.Sleep(50 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("%s did not reach %d entries", stream, n)
			}
		}
	}
	ready := func(addr string) (int, string) {
		resp, err := http.Get("http://" + addr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}

	p := startProc(t, "r0", "--config", cfg)
	addr := <-p.addr
	_, at := p.waitEvent("became leader", 0, 10*time.Second)
	waitEntries("x:a", 1)

	// Another application writes a string where b's stream should be.
	if err := rc.Set(ctx, "x:b", "not a stream", 0).Err(); err != nil {
		t.Fatal(err)
	}
	_, at = p.waitEvent("job's store state is damaged: its ticks are refused until repaired (other jobs are unaffected)", at, 10*time.Second)
	na, nc := ids("x:a"), ids("x:c")
	waitEntries("x:a", na+3)
	waitEntries("x:c", nc+3)
	if n := ids("x:a"); n > na+5 {
		t.Fatalf("x:a grew by %d entries in about 3 s: ticks appended more than once per slot", n-na)
	}
	if v := p.metric(t, addr, "scheduler_broken_jobs"); v != "1" {
		t.Fatalf("scheduler_broken_jobs %s, want 1", v)
	}
	if code, body := ready(addr); code != 200 {
		t.Fatalf("/readyz %d %q: one broken job must not make the replica unready", code, body)
	}
	out, _, code := runCmd(t, nil, "status", "--config", cfg)
	if code != 1 || !strings.Contains(out, "x:b") || !strings.Contains(out, "DAMAGED") || !strings.Contains(out, "by hand") {
		t.Fatalf("status with a damaged stream: code %d\n%s", code, out)
	}
	out, _, code = runCmd(t, nil, "repair", "--config", cfg, "--apply")
	if code != 1 || !strings.Contains(out, "left alone: x:b") {
		t.Fatalf("repair of a job's stream: code %d\n%s", code, out)
	}
	if typ, _ := rc.Type(ctx, "x:b").Result(); typ != "string" {
		t.Fatalf("repair touched x:b (now a %s): a job's stream is not onetick's to change", typ)
	}
	if err := rc.Del(ctx, "x:b").Err(); err != nil {
		t.Fatal(err)
	}
	_, at = p.waitEvent("job's store state usable again; firing by its preference", at, 10*time.Second)
	waitEntries("x:b", 4) // b prefers duplicate: it catches up the slots it missed
	p.signal(syscall.SIGTERM)
	if code := p.wait(t, 10*time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}

	// With no replica running: a lease that is not onetick's and never
	// expires, and a history entry that is not a term.
	if err := rc.Set(ctx, "dmg:leader", "garbage", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if err := rc.LPush(ctx, "dmg:terms", "not json").Err(); err != nil {
		t.Fatal(err)
	}
	p = startProc(t, "r1", "--config", cfg)
	addr = <-p.addr
	p.waitEvent("store state damaged: onetick will not guess around it; see `onetick status` and `onetick repair`", 0, 10*time.Second)
	if code, body := ready(addr); code != 503 || !strings.Contains(body, "dmg:leader") {
		t.Fatalf("/readyz %d %q, want 503 naming dmg:leader", code, body)
	}
	out, _, code = runCmd(t, nil, "status", "--config", cfg)
	if code != 1 || !strings.Contains(out, "dmg:leader") || !strings.Contains(out, "leader: none") {
		t.Fatalf("status with a damaged lease: code %d\n%s", code, out)
	}
	out, _, code = runCmd(t, nil, "repair", "--config", cfg)
	if code != 1 || !strings.Contains(out, "dry run") {
		t.Fatalf("repair dry run: code %d\n%s", code, out)
	}
	if v, _ := rc.Get(ctx, "dmg:leader").Result(); v != "garbage" {
		t.Fatalf("the dry run changed the lease to %q", v)
	}
	out, stderr, code := runCmd(t, nil, "repair", "--config", cfg, "--apply")
	if code != 0 || !strings.Contains(out, "moved dmg:leader to dmg:damaged:") || !strings.Contains(out, "moved dmg:terms") {
		t.Fatalf("repair --apply: code %d\n%s%s", code, out, stderr)
	}
	p.waitEvent("became leader", 0, 10*time.Second)
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if code, _ := ready(addr); code == 200 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("/readyz did not become 200 after the repair")
		}
	}
	if out, _, code := runCmd(t, nil, "status", "--config", cfg); code != 0 {
		t.Fatalf("status after the repair: code %d\n%s", code, out)
	}
	for _, s := range []string{"x:a", "x:b", "x:c"} {
		ids(s)
	}
}
