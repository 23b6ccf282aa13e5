package redistest

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// writeScript appends its argument to a list and returns the port of the
// server that ran it, so a test sees which node took each write.
var writeScript = goredis.NewScript(`redis.call('RPUSH', KEYS[1], ARGV[1])
return string.match(redis.call('INFO', 'server'), 'tcp_port:(%d+)')`)

// write is one attempt of a writer: when it returned, which port took it
// and the error the client saw.
type write struct {
	seq  int
	at   time.Time
	port string
	err  error
}

// writer appends 1, 2, 3... to a list through a client, one write every
// interval, and records what each attempt returned.
type writer struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex
	writes []write
	key    string
}

func startWriter(c goredis.Scripter, key string, every time.Duration) *writer {
	ctx, cancel := context.WithCancel(context.Background())
	w := &writer{cancel: cancel, key: key}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for seq := 1; ; seq++ {
			cctx, ccancel := context.WithTimeout(ctx, 2*time.Second)
			port, err := writeScript.Run(cctx, c, []string{key}, seq).Text()
			ccancel()
			if ctx.Err() != nil {
				return
			}
			w.mu.Lock()
			w.writes = append(w.writes, write{seq: seq, at: time.Now(), port: port, err: err})
			w.mu.Unlock()
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *writer) stop() []write {
	w.cancel()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]write(nil), w.writes...)
}

// waitServedBy waits until the writer's last write was taken by port.
func (w *writer) waitServedBy(port int, timeout time.Duration) error {
	want := strconv.Itoa(port)
	return poll(timeout, func(context.Context) error {
		w.mu.Lock()
		defer w.mu.Unlock()
		if n := len(w.writes); n > 0 && w.writes[n-1].port == want && w.writes[n-1].err == nil {
			return nil
		}
		return fmt.Errorf("writes not yet taken by port %d", port)
	})
}

// report summarises the writes around a fault at time t0: errors by kind,
// which ports took writes and when, and the acknowledged writes missing
// from the surviving list.
func report(writes []write, t0 time.Time, surviving []string) string {
	var b strings.Builder
	have := map[string]bool{}
	for _, s := range surviving {
		have[s] = true
	}
	type span struct {
		first, last time.Duration
		n           int
	}
	ports := map[string]*span{}
	errs := map[string]*span{}
	add := func(m map[string]*span, k string, d time.Duration) {
		s, ok := m[k]
		if !ok {
			s = &span{first: d}
			m[k] = s
		}
		s.last = d
		s.n++
	}
	var lost []string
	var unknownKept int
	for _, w := range writes {
		d := w.at.Sub(t0).Round(time.Millisecond)
		if w.err != nil {
			add(errs, firstWords(w.err.Error()), d)
			if have[strconv.Itoa(w.seq)] {
				unknownKept++
			}
			continue
		}
		add(ports, w.port, d)
		if surviving != nil && !have[strconv.Itoa(w.seq)] {
			lost = append(lost, fmt.Sprintf("%d@%s(%v)", w.seq, w.port, d))
		}
	}
	fmt.Fprintf(&b, "%d writes; ", len(writes))
	for _, m := range []map[string]*span{ports, errs} {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return m[keys[i]].first < m[keys[j]].first })
		for _, k := range keys {
			s := m[k]
			fmt.Fprintf(&b, "[%s: %d, %v..%v] ", k, s.n, s.first, s.last)
		}
	}
	if surviving == nil {
		return b.String()
	}
	if len(lost) > 6 {
		lost = append(lost[:3], append([]string{"..."}, lost[len(lost)-3:]...)...)
	}
	fmt.Fprintf(&b, "; acknowledged but lost: %d %v; failed but kept: %d", len(lostAll(writes, have)), lost, unknownKept)
	return b.String()
}

func firstWords(s string) string {
	f := strings.Fields(s)
	if len(f) > 4 {
		f = f[:4]
	}
	return strings.Join(f, " ")
}

// lostAll lists the acknowledged writes missing from the surviving set.
func lostAll(writes []write, have map[string]bool) []int {
	var lost []int
	for _, w := range writes {
		if w.err == nil && !have[strconv.Itoa(w.seq)] {
			lost = append(lost, w.seq)
		}
	}
	return lost
}
