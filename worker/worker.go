package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/onetick/onetick"
)

// Worker consumes the tick streams of the jobs registered with it and runs
// each tick's handler, once, as the package documentation describes.
type Worker struct {
	cfg   Config
	store Store
	log   *slog.Logger
	clock clockwork.Clock
	m     *metrics

	mu      sync.Mutex
	jobs    map[string]*job
	started bool
	streams []string
	// jobsChanged wakes an intake waiting for a first job (Config.Dynamic).
	jobsChanged chan struct{}
	held        map[heldKey]*held
	interrupt   context.CancelFunc // cuts the fetch in progress short; nil when none
	waitersDue  bool
	stopping    bool // Run's ctx is done: admitted ticks are given back, not started
	cutoff      bool // the shutdown bound passed: running handlers are cancelled
	// aliveSent is when the last heartbeat (or the registration) that
	// reached the store was sent: the store keeps this worker alive until
	// at least aliveSent + LivenessTTL. trust fires distrust at
	// aliveSent + LivenessTTL − HeartbeatInterval.
	aliveSent time.Time
	trust     clockwork.Timer

	slots        chan struct{} // one token per free handler slot
	handlers     sync.WaitGroup
	wakePromoter chan struct{}
	boundPassed  chan struct{} // closed when the shutdown bound passes
	settles      chan settleReq
}

type job struct {
	name string
	h    Handler
	jobOptions
}

type heldKey struct{ stream, id string }

type heldState int

const (
	admitting heldState = iota
	waiting
	running
)

// held is a delivery this worker owns, from fetch or takeover until it is
// settled. Heartbeats cover every held delivery.
type held struct {
	d      *Delivery
	job    *job
	state  heldState
	marker Marker
	// gen changes with every state or marker change, so that a heartbeat
	// answer about an older state is not applied to a newer one.
	gen      uint64
	cancel   context.CancelCauseFunc // running only
	settling bool                    // the handler returned; its result is being recorded
}

// New validates cfg and returns a Worker with no jobs; register them with
// Handle, HandleFunc or HandleJSON, then call Run.
func New(cfg Config) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	m, err := newMetrics(cfg.Registerer)
	if err != nil {
		return nil, err
	}
	return &Worker{cfg: cfg, store: cfg.Store, clock: cfg.Clock, m: m,
		log:  cfg.Logger.With("consumer", cfg.Consumer),
		jobs: map[string]*job{}, held: map[heldKey]*held{},
		slots: make(chan struct{}, cfg.Concurrency), wakePromoter: make(chan struct{}, 1),
		jobsChanged: make(chan struct{}, 1),
		boundPassed: make(chan struct{}), settles: make(chan settleReq, cfg.Concurrency),
	}, nil
}

// currentStreams are the streams read now.
func (w *Worker) currentStreams() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.streams
}

// Consumer returns this worker's consumer name.
func (w *Worker) Consumer() string { return w.cfg.Consumer }

// Handle registers h for the ticks of job. It fails on an invalid job name
// or option, a second registration of one job, a nil handler, or a call
// after Run (unless Config.Dynamic).
func (w *Worker) Handle(name string, h Handler, opts ...JobOption) error {
	return w.addJob(name, h, opts, false)
}

// Set registers h for the ticks of job as Handle does, replacing the
// job's registration if it has one; with Config.Dynamic it may be called
// while Run runs. A tick admitted before runs with the handler and
// options it was admitted with.
func (w *Worker) Set(name string, h Handler, opts ...JobOption) error {
	return w.addJob(name, h, opts, true)
}

func (w *Worker) addJob(name string, h Handler, opts []JobOption, replace bool) error {
	j, err := newJob(name, h, opts)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started && !w.cfg.Dynamic {
		return fmt.Errorf("worker: registering %q after Run", name)
	}
	if _, dup := w.jobs[name]; dup && !replace {
		return cfgErr("jobs["+name+"].name", "registered twice")
	}
	w.setLocked(j)
	return nil
}

