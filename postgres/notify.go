package postgres

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// hub is the one connection of a Backend that LISTENs, started on the
// first subscription, and fans notifications out to subscribers. After
// it (re)connects it wakes every subscriber, since notifications sent
// while it was away are lost.
type hub struct {
	cfg      *pgx.ConnConfig
	channels []string
	log      *slog.Logger

	mu      sync.Mutex
	subs    map[*sub]struct{}
	started bool
	closed  bool
	ready   chan struct{} // closed once the first LISTEN is in place
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	done    chan struct{} // closed by close
}

// sub is one subscriber: it receives (coalesced) on c whenever a
// notification arrives on channel and match accepts its payload.
type sub struct {
	channel string
	match   func(payload string) bool
	c       chan struct{}
}

func newHub(cfg *pgx.ConnConfig, channels []string, log *slog.Logger) *hub {
	return &hub{cfg: cfg, channels: channels, log: log, subs: map[*sub]struct{}{}, ready: make(chan struct{}),
		done: make(chan struct{})}
}

// subscribe registers a subscriber and starts the listener if needed.
// The returned function unregisters it.
func (h *hub) subscribe(channel string, match func(string) bool) (*sub, func()) {
	s := &sub{channel: channel, match: match, c: make(chan struct{}, 1)}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return s, func() {}
	}
	h.subs[s] = struct{}{}
	if !h.started {
		h.started = true
		ctx, cancel := context.WithCancel(context.Background())
		h.cancel = cancel
		h.wg.Add(1)
		go h.run(ctx)
	}
	return s, func() {
		h.mu.Lock()
		delete(h.subs, s)
		h.mu.Unlock()
	}
}

// waitReady waits until the listener is in place, at most d.
func (h *hub) waitReady(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-h.ready:
	case <-ctx.Done():
	case <-h.done:
	case <-t.C:
	}
}

func (h *hub) close() {
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return
	}
	h.closed = true
	close(h.done)
	cancel := h.cancel
	h.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	h.wg.Wait()
}

func (h *hub) dispatch(channel, payload string, all bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.subs {
		if all || (s.channel == channel && (s.match == nil || s.match(payload))) {
			select {
			case s.c <- struct{}{}:
			default:
			}
		}
	}
}

func (h *hub) run(ctx context.Context) {
	defer h.wg.Done()
	backoff := 50 * time.Millisecond
	readyOnce := sync.Once{}
	lost := false
	for ctx.Err() == nil {
		if err := h.listen(ctx, func() {
			readyOnce.Do(func() { close(h.ready) })
			backoff = 50 * time.Millisecond
			if lost {
				lost = false
				h.log.Info("postgres listener back")
			}
			h.dispatch("", "", true)
		}); err != nil && ctx.Err() == nil {
			if !lost {
				lost = true
				h.log.Warn("postgres listener lost; reconnecting (standbys and waiting workers rely on their timers meanwhile)", "err", err)
			}
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
			backoff = min(2*backoff, 2*time.Second)
		}
	}
}

// listen connects, LISTENs on every channel, calls up and dispatches
// notifications until the connection fails or ctx is done.
func (h *hub) listen(ctx context.Context, up func()) error {
	conn, err := pgx.ConnectConfig(ctx, h.cfg)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	for _, ch := range h.channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	up()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		h.dispatch(n.Channel, n.Payload, false)
	}
}

// forward runs a goroutine that passes s's wakes to the returned
// channel, plus a wake at each instant next returns (if next is set:
// called at the start and after every wake, it returns how long until the
// next wake it wants, or a negative duration for none). The channel is
// closed once ctx is done or the hub closes.
func (h *hub) forward(ctx context.Context, s *sub, unsub func(), next func(context.Context) time.Duration) <-chan struct{} {
	out := make(chan struct{}, 1)
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		unsub()
		close(out)
		return out
	}
	h.wg.Add(1)
	h.mu.Unlock()
	go func() {
		defer h.wg.Done()
		defer close(out)
		defer unsub()
		var timer *time.Timer
		var tc <-chan time.Time
		arm := func() {
			if next == nil {
				return
			}
			if timer != nil {
				timer.Stop()
				tc = nil
			}
			if d := next(ctx); d >= 0 {
				timer = time.NewTimer(d)
				tc = timer.C
			}
		}
		arm()
		defer func() {
			if timer != nil {
				timer.Stop()
			}
		}()
		for {
			select {
			case <-ctx.Done():
				return
			case <-h.done:
				return
			case <-s.c:
			case <-tc:
			}
			select {
			case out <- struct{}{}:
			default:
			}
			arm()
		}
	}()
	return out
}
