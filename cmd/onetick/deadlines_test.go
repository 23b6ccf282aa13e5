package main_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onetick/onetick/executor/webhook"
)

// A daemon judges its jobs' deadlines on each store, by the store's own
// clock (the file store's is the host's; Redis's TIME; PostgreSQL's now()),
// in real time: a job whose ticks no worker runs misses its start
// deadline; a job whose HTTP call blocks until the test lets it go misses
// its finish deadline and, once let go, meets it again. The leader logs
// each change, sets scheduler_late_jobs and posts one signed notice per
// change to the configured webhook.
func TestRunDeadlines(t *testing.T) {
	for _, st := range daemonStores {
		t.Run(st.name, func(t *testing.T) {
			t.Parallel()
			testRunDeadlines(t, st)
		})
	}
}

func testRunDeadlines(t *testing.T, st daemonStore) {
	secret := "whsec_" + base64.StdEncoding.EncodeToString([]byte("the daemon test's secret, 32 b.."))
	type notice struct{ ID, Job, Status, Deadline string }
	notices := make(chan notice, 64)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := webhook.Verify(secret, r.Header, body, time.Minute, time.Now()); err != nil {
			t.Errorf("receiver: %v", err)
			http.Error(w, "bad signature", http.StatusUnauthorized)
			return
		}
		var n notice
		if err := json.Unmarshal(body, &n); err != nil {
			t.Errorf("receiver: %v in %s", err, body)
		}
		n.ID = r.Header.Get(webhook.HeaderID)
		notices <- n
		w.WriteHeader(http.StatusNoContent)
	}))
	t.Cleanup(hook.Close)
	// The gated job's calls wait for release (or for the daemon to hang
	// up); release runs before the servers close, which waits for them.
	release := make(chan struct{})
	gate := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(gate.Close)
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	t.Cleanup(let)

	backend, args := st.open(t)
	cfg := writeFile(t, "deadlines.yaml", backend+fmt.Sprintf(`deadlines:
  check_every: 1s
  notify: {url: %q, secrets: [%q]}
jobs:
  - name: unworked
    schedule: "@every 1s"
    deadline: {start: 1s}
  - name: gated
    schedule: "@every 1s"
    deadline: {finish: 5s}
    run:
      http: {url: %q, secrets: [%q]}
      timeout: 2m
`, hook.URL, secret, gate.URL, secret))
	p := startProc(t, "d1", append([]string{"--config", cfg}, args...)...)
	var addr string
	select {
	case addr = <-p.addr:
	case <-p.done:
		t.Fatalf("the daemon exited with %d before it listened", p.code)
	}

	// The notices, in the order they come: both jobs late (in either
	// order), the gated one let go once its notice is in, then it meets
	// its deadline again.
	timeout := time.NewTimer(90 * time.Second)
	defer timeout.Stop()
	var unworkedLate, gatedLate, gatedOK bool
	for !unworkedLate || !gatedOK {
		var n notice
		select {
		case n = <-notices:
		case <-timeout.C:
			t.Fatalf("within 90s: unworked late %v, gated late %v, gated ok %v", unworkedLate, gatedLate, gatedOK)
		}
		switch {
		case n.Job == "unworked" && n.Status == "late" && n.Deadline == "start" && strings.HasPrefix(n.ID, "unworked:start:late:") && !unworkedLate:
			unworkedLate = true
		case n.Job == "gated" && n.Status == "late" && n.Deadline == "finish" && strings.HasPrefix(n.ID, "gated:finish:late:") && !gatedLate:
			gatedLate = true
			let()
		case n.Job == "gated" && n.Status == "ok" && n.Deadline == "finish" && strings.HasPrefix(n.ID, "gated:finish:ok:") && gatedLate:
			gatedOK = true
		default:
			t.Fatalf("notice %+v (unworked late %v, gated late %v)", n, unworkedLate, gatedLate)
		}
	}
	// The gauge is set before the notices of a check go out.
	if v := p.metric(t, addr, "scheduler_late_jobs"); v != "1" {
		p.mu.Lock()
		for _, e := range p.events {
			t.Log(e.Raw)
		}
		p.mu.Unlock()
		t.Fatalf("scheduler_late_jobs %s, want 1 (unworked)", v)
	}
	// The job pages show the late slots, judged at the store's clock.
	for _, j := range []string{"unworked", "gated"} {
		resp, err := http.Get("http://" + addr + "/jobs/" + j)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `data-state="late"`) || !strings.Contains(string(body), "late today") {
			t.Errorf("the page of %s: %d, no late slot\n%s", j, resp.StatusCode, body)
		}
	}
	late := map[string]bool{}
	for i := 0; len(late) < 2; i++ {
		// A replica that lost and regained the lease on a busy machine
		// says "(found by a new leader)" after the same words.
		ev, at := p.waitEventFunc("job is late: it missed a deadline", func(m string) bool {
			return strings.HasPrefix(m, "job is late: it missed a deadline")
		}, i, 30*time.Second)
		for _, j := range []string{"unworked", "gated"} {
			if strings.Contains(ev.Raw, `"job":"`+j+`"`) {
				late[j] = true
			}
		}
		i = at
	}
	if ev, _ := p.waitEvent("job meets its deadlines again", 0, 30*time.Second); !strings.Contains(ev.Raw, `"job":"gated"`) {
		t.Fatalf("log line %s", ev.Raw)
	}
}
