package natsrelay_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"go.uber.org/goleak"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/memory"
	"github.com/onetick/onetick/relay/natsrelay"
	"github.com/onetick/onetick/worker"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const natsURL = "nats://127.0.0.1:4222"

// jsEnv is a uniquely named JetStream stream on the machine's nats-server,
// deleted at the end of the test.
type jsEnv struct {
	t       *testing.T
	js      jetstream.JetStream
	stream  jetstream.Stream
	subject string
}

var seq atomic.Int64

func newJS(t *testing.T, perSubject bool) *jsEnv {
	t.Helper()
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatalf("nats-server on %s: %v", natsURL, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	n := seq.Add(1)
	name := fmt.Sprintf("OT_%s_%d_%d", strings.ReplaceAll(t.Name(), "/", "_"), time.Now().UnixNano(), n)
	subject := fmt.Sprintf("ot%d_%d", time.Now().UnixNano(), n)
	sc := jetstream.StreamConfig{Name: name, Subjects: []string{subject, subject + ".>"}, Storage: jetstream.MemoryStorage}
	if perSubject {
		sc.MaxMsgsPerSubject, sc.Discard, sc.DiscardNewPerSubject = 1, jetstream.DiscardNew, true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := js.CreateStream(ctx, sc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, name); err != nil {
			t.Errorf("deleting stream %s: %v", name, err)
		}
	})
	return &jsEnv{t: t, js: js, stream: st, subject: subject}
}

// msgs is the number of messages in the stream.
func (e *jsEnv) msgs() uint64 {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	info, err := e.stream.Info(ctx)
	if err != nil {
		e.t.Fatal(err)
	}
	return info.State.Msgs
}

// ids are the Nats-Msg-Id headers of the stream's messages, in order.
func (e *jsEnv) ids() []string {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	var out []string
	n := e.msgs()
	for s := uint64(1); uint64(len(out)) < n; s++ {
		m, err := e.stream.GetMsg(ctx, s)
		if err != nil {
			e.t.Fatalf("message %d: %v", s, err)
		}
		out = append(out, m.Header.Get(jetstream.MsgIDHeader))
	}
	return out
}

// ends collects the settled attempts of workers built with onAttempt.
type ends struct{ ch chan attempt }

type attempt struct {
	consumer, tick string
	deliveries     int
	end            worker.AttemptEnd
}

func newEnds() *ends { return &ends{ch: make(chan attempt, 100)} }

func (e *ends) hook(consumer string) func(context.Context, *worker.Task) (context.Context, func(worker.AttemptEnd)) {
	return func(ctx context.Context, t *worker.Task) (context.Context, func(worker.AttemptEnd)) {
		return ctx, func(a worker.AttemptEnd) { e.ch <- attempt{consumer, t.Tick, t.Deliveries, a} }
	}
}

func (e *ends) await(t *testing.T, consumer string) attempt {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case a := <-e.ch:
			if a.consumer == consumer {
				return a
			}
		case <-timeout:
			t.Fatalf("no settled attempt on %s", consumer)
		}
	}
}

// claim claims n ticks of job on stream "s" of b, a second apart.
func claim(t *testing.T, b onetick.Backend, job string, n int) []string {
	t.Helper()
	ctx := context.Background()
	g, err := b.Acquire(ctx, "producer", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = b.Release(ctx, g.Lease) }()
	s := onetick.SlotOf(time.Now().Add(-time.Minute).Truncate(time.Second))
	var ticks []onetick.Tick
	var ids []string
	for i := range n {
		tk := onetick.Tick{Job: job, Slot: s + onetick.Slot(1000*i), Stream: "s", Payload: `{"n":1}`, Retention: time.Minute}
		ticks, ids = append(ticks, tk), append(ids, tk.ID())
	}
	if _, err := b.Claim(ctx, g.Lease, ticks); err != nil {
		t.Fatal(err)
	}
	return ids
}

// runWorker runs a worker of store as consumer with h for job; stop stops it.
func runWorker(t *testing.T, store worker.Store, consumer, job string, h worker.Handler, p onetick.Prefer, e *ends) (stop func(), reg *prometheus.Registry) {
	t.Helper()
	reg = prometheus.NewRegistry()
	w, err := worker.New(worker.Config{Store: store, Consumer: consumer, Registerer: reg,
		Logger:       slog.New(slog.NewTextHandler(io.Discard, nil)),
		TakeoverIdle: time.Second, HeartbeatInterval: 100 * time.Millisecond, LivenessTTL: time.Second,
		ShutdownTimeout: 5 * time.Second, OnAttempt: e.hook(consumer)})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Handle(job, h, worker.WithStream("s"), worker.WithPrefer(p), worker.WithOverlap(worker.OverlapAllow)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = w.Run(ctx) }()
	var once sync.Once
	stop = func() { once.Do(func() { cancel(); <-done }) }
	t.Cleanup(stop)
	return stop, reg
}

