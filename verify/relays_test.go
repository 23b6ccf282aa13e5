//go:build verify

package verify

// Relays (issue 21): three replicas relaying ten "@every 1s" jobs to
// asynq, River or NATS JetStream; a consumer on the relay's side counts
// each (job, slot) it receives while the leader is killed (kill -9) and
// the fleet is redeployed (SIGTERM each replica in turn, a new one
// started). Judged: slots received twice, slots missed in the window.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/onetick/onetick/internal/pgtest"
	"github.com/onetick/onetick/internal/redistest"
	otpostgres "github.com/onetick/onetick/postgres"
	"github.com/onetick/onetick/redis"
	"github.com/onetick/onetick/relay/natsrelay"
)

const relayJobs = 10

// tickCounter counts each (job, slot) a relay's consumer receives.
type tickCounter struct {
	mu   sync.Mutex
	seen map[string]map[int64]int
}

func newTickCounter() *tickCounter { return &tickCounter{seen: map[string]map[int64]int{}} }

func (c *tickCounter) add(job string, slot int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen[job] == nil {
		c.seen[job] = map[int64]int{}
	}
	c.seen[job][slot]++
}

// judge counts, over every job, slots received more than once (ever),
// and slots missed between from and to: each job's slots there are a
// 1-second grid, so a slot is missed when the grid from the job's first
// received slot at or after from to its last at or before to has a hole.
// dupMissed is the part of missed of prefer: duplicate jobs, which must
// miss none.
func (c *tickCounter) judge(from, to time.Time) (received, twice, missed, dupMissed int, holes []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	lo, hi := from.UnixMilli(), to.UnixMilli()
	for job, slots := range c.seen {
		var in []int64
		for s, n := range slots {
			received += n
			if n > 1 {
				twice++
			}
			if s >= lo && s <= hi {
				in = append(in, s)
			}
		}
		if len(in) == 0 {
			missed += int((hi - lo) / 1000)
			dupMissed += dupOnly(job, int((hi-lo)/1000))
			holes = append(holes, job+": none in the window")
			continue
		}
		sort.Slice(in, func(i, j int) bool { return in[i] < in[j] })
		// Holes at the window's edges: the grid has a slot within every
		// second of it.
		if gap := int((in[0] - lo) / 1000); gap > 0 {
			missed += gap
			dupMissed += dupOnly(job, gap)
			holes = append(holes, fmt.Sprintf("%s: %d at the window's start", job, gap))
		}
		if gap := int((hi - in[len(in)-1]) / 1000); gap > 0 {
			missed += gap
			dupMissed += dupOnly(job, gap)
			holes = append(holes, fmt.Sprintf("%s: %d at the window's end", job, gap))
		}
		for i := 1; i < len(in); i++ {
			if gap := int((in[i] - in[i-1]) / 1000); gap > 1 {
				missed += gap - 1
				dupMissed += dupOnly(job, gap-1)
				holes = append(holes, fmt.Sprintf("%s: %d after %s", job, gap-1, time.UnixMilli(in[i-1]).UTC().Format("15:04:05")))
			}
		}
	}
	return
}

// dupOnly is n for a prefer: duplicate job (named by relayJobsYAML), else 0.
func dupOnly(job string, n int) int {
	if strings.HasSuffix(job, "-duplicate") {
		return n
	}
	return 0
}

