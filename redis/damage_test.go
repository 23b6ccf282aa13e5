package redis_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/onetick/onetick/backendtest"
	"github.com/onetick/onetick/redis"
)

// damage does to the real keys what an operator's mistake, a migration
// script or another application sharing the Redis would. What it
// overwrites it first keeps aside ("<key>:aside"), so fix can restore it
// as a backup would.
func damage(t *testing.T, b *redis.Backend, d backendtest.Damage) {
	t.Helper()
	ctx := context.Background()
	c := b.Client()
	p := b.Prefix()
	aside := func(key string) {
		if n, err := c.Exists(ctx, key).Result(); err != nil {
			t.Fatal(err)
		} else if n == 1 {
			if err := c.Rename(ctx, key, key+":aside").Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	wrongType := func(key string) {
		aside(key)
		if err := c.SAdd(ctx, key, "not", "what", "onetick", "keeps").Err(); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	switch d.Kind {
	case backendtest.LeaseWrongType:
		wrongType(p + ":leader")
	case backendtest.LeaseGarbage:
		aside(p + ":leader")
		err = c.Set(ctx, p+":leader", "not a lease", 0).Err()
	case backendtest.LeaseNoExpiry:
		aside(p + ":leader")
		err = c.Set(ctx, p+":leader", "someone|7", 0).Err()
	case backendtest.EpochWrongType:
		wrongType(p + ":epoch")
	case backendtest.EpochGarbage:
		aside(p + ":epoch")
		err = c.Set(ctx, p+":epoch", "seven", 0).Err()
	case backendtest.EpochDeleted:
		err = c.Del(ctx, p+":epoch").Err()
	case backendtest.EpochRolledBack:
		err = c.Set(ctx, p+":epoch", "1", 0).Err()
	case backendtest.HistoryGarbageEntry:
		err = c.LPush(ctx, p+":terms", "not json").Err()
	case backendtest.HistoryWrongType:
		wrongType(p + ":terms")
	case backendtest.HistoryDeleted:
		err = c.Del(ctx, p+":terms").Err()
	case backendtest.LastWrongType:
		aside(p + ":last")
		err = c.Set(ctx, p+":last", "not a hash", 0).Err()
	case backendtest.LastDeleted:
		err = c.Del(ctx, p+":last").Err()
	case backendtest.LastFieldGarbage:
		v, gerr := c.HGet(ctx, p+":last", d.Job).Result()
		if gerr == nil {
			err = c.HSet(ctx, p+":last:field-aside", d.Job, v).Err()
		}
		if err == nil {
			err = c.HSet(ctx, p+":last", d.Job, "garbage").Err()
		}
	case backendtest.StreamWrongType:
		aside(d.Stream)
		err = c.Set(ctx, d.Stream, "not a stream", 0).Err()
	case backendtest.RecordsWrongType:
		wrongType(p + ":ticks:" + strconv.FormatInt(int64(d.Slot)/60000, 10))
	case backendtest.PausedWrongType:
		wrongType(p + ":paused")
	case backendtest.PausedFieldGarbage:
		err = c.HSet(ctx, p+":paused", d.Job, "garbage").Err()
	default:
		t.Fatalf("unknown damage %v", d.Kind)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// fix restores what damage overwrote.
func fix(t *testing.T, b *redis.Backend, d backendtest.Damage) {
	t.Helper()
	ctx := context.Background()
	c := b.Client()
	p := b.Prefix()
	restore := func(key string) {
		if err := c.Del(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
		if n, _ := c.Exists(ctx, key+":aside").Result(); n == 1 {
			if err := c.Rename(ctx, key+":aside", key).Err(); err != nil {
				t.Fatal(err)
			}
		}
	}
	switch d.Kind {
	case backendtest.LeaseWrongType, backendtest.LeaseGarbage, backendtest.LeaseNoExpiry:
		restore(p + ":leader")
	case backendtest.EpochWrongType, backendtest.EpochGarbage:
		restore(p + ":epoch")
	case backendtest.HistoryGarbageEntry:
		if err := c.LRem(ctx, p+":terms", 0, "not json").Err(); err != nil {
			t.Fatal(err)
		}
	case backendtest.HistoryWrongType:
		restore(p + ":terms")
	case backendtest.LastWrongType:
		restore(p + ":last")
	case backendtest.LastFieldGarbage:
		v, err := c.HGet(ctx, p+":last:field-aside", d.Job).Result()
		if err == nil {
			err = c.HSet(ctx, p+":last", d.Job, v).Err()
		} else {
			err = c.HDel(ctx, p+":last", d.Job).Err()
		}
		if err != nil {
			t.Fatal(err)
		}
		c.HDel(ctx, p+":last:field-aside", d.Job)
	case backendtest.StreamWrongType:
		restore(d.Stream)
	case backendtest.RecordsWrongType:
		restore(p + ":ticks:" + strconv.FormatInt(int64(d.Slot)/60000, 10))
	case backendtest.PausedWrongType:
		restore(p + ":paused")
	case backendtest.PausedFieldGarbage:
		if err := c.HDel(ctx, p+":paused", d.Job).Err(); err != nil {
			t.Fatal(err)
		}
	}
}
