package storekit_test

import (
	"context"
	"testing"

	"github.com/onetick/onetick/internal/storekit"
)

func TestSignal(t *testing.T) {
	var s storekit.Signal
	ctx, cancel := context.WithCancel(context.Background())
	a, b := s.Watch(ctx), s.Watch(ctx)
	s.Notify()
	s.Notify() // coalesced: never blocks
	for _, ch := range []<-chan struct{}{a, b} {
		if _, ok := <-ch; !ok {
			t.Fatal("a watcher was closed instead of notified")
		}
	}
	cancel()
	for _, ch := range []<-chan struct{}{a, b} {
		for range ch { // drains the coalesced second notification, if any
		}
	}
	s.Notify() // no watcher left: nothing to block on
}

func TestBell(t *testing.T) {
	var b storekit.Bell
	w1, w2 := b.Wait(), b.Wait()
	if w1 != w2 {
		t.Fatal("two waits before a ring got different channels")
	}
	select {
	case <-w1:
		t.Fatal("woken before the ring")
	default:
	}
	b.Ring()
	<-w1
	<-w2
	b.Ring() // nobody waiting: no panic
	select {
	case <-b.Wait():
		t.Fatal("a wait after the ring is already woken")
	default:
	}
}