func publisher(t *testing.T, e *jsEnv, perSubject bool, p onetick.Prefer) (*natsrelay.Publisher, *natsrelay.Metrics) {
	t.Helper()
	m, err := natsrelay.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	pub, err := natsrelay.New(natsrelay.Config{URL: natsURL, Subject: e.subject, Stream: e.stream.CachedInfo().Config.Name,
		PerSubject: perSubject, Prefer: p, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pub.Close)
	return pub, m
}

// TestRelayNATSEachSlotOnce: a worker on a real store publishes each
// claimed slot once, with Nats-Msg-Id = the tick id, and finishes it.
func TestRelayNATSEachSlotOnce(t *testing.T) {
	js := newJS(t, false)
	b := memory.New(memory.Options{})
	defer b.Close()
	pub, m := publisher(t, js, false, onetick.PreferMissed)
	ids := claim(t, b, "pub", 5)
	e := newEnds()
	_, _ = runWorker(t, b.WorkerStore(""), "w1", "pub", pub, onetick.PreferMissed, e)
	for range ids {
		if a := e.await(t, "w1"); a.end.Kind != worker.FinishDone || !a.end.Recorded ||
			!strings.HasPrefix(a.end.Result.Output, "published to jetstream") {
			t.Fatalf("attempt %+v, want done, recorded, published", a)
		}
	}
	got := js.ids()
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprint(ids) {
		t.Fatalf("stream holds %v, want each of %v once", got, ids)
	}
	if got := testutil.ToFloat64(natsrelay.PublishedCounter(m)); got != 5 {
		t.Fatalf("published counter %v, want 5", got)
	}
	// The worker's finish wrote the ledger's succeeded event, saying where.
	r, ok, err := b.Run(context.Background(), "pub", ids[0])
	if err != nil || !ok {
		t.Fatalf("ledger record of %s: %v, %v", ids[0], ok, err)
	}
	last := r.Events[len(r.Events)-1]
	if last.What != onetick.EventSucceeded || !strings.HasPrefix(last.Result.Output, "published to jetstream: stream OT_") {
		t.Fatalf("last ledger event %+v, want succeeded, published to jetstream", last)
	}
}

// helpless gathers g's metrics with their help text replaced, so that a
// comparison does not depend on it.
type helpless struct{ g prometheus.Gatherer }

func (h helpless) Gather() ([]*dto.MetricFamily, error) {
	mfs, err := h.g.Gather()
	for _, mf := range mfs {
		help := "x"
		mf.Help = &help
	}
	return mfs, err
}

// dying is a worker store whose Heartbeat and Finish fail once dead: the
// consumer died between the publish and the finish.
type dying struct {
	worker.Store
	dead atomic.Bool
}

var errDied = errors.New("consumer died")

func (d *dying) Heartbeat(ctx context.Context, c string, live, hold time.Duration, hs []worker.Hold) ([]int, error) {
	if d.dead.Load() {
		return nil, errDied
	}
	return d.Store.Heartbeat(ctx, c, live, hold, hs)
}

func (d *dying) Finish(ctx context.Context, c string, fs []worker.Finish) ([]bool, error) {
	if d.dead.Load() {
		return nil, errDied
	}
	return d.Store.Finish(ctx, c, fs)
}

// takeover: consumer a publishes the tick and dies before its finish;
// consumer b takes the entry over by the store's takeover. It returns b's
// attempt and the publisher's metrics.
func takeover(t *testing.T, p onetick.Prefer, st store) (*jsEnv, attempt, *natsrelay.Metrics, string, *prometheus.Registry) {
	js := newJS(t, false)
	b := st.b
	pub, m := publisher(t, js, false, p)
	ids := claim(t, b, "pub", 1)
	e := newEnds()
	d := &dying{Store: st.ws()}
	published := make(chan struct{})
	stopA, _ := runWorker(t, d, "a", "pub", worker.HandlerFunc(func(ctx context.Context, tk *worker.Task) error {
		err := pub.Work(ctx, tk)
		d.dead.Store(true)
		close(published)
		return err
	}), p, e)
	select {
	case <-published:
	case <-time.After(60 * time.Second):
		t.Fatal("a did not publish")
	}
	if a := e.await(t, "a"); a.end.Recorded {
		t.Fatalf("a's finish recorded: %+v", a)
	}
	stopA()
	_, reg := runWorker(t, st.ws(), "b", "pub", pub, p, e)
	a := e.await(t, "b")
	if a.tick != ids[0] || a.deliveries < 2 || !a.end.Recorded || a.end.Kind != worker.FinishDone {
		t.Fatalf("b's attempt %+v, want %s taken over and done", a, ids[0])
	}
	return js, a, m, ids[0], reg
}

// TestRelayNATSTakeoverRepublishedAndDeduplicated: prefer duplicate, the
// taken-over entry is published again with the same Msg-Id and JetStream
// deduplicates it: one message for the tick.
func TestRelayNATSTakeoverRepublishedAndDeduplicated(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store) { republished(t, st) })
}