// Remove unregisters job; with Config.Dynamic it may be called while Run
// runs: its stream is no longer read (unless another job shares it), and
// a tick of it admitted before still runs.
func (w *Worker) Remove(name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.jobs, name)
	w.streamsLocked()
}

func (w *Worker) setLocked(j *job) {
	w.jobs[j.name] = j
	w.streamsLocked()
}

// streamsLocked recomputes the streams read: those of the registered
// jobs, sorted.
func (w *Worker) streamsLocked() {
	seen := map[string]bool{}
	streams := make([]string, 0, len(w.jobs))
	for _, j := range w.jobs {
		if !seen[j.stream] {
			seen[j.stream] = true
			streams = append(streams, j.stream)
		}
	}
	sort.Strings(streams)
	w.streams = streams
	select {
	case w.jobsChanged <- struct{}{}:
	default:
	}
}

// newJob validates a registration.
func newJob(name string, h Handler, opts []JobOption) (*job, error) {
	field := func(f string) string { return "jobs[" + name + "]." + f }
	if err := onetick.ValidJobName(name); err != nil {
		return nil, cfgErr(field("name"), "%v", err)
	}
	if h == nil {
		return nil, cfgErr(field("handler"), "is nil")
	}
	o := jobOptions{maxAttempts: DefaultMaxAttempts, backoff: DefaultBackoff, overlap: OverlapSkip,
		prefer: onetick.PreferMissed, maxWaiting: DefaultMaxWaiting, stream: "onetick:stream:" + name}
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case o.timeout < 0:
		return nil, cfgErr(field("timeout"), "must not be negative, got %s", o.timeout)
	case o.maxAttempts < 1:
		return nil, cfgErr(field("max_attempts"), "must be at least 1, got %d", o.maxAttempts)
	case o.backoff == nil:
		return nil, cfgErr(field("backoff"), "is nil")
	case o.stream == "":
		return nil, cfgErr(field("stream"), "must not be empty")
	case o.maxWaiting < 0:
		return nil, cfgErr(field("max_waiting"), "must not be negative, got %d", o.maxWaiting)
	}
	switch o.prefer {
	case "":
		o.prefer = onetick.PreferMissed
	case onetick.PreferMissed, onetick.PreferDuplicate:
	default:
		return nil, cfgErr(field("prefer"), "must be %q or %q, got %q", onetick.PreferMissed, onetick.PreferDuplicate, o.prefer)
	}
	if o.maxWaiting == 0 {
		o.maxWaiting = DefaultMaxWaiting
	}
	switch o.overlap {
	case OverlapSkip, OverlapQueue, OverlapAllow:
	default:
		return nil, cfgErr(field("overlap"), "must be %q, %q or %q, got %q", OverlapSkip, OverlapQueue, OverlapAllow, o.overlap)
	}
	return &job{name: name, h: h, jobOptions: o}, nil
}

// HandleFunc registers a function as job's handler.
func (w *Worker) HandleFunc(job string, f func(ctx context.Context, t *Task) error, opts ...JobOption) error {
	if f == nil {
		return w.Handle(job, nil, opts...)
	}
	return w.Handle(job, HandlerFunc(f), opts...)
}

