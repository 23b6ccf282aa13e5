package postgres

import (
	"context"
	"time"
)

// Q exposes the schema templating to the tests, which write rows by hand.
func (b *Backend) Q(sql string) string { return b.q(sql) }

// ShardNum is the shard whose lease row b uses (0 on the store).
func (b *Backend) ShardNum() int { return b.shard }

// MigrateTo migrates b's schema up to version v only: a schema as an
// older onetick left it.
func (b *Backend) MigrateTo(ctx context.Context, v int) error { return b.migrateTo(ctx, v) }

// WaitListening waits until b's LISTEN connection is in place.
func (b *Backend) WaitListening(ctx context.Context) { b.hub.waitReady(ctx, 30*time.Second) }