func republished(t *testing.T, st store) {
	js, a, m, id, _ := takeover(t, onetick.PreferDuplicate, st)
	if got := js.ids(); len(got) != 1 || got[0] != id {
		t.Fatalf("stream holds %v, want one message %s", got, id)
	}
	if !strings.Contains(a.end.Result.Output, "duplicate ack") {
		t.Fatalf("b's result %q, want a duplicate ack", a.end.Result.Output)
	}
	if got := testutil.ToFloat64(natsrelay.DuplicatesCounter(m)); got != 1 {
		t.Fatalf("duplicates counter %v, want 1", got)
	}
}

// TestRelayNATSTakeoverDroppedWhenPreferMissed: prefer missed, the
// taken-over entry is not published again, and is counted.
func TestRelayNATSTakeoverDroppedWhenPreferMissed(t *testing.T) {
	forEachStore(t, func(t *testing.T, st store) { dropped(t, st) })
}

func dropped(t *testing.T, st store) {
	js, a, m, id, reg := takeover(t, onetick.PreferMissed, st)
	if got := js.ids(); len(got) != 1 || got[0] != id {
		t.Fatalf("stream holds %v, want one message %s", got, id)
	}
	if !strings.Contains(a.end.Result.Output, "not published again") {
		t.Fatalf("b's result %q, want dropped", a.end.Result.Output)
	}
	if got := testutil.ToFloat64(natsrelay.DroppedCounter(m)); got != 1 {
		t.Fatalf("dropped counter %v, want 1", got)
	}
	if got := testutil.ToFloat64(natsrelay.DuplicatesCounter(m)); got != 0 {
		t.Fatalf("duplicates counter %v, want 0", got)
	}
	// And in the worker's fleet total of missed slots, which the
	// missed-ticks alert sums.
	want := strings.NewReader(`# HELP worker_missed_ticks_total x
# TYPE worker_missed_ticks_total counter
worker_missed_ticks_total{prefer="duplicate",reason="overlap"} 0
worker_missed_ticks_total{prefer="missed",reason="overlap"} 0
worker_missed_ticks_total{prefer="missed",reason="takeover"} 1
`)
	if err := testutil.GatherAndCompare(helpless{reg}, want, "worker_missed_ticks_total"); err != nil {
		t.Fatal(err)
	}
}

// TestRelayNATSPerSubjectRefusesASecondPublish: on a per-subject stream a
// second message for a tick is refused whatever its age: here the first
// one carries no Msg-Id JetStream remembers (as after the duplicate
// window), and the relay's publish is refused and counted as delivered.
func TestRelayNATSPerSubjectRefusesASecondPublish(t *testing.T) {
	js := newJS(t, true)
	b := memory.New(memory.Options{})
	defer b.Close()
	pub, m := publisher(t, js, true, onetick.PreferDuplicate)
	ids := claim(t, b, "pub", 2)
	slot := strings.TrimPrefix(ids[0], "pub:")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := js.js.Publish(ctx, js.subject+".pub."+slot, []byte("earlier")); err != nil {
		t.Fatal(err)
	}
	e := newEnds()
	_, _ = runWorker(t, b.WorkerStore(""), "w1", "pub", pub, onetick.PreferDuplicate, e)
	outs := map[string]string{}
	for range ids {
		a := e.await(t, "w1")
		if a.end.Kind != worker.FinishDone || !a.end.Recorded {
			t.Fatalf("attempt %+v, want done", a)
		}
		outs[a.tick] = a.end.Result.Output
	}
	if !strings.Contains(outs[ids[0]], "per subject") || !strings.HasPrefix(outs[ids[1]], "published") {
		t.Fatalf("results %v, want the first refused per subject, the second published", outs)
	}
	if got := js.msgs(); got != 2 {
		t.Fatalf("stream holds %d messages, want 2 (the earlier one and the second tick)", got)
	}
	if got := testutil.ToFloat64(natsrelay.DuplicatesCounter(m)); got != 1 {
		t.Fatalf("duplicates counter %v, want 1", got)
	}
}