// Run consumes ticks until ctx is done. Then it stops taking ticks, gives
// back the ones it holds without having started them, lets handlers in
// flight finish for up to ShutdownTimeout, cancels the contexts of those
// still running (cause ErrShutdown), waits for them and returns nil. A
// Worker runs once.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.started {
		w.mu.Unlock()
		return errors.New("worker: Run called twice")
	}
	w.started = true
	if len(w.jobs) == 0 && !w.cfg.Dynamic {
		w.mu.Unlock()
		return errors.New("worker: no handlers registered")
	}
	w.mu.Unlock()
	for range w.cfg.Concurrency {
		w.slots <- struct{}{}
	}
	// Alive in the store before taking anything, so that no other worker
	// takes this one's first entries for a dead worker's; and whatever an
	// earlier process of this name left is given back.
	if !w.register(ctx) {
		return nil
	}
	defer func() {
		w.mu.Lock()
		w.trust.Stop()
		w.mu.Unlock()
	}()
	w.log.Info("worker started", "jobs", len(w.jobs), "streams", len(w.streams),
		"concurrency", w.cfg.Concurrency, "heartbeat", w.cfg.HeartbeatInterval, "liveness_ttl", w.cfg.LivenessTTL,
		"takeover_idle", w.cfg.TakeoverIdle)

	// Heartbeats outlive ctx: handlers finishing within the shutdown bound
	// must keep their entries.
	hbCtx, stopHB := context.WithCancel(context.WithoutCancel(ctx))
	var intake, hb sync.WaitGroup
	intake.Add(3)
	go func() { defer intake.Done(); w.intake(ctx) }()
	go func() { defer intake.Done(); w.promoter(ctx) }()
	go func() { defer intake.Done(); w.listenReleased(ctx) }()
	hb.Add(2)
	go func() { defer hb.Done(); w.heartbeats(hbCtx) }()
	go func() { defer hb.Done(); w.settler(hbCtx) }()

	<-ctx.Done()
	w.mu.Lock()
	w.stopping = true
	w.mu.Unlock()
	intake.Wait()
	w.releaseWaiters()

	done := make(chan struct{})
	go func() { w.handlers.Wait(); close(done) }()
	bound := w.clock.NewTimer(w.cfg.ShutdownTimeout)
	select {
	case <-done:
		bound.Stop()
	case <-bound.Chan():
		w.mu.Lock()
		w.cutoff = true
		n := 0
		for _, h := range w.held {
			if h.state == running && h.cancel != nil {
				h.cancel(ErrShutdown)
				n++
			}
		}
		w.mu.Unlock()
		close(w.boundPassed)
		w.log.Warn("shutdown bound passed: cancelling handlers still running", "bound", w.cfg.ShutdownTimeout, "handlers", n)
		<-done
	}
	stopHB()
	hb.Wait()
	w.log.Info("worker stopped")
	return nil
}

// intake takes ticks: it takes over idle entries every HeartbeatInterval,
// re-admits ticks that wait for their job's marker when it may be free,
// and fetches new entries, never more than it has free handler slots.
func (w *Worker) intake(ctx context.Context) {
	nextReclaim := w.clock.Now() // at once: take over what a predecessor left
	var failures int
	for {
		select {
		case <-ctx.Done():
			return
		case <-w.slots:
		}
		n := 1
	grab:
		for n < w.cfg.Concurrency {
			select {
			case <-w.slots:
				n++
			default:
				break grab
			}
		}
		n, ok := w.intakeOnce(ctx, n, &nextReclaim)
		for range n {
			w.slots <- struct{}{}
		}
		if ok {
			failures = 0
			continue
		}
		failures++
		if !w.sleep(ctx, retryDelay(failures)) {
			return
		}
	}
}