// upTo reports whether every job has a slot at or after t.
func (c *tickCounter) upTo(t time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.seen) < relayJobs {
		return false
	}
	for _, slots := range c.seen {
		ok := false
		for s := range slots {
			if s >= t.UnixMilli() {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// relayJobsYAML is relayJobs jobs firing every second, relayed by relay
// (a YAML flow map), half prefer missed (default grace) and half prefer
// duplicate unless prefer names one for all.
func relayJobsYAML(relay, prefer string) string {
	var b strings.Builder
	for i := 0; i < relayJobs; i++ {
		p := prefer
		if p == "" {
			p = map[bool]string{true: "missed", false: "duplicate"}[i%2 == 0]
		}
		fmt.Fprintf(&b, "  - name: relay-%02d-%s\n    schedule: \"@every 1s\"\n    prefer: %s\n    relay: %s\n", i, p, p, relay)
	}
	return b.String()
}

// runRelayFaults starts three replicas, kills the leader with SIGKILL
// (and starts a replacement), redeploys every replica in turn, then
// judges what the consumer counted.
func runRelayFaults(t *testing.T, scenario string, f *Fleet, c *tickCounter, relay, prefers, expectMissed string) {
	n := 0
	start := func() *Replica { n++; return f.Start(fmt.Sprintf("r%d", n)) }
	for i := 0; i < 3; i++ {
		start()
	}
	f.WaitLeader(30 * time.Second)
	from := time.Now().Add(2 * time.Second)
	Settle(8 * time.Second)

	WaitPhase(300 * time.Millisecond)
	leader := f.WaitLeader(10 * time.Second)
	marks := f.Marks()
	killed := f.Kill(leader)
	start()
	_, _, ok := f.AwaitBecameLeader(30*time.Second, marks, leader, leader.Epoch())
	if !ok {
		t.Fatalf("no new leader within 30s of killing %s", leader.Name)
	}
	takeover := time.Since(killed)
	Settle(6 * time.Second)

	// Rolling deploy: each of the replicas alive now, in turn.
	for _, r := range f.Live() {
		f.Stop(r)
		start()
		Settle(2 * time.Second)
	}
	f.WaitLeader(30 * time.Second)
	Settle(6 * time.Second)
	to := time.Now().Add(-3 * time.Second)
	if !Poll(30*time.Second, 100*time.Millisecond, func() bool { return c.upTo(to) }) {
		t.Errorf("the consumer did not receive every job's slots up to %s within 30s", to.UTC().Format(time.RFC3339))
	}
	received, twice, missed, dupMissed, holes := c.judge(from, to)
	window := to.Sub(from).Round(time.Second)
	t.Logf("%s: window %s, %d jobs, received %d, twice %d, missed %d %v, takeover after kill -9 %s",
		relay, window, relayJobs, received, twice, missed, holes, takeover.Round(10*time.Millisecond))
	relayFigures = append(relayFigures, fmt.Sprintf("| %s | %s | %s | %d | %d | %d | %d | %s | %s |",
		relay, prefers, window, relayJobs, received, twice, missed, expectMissed, takeover.Round(10*time.Millisecond)))
	if twice != 0 {
		t.Errorf("%s: %d slots received twice, want 0", relay, twice)
	}
	if dupMissed != 0 {
		t.Errorf("%s: %d slots of prefer: duplicate jobs missed, want 0 (%v)", relay, dupMissed, holes)
	}
	AddRow(t, &Row{Scenario: scenario, Runs: 4, Duplicates: twice,
		Missed:    fmt.Sprintf("%d of %d slots in %s (expected %s)", missed, relayJobs*int(window/time.Second), window, expectMissed),
		TimeLabel: "takeover after kill -9", Times: []time.Duration{takeover},
		Notes: []string{fmt.Sprintf("%s: 1 kill -9 of the leader + 3 rolling restarts; counted by the relay's consumer: %d received, %d twice", relay, received, twice)}})
}

// relayFigures are the rows the relay scenarios print at the end.
var relayFigures []string

func logRelayFigures(t *testing.T) {
	t.Log("| relay | prefer | window | jobs | received | twice | missed | expected missed | takeover |\n" + strings.Join(relayFigures, "\n"))
}

func quietLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestRelayAsynq(t *testing.T) {
	const scenario = "relay: asynq, kill -9 of the leader and a rolling deploy"
	Scenario(t, scenario)
	srv := StartRedis(t, redistest.AppendOnly())
	yaml := withJobs(configYAML, relayJobsYAML("{asynq: {queue: relay, type: tick}}", ""))
	f := NewFleetWith(t, "relay-asynq", srv, yaml)

	c := newTickCounter()
	mux := asynq.NewServeMux()
	mux.HandleFunc("tick", func(ctx context.Context, task *asynq.Task) error {
		var tick redis.RelayedTick
		if err := json.Unmarshal(task.Payload(), &tick); err != nil {
			return asynq.SkipRetry
		}
		c.add(tick.Job, tick.Slot)
		return nil
	})
	as := asynq.NewServer(asynq.RedisClientOpt{Addr: srv.Addr()}, asynq.Config{
		Queues: map[string]int{"relay": 1}, Concurrency: 4, LogLevel: asynq.FatalLevel})
	if err := as.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(as.Shutdown)
	runRelayFaults(t, scenario, f, c, "asynq", "5 missed (grace 6s), 5 duplicate", "0 (takeover < grace)")
	logRelayFigures(t)
}

// relayTickArgs is the River job of every relayed job (kind "verify_tick").
type relayTickArgs struct{ otpostgres.RiverTick }

func (relayTickArgs) Kind() string { return "verify_tick" }

type relayTickWorker struct {
	river.WorkerDefaults[relayTickArgs]
	c *tickCounter
}

func (w relayTickWorker) Work(ctx context.Context, j *river.Job[relayTickArgs]) error {
	w.c.add(j.Args.Job, j.Args.Slot.UnixMilli())
	return nil
}

func TestRelayRiver(t *testing.T) {
	const scenario = "relay: River, kill -9 of the leader and a rolling deploy"
	Scenario(t, scenario)
	ctx := context.Background()
	url := pgtest.URL()
	rs := fmt.Sprintf("verify_river_%d_%d", os.Getpid(), time.Now().UnixNano()%1e6)
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	// Registered before the fleet: runs after its replicas are gone.
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+rs+" CASCADE") })
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+rs); err != nil {
		t.Fatal(err)
	}
	m, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Schema: rs, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		t.Fatal(err)
	}
	c := newTickCounter()
	workers := river.NewWorkers()
	river.AddWorker(workers, relayTickWorker{c: c})
	rc, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Schema: rs, Logger: quietLogger(), Workers: workers,
		Queues: map[string]river.QueueConfig{"relay": {MaxWorkers: 4}}, FetchPollInterval: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := rc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.Stop(context.Background()) })

	jobs := relayJobsYAML("{river: {queue: relay, kind: verify_tick}}", "")
	p := newPGFleet(t, "relay-river", url, func(y string) string {
		y = strings.Replace(y, "\n    schema: ", "\n    river_schema: "+rs+"\n    schema: ", 1)
		return withJobs(y, jobs)
	})
	runRelayFaults(t, scenario, p.Fleet, c, "River", "5 missed (grace 6s), 5 duplicate", "0 (takeover < grace)")
	logRelayFigures(t)
}

