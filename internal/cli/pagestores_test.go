package cli

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/internal/pgtest"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/worker"
)

// pageStores are the stores the job page's tests run on (pageOpts.store):
// the file store, a redis-server of the test's own on a free port, and a
// schema of the test's own on the machine's PostgreSQL.
var pageStores = []string{"file", "redis", "postgres"}

// withSharedStore returns yaml with its backend section (one line, if
// any) replaced by a fresh, empty store of kind, "redis" or "postgres".
func withSharedStore(t *testing.T, yaml, kind string) string {
	t.Helper()
	var backend string
	switch kind {
	case "redis":
		backend = fmt.Sprintf("backend:\n  redis:\n    url: %s\n    prefix: page\n", redistest.Start(t).URL())
	case "postgres":
		backend = fmt.Sprintf("backend:\n  postgres:\n    url: %s\n    schema: %s\n", pgtest.URL(), pgtest.Schema(t))
	default:
		t.Fatalf("no store %q", kind)
	}
	var rest strings.Builder
	for _, l := range strings.SplitAfter(yaml, "\n") {
		if !strings.HasPrefix(l, "backend:") {
			rest.WriteString(l)
		}
	}
	return backend + rest.String()
}

// actionsYAML is the configuration of the tests that act on the job page:
// report every 10 minutes, flaky daily.
const actionsYAML = `http:
  token: ` + testToken + `
jobs:
  - {name: report, schedule: "*/10 * * * *"}
  - {name: flaky, schedule: "0 3 * * *"}
`

// actionsOpts are what runs beside the API in the tests that act on the
// job page, on store: the scheduler, report's deadline, and a worker
// whose report prints and whose flaky fails its first attempt (which
// makes a dead letter: one attempt each) and succeeds after.
func actionsOpts(store string) pageOpts {
	var flakyRuns atomic.Int32
	return pageOpts{store: store, schedule: true,
		deadline: func(j onetick.Job) onetick.Deadline {
			if j.Name == "report" {
				return onetick.Deadline{Start: time.Minute, Finish: 5 * time.Minute}
			}
			return onetick.Deadline{}
		},
		handlers: map[string]func(*worker.Task, *strings.Builder) error{
			"report": func(task *worker.Task, out *strings.Builder) error {
				fmt.Fprintf(out, "report for %s\nwrote 42 rows\n", task.Tick)
				return nil
			},
			"flaky": func(task *worker.Task, out *strings.Builder) error {
				if flakyRuns.Add(1) == 1 {
					out.WriteString("upstream answered 503\n")
					return fmt.Errorf("upstream unavailable")
				}
				out.WriteString("upstream back: synced\n")
				return nil
			},
		}}
}

// backfillRange is a range of report's past slots to backfill, whole
// seconds in UTC, and the slots in it.
func backfillRange(t *testing.T) (from, to time.Time, slots []onetick.Slot) {
	t.Helper()
	sched, err := cron.Parse("*/10 * * * *", time.UTC)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	from, to = now.Add(-35*time.Minute).Truncate(time.Second), now.Add(-time.Minute).Truncate(time.Second)
	for x := sched.Next(from.Add(-time.Millisecond)); !x.After(to); x = sched.Next(x) {
		slots = append(slots, onetick.SlotOf(x))
	}
	return from, to, slots
}

// backfills counts report's backfilled records in the store's ledger.
func backfills(t *testing.T, s *pageServer) int {
	t.Helper()
	lg, err := s.h.Ledger()
	if err != nil {
		t.Fatal(err)
	}
	p, err := lg.Runs(t.Context(), onetick.RunQuery{Job: "report"})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, r := range p.Runs {
		if r.Kind == onetick.KindBackfill {
			n++
		}
	}
	return n
}
