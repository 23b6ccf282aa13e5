package onetick

import (
	"context"
	"fmt"
	"time"
)

// Members is the fleet's membership: the replicas that are alive, as the
// balancer of shards counts them to decide each replica's fair share
// (docs/shards.md, "Balancing"). It is fleet-wide state, so a store
// implements it on the store itself, never on one shard's view.
//
// Membership decides nothing about safety: a replica wrongly counted live
// or dead only makes the shares uneven for a while; every shard's lease
// and its fenced claims stay the arbiters of who fires.
type Members interface {
	// Heartbeat records holder as live until ttl from now by the store's
	// clock, removes every entry whose time has passed, and returns the
	// live holders (holder included) in name order, in one atomic step.
	// A holder that stops heartbeating drops out one ttl after its last
	// heartbeat. An empty holder or a ttl under a millisecond is refused
	// (CheckHeartbeat).
	Heartbeat(ctx context.Context, holder string, ttl time.Duration) ([]string, error)

	// Leave removes holder's entry at once, so that the next Heartbeat of
	// anyone no longer lists it: a replica that stops cleanly leaves
	// instead of staying counted live until its ttl passes. Leaving when
	// absent (never joined, expired, left already) is not an error. An
	// empty holder is refused (CheckLeave).
	Leave(ctx context.Context, holder string) error
}

// CheckHeartbeat is the argument check every Members store applies before
// it writes anything.
func CheckHeartbeat(holder string, ttl time.Duration) error {
	if holder == "" {
		return fmt.Errorf("onetick: heartbeat: holder is empty")
	}
	if ttl < time.Millisecond {
		return fmt.Errorf("onetick: heartbeat: ttl must be at least 1ms, got %s", ttl)
	}
	return nil
}

// CheckLeave is the argument check every Members store applies before it
// removes anything.
func CheckLeave(holder string) error {
	if holder == "" {
		return fmt.Errorf("onetick: leave: holder is empty")
	}
	return nil
}
