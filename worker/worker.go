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

	mu         sync.Mutex
	jobs       map[string]*job
	started    bool
	streams    []string
	held       map[heldKey]*held
	interrupt  context.CancelFunc // cuts the fetch in progress short; nil when none
	waitersDue bool
	stopping   bool // Run's ctx is done: admitted ticks are given back, not started
	cutoff     bool // the shutdown bound passed: running handlers are cancelled
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
		boundPassed: make(chan struct{}), settles: make(chan settleReq, cfg.Concurrency),
	}, nil
}

// Consumer returns this worker's consumer name.
func (w *Worker) Consumer() string { return w.cfg.Consumer }

// Handle registers h for the ticks of job. It fails on an invalid job name
// or option, a second registration of one job, a nil handler, or a call
// after Run.
func (w *Worker) Handle(name string, h Handler, opts ...JobOption) error {
	field := func(f string) string { return "jobs[" + name + "]." + f }
	if err := onetick.ValidJobName(name); err != nil {
		return cfgErr(field("name"), "%v", err)
	}
	if h == nil {
		return cfgErr(field("handler"), "is nil")
	}
	o := jobOptions{maxAttempts: DefaultMaxAttempts, backoff: DefaultBackoff, overlap: OverlapSkip,
		prefer: onetick.PreferMissed, maxWaiting: DefaultMaxWaiting, stream: "onetick:stream:" + name}
	for _, opt := range opts {
		opt(&o)
	}
	switch {
	case o.timeout < 0:
		return cfgErr(field("timeout"), "must not be negative, got %s", o.timeout)
	case o.maxAttempts < 1:
		return cfgErr(field("max_attempts"), "must be at least 1, got %d", o.maxAttempts)
	case o.backoff == nil:
		return cfgErr(field("backoff"), "is nil")
	case o.stream == "":
		return cfgErr(field("stream"), "must not be empty")
	case o.maxWaiting < 0:
		return cfgErr(field("max_waiting"), "must not be negative, got %d", o.maxWaiting)
	}
	switch o.prefer {
	case "":
		o.prefer = onetick.PreferMissed
	case onetick.PreferMissed, onetick.PreferDuplicate:
	default:
		return cfgErr(field("prefer"), "must be %q or %q, got %q", onetick.PreferMissed, onetick.PreferDuplicate, o.prefer)
	}
	if o.maxWaiting == 0 {
		o.maxWaiting = DefaultMaxWaiting
	}
	switch o.overlap {
	case OverlapSkip, OverlapQueue, OverlapAllow:
	default:
		return cfgErr(field("overlap"), "must be %q, %q or %q, got %q", OverlapSkip, OverlapQueue, OverlapAllow, o.overlap)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started {
		return fmt.Errorf("worker: Handle(%q) after Run", name)
	}
	if _, dup := w.jobs[name]; dup {
		return cfgErr(field("name"), "registered twice")
	}
	w.jobs[name] = &job{name: name, h: h, jobOptions: o}
	return nil
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
	if len(w.jobs) == 0 {
		w.mu.Unlock()
		return errors.New("worker: no handlers registered")
	}
	seen := map[string]bool{}
	for _, j := range w.jobs {
		if !seen[j.stream] {
			seen[j.stream] = true
			w.streams = append(w.streams, j.stream)
		}
	}
	sort.Strings(w.streams)
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
	if now := w.clock.Now(); !now.Before(*nextReclaim) {
		*nextReclaim = now.Add(w.cfg.HeartbeatInterval)
		// Not cut short by shutdown: entries taken over must come back
		// here, to be run or given back.
		rctx, cancel := w.storeCtx()
		ds, err := w.store.Reclaim(rctx, w.cfg.Consumer, w.streams, w.cfg.TakeoverIdle, n)
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
	ds, err := w.store.Fetch(fctx, w.cfg.Consumer, w.streams, n, block)
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

// startOf is what Begin is asked for h: the job's overlap policy as its
// preference makes it.
func (w *Worker) startOf(h *held) Start {
	o, waiting, ordered := policyOf(h.job.prefer, h.job.overlap, h.job.maxWaiting)
	return Start{D: h.d, Overlap: o, MaxWaiting: waiting, Ordered: ordered, MaxDeliveries: w.cfg.MaxDeliveries}
}

// admit begins deliveries just taken (fetched, or taken over when
// reclaimed), starting a handler, with one of the n free slots, for each
// the store admits. It returns the slots left.
func (w *Worker) admit(ds []*Delivery, n int, reclaimed bool) int {
	var starts []Start
	var hs []*held
	w.mu.Lock()
	for _, d := range ds {
		k := heldKey{d.Stream, d.ID}
		if _, dup := w.held[k]; dup {
			// Our own entry, idle because heartbeats failed: still ours.
			continue
		}
		j := w.jobs[d.Job]
		if reclaimed {
			name := d.Job
			if j == nil {
				name = unregisteredJob
			}
			w.m.job(name).reclaimed.Inc()
		}
		if j == nil {
			w.mu.Unlock()
			w.noHandler(d)
			w.mu.Lock()
			continue
		}
		h := &held{d: d, job: j}
		w.held[k] = h
		hs = append(hs, h)
		starts = append(starts, w.startOf(h))
	}
	w.mu.Unlock()
	if len(starts) == 0 {
		return n
	}
	return w.begin(hs, starts, n)
}

// begin asks the store to admit hs and acts on the answers.
func (w *Worker) begin(hs []*held, starts []Start, n int) int {
	ctx, cancel := w.storeCtx()
	defer cancel()
	res, err := w.store.Begin(ctx, w.cfg.Consumer, w.cfg.TakeoverIdle, starts)
	if err != nil {
		w.storeError("begin", err)
		// Their fate in the store is unknown: give them back, so that a
		// takeover does not wait for them to go idle.
		fs := make([]Finish, len(hs))
		for i, h := range hs {
			fs[i] = Finish{D: h.d, Kind: FinishRelease}
		}
		w.forget(hs)
		w.finishQuietly(fs)
		return n
	}
	var release []Finish
	for i, h := range hs {
		d, j := h.d, h.job
		log := w.log.With("job", d.Job, "tick", d.Tick, "attempt", d.Attempt, "entry", d.ID)
		switch a := res.Admissions[i]; a {
		case Run:
			w.mu.Lock()
			h.gen++
			if starts[i].Overlap != OverlapAllow {
				h.marker = MarkerRun
			}
			if !w.holdsLocked(h) || w.stopping || n == 0 {
				// Given up meanwhile (a heartbeat found its waiter slot
				// gone), stopping, or no slot: give it back.
				w.forgetLocked(h)
				w.mu.Unlock()
				release = append(release, Finish{D: d, Kind: FinishRelease})
				continue
			}
			if h.state == waiting {
				w.m.waiting.Dec()
			}
			h.state = running
			n--
			w.handlers.Add(1)
			w.mu.Unlock()
			go w.execute(h, res.StoreTime)
		case Wait:
			w.mu.Lock()
			if !w.holdsLocked(h) {
				w.mu.Unlock()
				release = append(release, Finish{D: d, Kind: FinishRelease})
				continue
			}
			if h.state != waiting {
				w.m.waiting.Inc()
				log.Info("tick waits for the previous run of its job (overlap)", "prefer", string(j.prefer),
					"overlap", string(j.overlap))
			}
			h.gen++
			h.state, h.marker = waiting, MarkerWait
			w.mu.Unlock()
		default:
			w.forget([]*held{h})
			switch a {
			case SkipDone:
				w.m.job(j.name).count(OutcomeSkippedDone)
				log.Info("tick skipped: it has a done record already")
			case SkipOverlap:
				w.m.job(j.name).count(OutcomeSkippedOverlap)
				w.m.missedTicks(j.prefer, ReasonOverlap).Inc()
				why := "tick skipped: a previous run of its job is in flight (overlap); the slot is missed"
				if starts[i].MaxWaiting > 1 {
					why = "tick skipped: a previous run of its job is in flight and max_waiting ticks wait already (overlap); the slot is missed"
				}
				log.Warn(why, "prefer", string(j.prefer), "overlap", string(j.overlap), "reason", ReasonOverlap,
					"slot", d.Slot.String())
			case DeadDeliveries:
				w.m.job(j.name).count(OutcomeDead)
				log.Error("tick dead-lettered: delivered too often without a result (crash loop?)",
					"deliveries", d.Deliveries, "max_deliveries", w.cfg.MaxDeliveries)
			case NotOwned:
				log.Debug("tick no longer ours before it started")
			}
		}
	}
	if len(release) > 0 {
		w.finishQuietly(release)
	}
	return n
}

// readmitWaiters asks the store again about ticks waiting for their job's
// marker, up to n of them, lowest slots first (in slot order only the
// lowest of a job can run).
func (w *Worker) readmitWaiters(n int) int {
	var hs []*held
	w.mu.Lock()
	for _, h := range w.held {
		if h.state == waiting {
			hs = append(hs, h)
		}
	}
	w.mu.Unlock()
	if len(hs) == 0 {
		return n
	}
	sort.Slice(hs, func(i, k int) bool {
		if hs[i].d.Slot != hs[k].d.Slot {
			return hs[i].d.Slot < hs[k].d.Slot
		}
		return hs[i].d.ID < hs[k].d.ID
	})
	hs = hs[:min(len(hs), n)]
	starts := make([]Start, len(hs))
	for i, h := range hs {
		starts[i] = w.startOf(h)
	}
	return w.begin(hs, starts, n)
}

// releaseWaiters gives back the ticks waiting for a marker, at shutdown.
func (w *Worker) releaseWaiters() {
	var fs []Finish
	w.mu.Lock()
	for _, h := range w.held {
		if h.state == waiting {
			fs = append(fs, Finish{D: h.d, Kind: FinishRelease})
			w.forgetLocked(h)
		}
	}
	w.mu.Unlock()
	if len(fs) > 0 {
		w.finishQuietly(fs)
	}
}

// noHandler dead-letters a tick of a job nobody registered here.
func (w *Worker) noHandler(d *Delivery) {
	err := fmt.Sprintf("%v: %q", ErrNoHandler, d.Job)
	owned := w.finishQuietly([]Finish{{D: d, Kind: FinishDead, Err: err}})
	if len(owned) == 1 && owned[0] {
		w.m.job(unregisteredJob).count(OutcomeDead)
		w.log.Error("tick dead-lettered: no handler registered for its job", "job", d.Job, "tick", d.Tick)
	}
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

// wakeWaiters makes the intake loop re-admit waiting ticks now.
func (w *Worker) wakeWaiters() {
	w.mu.Lock()
	defer w.mu.Unlock()
	has := false
	for _, h := range w.held {
		if h.state == waiting {
			has = true
			break
		}
	}
	if !has {
		return
	}
	w.waitersDue = true
	if w.interrupt != nil {
		w.interrupt()
	}
}

func (w *Worker) listenReleased(ctx context.Context) {
	for range w.store.Released(ctx) {
		w.wakeWaiters()
	}
}

// register marks this worker alive in the store as a new process, retrying
// until it succeeds or ctx ends (false).
func (w *Worker) register(ctx context.Context) bool {
	for failures := 0; ; {
		sent := w.clock.Now()
		rctx, cancel := w.storeCtx()
		err := w.store.Register(rctx, w.cfg.Consumer, w.streams, w.cfg.LivenessTTL)
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