// TestRelayNATSSharedConn: the publishers of two jobs share one named
// connection (a Conn); closing a publisher leaves a shared connection
// open, and a closed Conn connects again on its next use.
func TestRelayNATSSharedConn(t *testing.T) {
	js := newJS(t, false)
	conn, err := natsrelay.NewConn(natsrelay.ConnConfig{URL: natsURL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	stream := js.stream.CachedInfo().Config.Name
	var pubs []*natsrelay.Publisher
	for range 2 {
		p, err := natsrelay.New(natsrelay.Config{Conn: conn, Subject: js.subject, Stream: stream, Prefer: onetick.PreferMissed})
		if err != nil {
			t.Fatal(err)
		}
		pubs = append(pubs, p)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	work := func(p *natsrelay.Publisher, job string) {
		t.Helper()
		slot := onetick.SlotOf(time.Now().Truncate(time.Second))
		if err := p.Work(ctx, &worker.Task{Job: job, Slot: slot, Tick: fmt.Sprintf("%s:%d", job, slot), Deliveries: 1}); err != nil {
			t.Fatalf("%s: %v", job, err)
		}
	}
	work(pubs[0], "a")
	pubs[0].Close()
	work(pubs[1], "b") // the shared connection is still open
	conn.Close()
	work(pubs[1], "c") // and connects again
	if got := js.ids(); len(got) != 3 || !strings.HasPrefix(got[0], "a:") || !strings.HasPrefix(got[1], "b:") || !strings.HasPrefix(got[2], "c:") {
		t.Fatalf("stream holds %q, want a, b and c's ticks", got)
	}
	if _, err := natsrelay.NewConn(natsrelay.ConnConfig{URL: natsURL, Token: "t", Creds: "/c"}); err == nil {
		t.Fatal("a connection with a token and creds was accepted")
	}
	// A publish to $JS.API.STREAM.PURGE.<name> would purge that stream.
	if _, err := natsrelay.New(natsrelay.Config{Conn: conn, Subject: "$JS.API.STREAM.PURGE.X", Stream: stream}); err == nil {
		t.Fatal("a publisher to a $ subject (NATS's API) was made")
	}
}

// TestRelayNATSStreamDoesNotBoundCoreSubscribers: a connection's stream
// (Nats-Expected-Stream) refuses a subject another stream holds, but a
// subject no stream holds still reaches its core NATS subscribers before
// the publish fails for want of an ack. What a job applied at run time
// may publish to is bounded by the credentials' NATS permissions, not by
// the stream (docs/relays.md, Jobs applied at run time).
func TestRelayNATSStreamDoesNotBoundCoreSubscribers(t *testing.T) {
	js := newJS(t, false)
	nc, err := nats.Connect(natsURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	other := fmt.Sprintf("core%d.orders.delete", time.Now().UnixNano())
	got := make(chan *nats.Msg, 4)
	sub, err := nc.ChanSubscribe(other, got)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	if err := nc.Flush(); err != nil {
		t.Fatal(err)
	}
	p, err := natsrelay.New(natsrelay.Config{URL: natsURL, Subject: other, Stream: js.stream.CachedInfo().Config.Name, Prefer: onetick.PreferDuplicate})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	ctx, cancel := context.WithCancel(context.Background())
	worked := make(chan error, 1)
	go func() { worked <- p.Work(ctx, &worker.Task{Job: "j", Slot: 1000, Tick: "j:1000", Deliveries: 1}) }()
	select {
	case m := <-got:
		if !strings.Contains(string(m.Data), `"tick":"j:1000"`) {
			t.Fatalf("the core subscriber got %s", m.Data)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the core subscriber got nothing: the stream bounds more than documented")
	}
	cancel()
	if err := <-worked; err == nil {
		t.Fatal("the publish to a subject no stream holds succeeded")
	}
}
