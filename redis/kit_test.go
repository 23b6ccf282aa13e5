package redis_test

import (
	"context"
	"errors"
	"strconv"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/backendtest"
	"github.com/onetick/onetick/internal/redistest"
	"github.com/onetick/onetick/internal/storekit"
	"github.com/onetick/onetick/redis"
)

// The kit's table of cases on a real Redis: each case's state is written
// into the keys, then the real claim, pause and resume scripts run, and
// their answers and writes must be the kit's. The Lua keeps its own copy
// of the rules; this is what ties it to internal/storekit.

func TestKitClaimCases(t *testing.T) {
	srv := redistest.Start(t)
	ctx := context.Background()
	for _, c := range storekit.ClaimCases() {
		t.Run(c.Name, func(t *testing.T) {
			b := harness(t, srv).New(t).(*redis.Backend)
			defer b.Close()
			lease, tick, err := c.Start(ctx, b)
			if err != nil {
				t.Fatal(err)
			}
			own, slot := lease.Token(), tick.Slot
			rc, p := b.Client(), b.Prefix()
			bucket := p + ":ticks:" + strconv.FormatInt(int64(slot)/60000, 10)
			set := func(key, field, value string) {
				if err := rc.HSet(ctx, key, field, value).Err(); err != nil {
					t.Fatal(err)
				}
			}
			if c.Record != storekit.NoRecord {
				set(bucket, tick.ID(), c.Record.Token(own))
			}
			if c.HasLast {
				set(p+":last", "j", strconv.FormatInt(int64(slot+c.LastDelta), 10))
			}
			if c.Paused {
				set(p+":paused", "j", strconv.FormatInt(int64(slot)-1000, 10)+":")
			}
			if c.JobDamaged {
				damage(t, b, backendtest.Damage{Kind: backendtest.LastFieldGarbage, Job: "j"})
			}
			if c.StreamDamaged {
				damage(t, b, backendtest.Damage{Kind: backendtest.StreamWrongType, Stream: "s"})
			}
			if c.RecordDamaged {
				damage(t, b, backendtest.Damage{Kind: backendtest.RecordsWrongType, Slot: slot})
			}
			res, err := b.Claim(ctx, lease, []onetick.Tick{tick})
			if err != nil {
				t.Fatal(err)
			}
			got := storekit.Got{Outcome: res.Outcomes[0]}
			if !c.RecordDamaged {
				got.Record = hget(t, rc, bucket, tick.ID())
			}
			if !c.JobDamaged {
				last, err := strconv.ParseInt(hget(t, rc, p+":last", "j"), 10, 64)
				got.Moved = c.Moved(tick, onetick.Slot(last), err == nil)
			}
			if !c.StreamDamaged {
				n, err := rc.XLen(ctx, "s").Result()
				if err != nil {
					t.Fatal(err)
				}
				got.Appended = int(n)
			}
			if err := c.Check(own, got); err != nil {
				t.Error(err)
			}
			if (res.Outcomes[0] == onetick.Broken) != (res.Damaged[0] != nil) {
				t.Errorf("outcome %v with damage %v", res.Outcomes[0], res.Damaged[0])
			}
		})
	}
}

// hget is a hash field's value, "" when it has none.
func hget(t *testing.T, rc goredis.UniversalClient, key, field string) string {
	t.Helper()
	v, err := rc.HGet(context.Background(), key, field).Result()
	if err != nil && !errors.Is(err, goredis.Nil) {
		t.Fatal(err)
	}
	return v
}

func TestKitPauseCases(t *testing.T) {
	srv := redistest.Start(t)
	for _, pc := range storekit.PauseCases() {
		t.Run(pc.Name, func(t *testing.T) {
			b := harness(t, srv).New(t).(*redis.Backend)
			defer b.Close()
			if err := pc.Verify(context.Background(), b, nil); err != nil {
				t.Error(err)
			}
		})
	}
}