func TestRelayNATS(t *testing.T) {
	const scenario = "relay: NATS JetStream, kill -9 of the leader and a rolling deploy"
	Scenario(t, scenario)
	ctx := context.Background()
	nc, err := nats.Connect("nats://127.0.0.1:4222")
	if err != nil {
		t.Fatalf("no nats-server on 127.0.0.1:4222 (scripts/install-deps.sh starts one): %v", err)
	}
	t.Cleanup(nc.Close)
	t.Logf("nats-server %s", nc.ConnectedServerVersion())
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	id := fmt.Sprintf("%d_%d", os.Getpid(), time.Now().UnixNano()%1e6)
	name, subject := "VERIFY_RELAY_"+id, "verify.relay."+id
	st, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: name, Subjects: []string{subject},
		Storage: jetstream.MemoryStorage, Duplicates: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), name) })
	cons, err := st.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckExplicitPolicy})
	if err != nil {
		t.Fatal(err)
	}
	c := newTickCounter()
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		var m natsrelay.Message
		if json.Unmarshal(msg.Data(), &m) == nil {
			c.add(m.Job, m.Slot)
		}
		_ = msg.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cc.Stop)

	srv := StartRedis(t)
	relay := fmt.Sprintf("{nats: {url: \"nats://127.0.0.1:4222\", subject: %s, stream: %s}}", subject, name)
	f := NewFleetWith(t, "relay-nats", srv, withJobs(configYAML, relayJobsYAML(relay, "duplicate")))
	runRelayFaults(t, scenario, f, c, "NATS JetStream", "10 duplicate (window 2m)", "0")
	logRelayFigures(t)
}
