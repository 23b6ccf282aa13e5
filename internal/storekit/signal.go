package storekit

import (
	"context"
	"sync"
)

// Signal is a set of watchers told of an event (a lease released, a run
// marker freed) by the process that caused it. Each watcher's channel
// holds at most one notification: several events before it reads make
// one wake-up. The zero value is ready to use; a Signal is safe for
// concurrent use and never blocks its notifier.
type Signal struct {
	mu  sync.Mutex
	set map[chan struct{}]struct{}
}

// Watch returns a channel that receives a notification after each Notify
// until ctx is done, when it is closed.
func (s *Signal) Watch(ctx context.Context) <-chan struct{} {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	if s.set == nil {
		s.set = map[chan struct{}]struct{}{}
	}
	s.set[ch] = struct{}{}
	s.mu.Unlock()
	go func() {
		<-ctx.Done()
		s.mu.Lock()
		delete(s.set, ch)
		s.mu.Unlock()
		close(ch)
	}()
	return ch
}

// Notify wakes every watcher.
func (s *Signal) Notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ch := range s.set {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Bell wakes everyone waiting at once: Wait returns a channel that Ring
// closes (the next Wait gets a new one). Stores ring it when they append
// to a stream, so a blocked Fetch in the same process reads at once. The
// zero value is ready to use.
type Bell struct {
	mu sync.Mutex
	ch chan struct{}
}

// Wait returns the channel the next Ring closes.
func (b *Bell) Wait() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch == nil {
		b.ch = make(chan struct{})
	}
	return b.ch
}

// Ring wakes every Wait so far.
func (b *Bell) Ring() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ch != nil {
		close(b.ch)
		b.ch = nil
	}
}