// intakeOnce uses up to n free slots and returns how many are left, and
// false after a store error.
func (w *Worker) intakeOnce(ctx context.Context, n int, nextReclaim *time.Time) (int, bool) {
	if ctx.Err() != nil {
		return n, true // stopping: take nothing more
	}
	w.mu.Lock()
	distrusted := !w.aliveSent.IsZero() && !w.clock.Now().Before(w.trustDeadlineLocked())
	w.mu.Unlock()
	if distrusted {
		// Heartbeats have not reached the store for nearly the liveness
		// TTL: this worker gave back what it ran and takes nothing, not
		// even what it gave back, until a heartbeat gets through.
		return n, false
	}
	if now, streams := w.clock.Now(), w.currentStreams(); !now.Before(*nextReclaim) && len(streams) > 0 {
		*nextReclaim = now.Add(w.cfg.HeartbeatInterval)
		// Not cut short by shutdown: entries taken over must come back
		// here, to be run or given back.
		rctx, cancel := w.storeCtx()
		ds, err := w.store.Reclaim(rctx, w.cfg.Consumer, streams, w.cfg.TakeoverIdle, n)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return n, true
			}
			w.storeError("reclaim", err)
			return n, false
		}
		n = w.admit(ds, n, true)
	}
	w.mu.Lock()
	due := w.waitersDue
	w.waitersDue = false
	w.mu.Unlock()
	if due {
		n = w.readmitWaiters(n)
	}
	if n == 0 {
		return 0, true
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w.mu.Lock()
	if w.waitersDue {
		cancel()
	}
	w.interrupt = cancel
	w.mu.Unlock()
	block := max(w.clock.Until(*nextReclaim), time.Millisecond)
	streams := w.currentStreams()
	if len(streams) == 0 {
		// Nothing registered yet (Config.Dynamic): wait for a job.
		select {
		case <-fctx.Done():
		case <-w.jobsChanged:
		case <-w.clock.After(block):
		}
		w.mu.Lock()
		w.interrupt = nil
		w.mu.Unlock()
		return n, true
	}
	ds, err := w.store.Fetch(fctx, w.cfg.Consumer, streams, n, block)
	w.mu.Lock()
	w.interrupt = nil
	w.mu.Unlock()
	n = w.admit(ds, n, false)
	if err != nil && fctx.Err() == nil {
		w.storeError("fetch", err)
		return n, false
	}
	return n, true
}

func (w *Worker) forget(hs []*held) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, h := range hs {
		w.forgetLocked(h)
	}
}

func (w *Worker) holdsLocked(h *held) bool { return w.held[heldKey{h.d.Stream, h.d.ID}] == h }

// forgetLocked drops h from the held set, if it is still there.
func (w *Worker) forgetLocked(h *held) {
	k := heldKey{h.d.Stream, h.d.ID}
	if w.held[k] != h {
		return
	}
	delete(w.held, k)
	if h.state == waiting {
		w.m.waiting.Dec()
	}
}

// finishQuietly settles without retrying: for give-backs and dead letters
// whose failure only delays a takeover.
func (w *Worker) finishQuietly(fs []Finish) []bool {
	ctx, cancel := w.storeCtx()
	defer cancel()
	owned, err := w.store.Finish(ctx, w.cfg.Consumer, fs)
	if err != nil {
		w.storeError("finish", err)
		return nil
	}
	w.wakeWaiters()
	return owned
}

// register marks this worker alive in the store as a new process, retrying
// until it succeeds or ctx ends (false).
func (w *Worker) register(ctx context.Context) bool {
	for failures := 0; ; {
		sent := w.clock.Now()
		rctx, cancel := w.storeCtx()
		err := w.store.Register(rctx, w.cfg.Consumer, w.currentStreams(), w.cfg.LivenessTTL)
		cancel()
		if err == nil {
			w.alive(sent)
			return true
		}
		if ctx.Err() != nil {
			return false
		}
		w.storeError("register", err)
		failures++
		if !w.sleep(ctx, retryDelay(failures)) {
			return false
		}
	}
}

// storeCtx bounds one store call that must not be abandoned halfway on
// shutdown.
func (w *Worker) storeCtx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), max(w.cfg.TakeoverIdle/2, 5*time.Second))
}

func (w *Worker) storeError(op string, err error) {
	w.m.storeErrs.WithLabelValues(op).Inc()
	w.log.Warn("store call failed", "op", op, "err", err)
}

// sleep waits d on the worker's clock; false when ctx ended first.
func (w *Worker) sleep(ctx context.Context, d time.Duration) bool {
	t := w.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.Chan():
		return true
	}
}

// retryDelay after n consecutive store failures: 50ms doubling to 2s.
func retryDelay(n int) time.Duration {
	d := 50 * time.Millisecond
	for i := 1; i < n && d < 2*time.Second; i++ {
		d *= 2
	}
	return min(d, 2*time.Second)
}
