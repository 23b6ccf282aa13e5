package etcd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/etcd"
	"github.com/onetick/onetick/internal/etcdtest"
)

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// A claim larger than one transaction (etcd's --max-txn-ops 128) is
// split in order; when its term ends in the middle, the part before is
// claimed and the rest is not: the stream holds a prefix of the batch,
// in order, each tick once, and the job's last-fired slot is the
// prefix's last. The next leader goes on from there; a retry by the
// stale term is fenced.
func TestLargeClaimFencedMidway(t *testing.T) {
	t.Parallel()
	s := etcdtest.Start(t)
	for round := range 3 {
		b := open(t, s, etcd.Options{})
		defer b.Close()
		ctx := ctxT(t)
		g, err := b.Acquire(ctx, "a", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		s0 := onetick.SlotOf(time.Now().Add(-time.Hour).Truncate(time.Second))
		var ticks []onetick.Tick
		for i := range 1500 {
			ticks = append(ticks, onetick.Tick{Job: "j", Slot: s0 + onetick.Slot(i*1000), Stream: "big", Payload: "{}", Retention: time.Hour})
		}
		done := make(chan error, 1)
		go func() {
			_, err := b.Claim(ctx, g.Lease, ticks)
			done <- err
		}()
		if round > 0 { // round 0 claims it all
			// Wait until the first transactions are in, then end the term.
			for w := b.Client().Watch(ctx, b.Prefix()+"seq"); ; {
				if _, ok := <-w; !ok {
					t.Fatal("watch ended")
				}
				break
			}
			if err := b.Expire(ctx); err != nil {
				t.Fatal(err)
			}
		}
		err = <-done
		if err != nil && !errors.Is(err, onetick.ErrFenced) {
			t.Fatalf("round %d: claim: %v", round, err)
		}
		recs, rerr := b.ReadStream(ctx, "big")
		if rerr != nil {
			t.Fatal(rerr)
		}
		for i, r := range recs {
			if r.Slot != ticks[i].Slot || r.Epoch != g.Lease.Epoch {
				t.Fatalf("round %d: entry %d is %+v, want slot %s of epoch %d: not a prefix of the batch", round, i, r, ticks[i].Slot, g.Lease.Epoch)
			}
		}
		last, lerr := b.LastFired(ctx, []string{"j"})
		if lerr != nil || (len(recs) > 0 && last["j"] != recs[len(recs)-1].Slot) {
			t.Fatalf("round %d: last fired %v (%v) after %d entries", round, last, lerr, len(recs))
		}
		t.Logf("round %d: %d of %d ticks claimed before the term ended (%v)", round, len(recs), len(ticks), err)
		if round == 0 && (err != nil || len(recs) != len(ticks)) {
			t.Fatalf("uninterrupted claim: %d entries, %v", len(recs), err)
		}
		if err == nil {
			continue
		}
		if _, err := b.Claim(ctx, g.Lease, ticks); !errors.Is(err, onetick.ErrFenced) {
			t.Fatalf("round %d: retry by the stale term: %v, want ErrFenced", round, err)
		}
		g2, err := b.Acquire(ctx, "b", time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		res, err := b.Claim(ctx, g2.Lease, ticks)
		if err != nil {
			t.Fatal(err)
		}
		for i, o := range res.Outcomes {
			if want := map[bool]onetick.Outcome{true: onetick.Duplicate, false: onetick.Claimed}[i < len(recs)]; o != want {
				t.Fatalf("round %d: the new leader's tick %d: %v, want %v", round, i, o, want)
			}
		}
		all, _ := b.ReadStream(ctx, "big")
		if len(all) != len(ticks) {
			t.Fatalf("round %d: %d entries after the new leader's claim, want %d", round, len(all), len(ticks))
		}
	}
}

// A term whose holder stops renewing ends when etcd expires its lease:
// the watchers are woken without a release, and the next acquisition
// records the term as expired.
func TestExpiryWakesWatchers(t *testing.T) {
	t.Parallel()
	s := etcdtest.Start(t)
	b := open(t, s, etcd.Options{})
	defer b.Close()
	ctx := ctxT(t)
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := b.Watch(wctx)
	g, err := b.Acquire(ctx, "a", time.Second)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-w:
	case <-time.After(20 * time.Second):
		t.Fatal("no watch notification within 20s of a 1s lease left to expire")
	}
	info, err := b.Leader(ctx)
	if err != nil || info.Held {
		t.Fatalf("leader after expiry: %+v, %v", info, err)
	}
	if _, err := b.Renew(ctx, g.Lease, time.Second); !errors.Is(err, onetick.ErrLeaseLost) {
		t.Fatalf("renew after expiry: %v, want ErrLeaseLost", err)
	}
	if _, err := b.Acquire(ctx, "b", time.Second); err != nil {
		t.Fatal(err)
	}
	terms, err := b.History(ctx, 2)
	if err != nil || len(terms) != 2 || terms[1].Reason != onetick.EndExpired {
		t.Fatalf("history %+v, %v; want a's term expired", terms, err)
	}
}

// Bad options never reach etcd: Open without endpoints fails at once,
// and an unreachable endpoint fails within the dial timeout, naming it.
func TestOpenErrors(t *testing.T) {
	t.Parallel()
	if _, err := etcd.Open(context.Background(), etcd.Config{}, etcd.Options{}); err == nil {
		t.Fatal("open without endpoints succeeded")
	}
	ep := fmt.Sprintf("http://127.0.0.1:%d", 1)
	_, err := etcd.Open(context.Background(), etcd.Config{Endpoints: []string{ep}, DialTimeout: time.Second}, etcd.Options{})
	if err == nil {
		t.Fatalf("open of %s succeeded", ep)
	}
}

// A claim and a backfill of the same slots racing: each transaction
// compares what it read, so exactly one of them enqueues each tick, and
// the stream holds each tick once, whichever wins.
func TestClaimRacesEnqueue(t *testing.T) {
	t.Parallel()
	s := etcdtest.Start(t)
	b := open(t, s, etcd.Options{})
	defer b.Close()
	ctx := ctxT(t)
	g, err := b.Acquire(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	// A second connection on the same keys, as an operator's CLI.
	other, err := etcd.Open(ctx, etcd.Config{Endpoints: []string{s.Endpoint()}}, etcd.Options{Prefix: b.Prefix(), MaxTxnOps: etcdtest.MaxTxnOps})
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	s0 := onetick.SlotOf(time.Now().Add(-time.Hour).Truncate(time.Second))
	const n = 60
	claimed := make([]onetick.Outcome, n)
	enqueued := make([]onetick.Outcome, n)
	errs := make(chan error, 2)
	go func() {
		for i := range n {
			res, err := b.Claim(ctx, g.Lease, []onetick.Tick{{Job: "j", Slot: s0 + onetick.Slot(i*1000), Stream: "r", Payload: "{}", Retention: time.Hour}})
			if err != nil {
				errs <- err
				return
			}
			claimed[i] = res.Outcomes[0]
		}
		errs <- nil
	}()
	go func() {
		for i := range n {
			res, err := other.Enqueue(ctx, []onetick.Tick{{Job: "j", Slot: s0 + onetick.Slot(i*1000), Stream: "r", Payload: "{}",
				Retention: time.Hour, OutOfOrder: true}}, onetick.Actor{Who: "ann"})
			if err != nil {
				errs <- err
				return
			}
			enqueued[i] = res.Outcomes[0]
		}
		errs <- nil
	}()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	recs, err := b.ReadStream(ctx, "r")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for _, r := range recs {
		seen[r.Tick]++
	}
	for i := range n {
		id := onetick.TickID("j", s0+onetick.Slot(i*1000))
		wins := 0
		for _, o := range []onetick.Outcome{claimed[i], enqueued[i]} {
			if o == onetick.Claimed {
				wins++
			} else if o != onetick.Duplicate {
				t.Fatalf("tick %s: outcome %v", id, o)
			}
		}
		if wins != 1 || seen[id] != 1 {
			t.Fatalf("tick %s: claim %v, backfill %v, %d entries; want one winner and one entry", id, claimed[i], enqueued[i], seen[id])
		}
	}
}

// With etcd's authentication on, the backend logs in with its username
// and password (etcd RBAC) and works; a wrong password is refused at
// Open, and the error does not show it.
func TestAuth(t *testing.T) {
	t.Parallel()
	s := etcdtest.Start(t)
	ctx := ctxT(t)
	c := s.Client(t)
	const pw = "etcd-pw-5c1e"
	if _, err := c.UserAdd(ctx, "root", pw); err != nil {
		t.Fatal(err)
	}
	if _, err := c.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	b, err := etcd.Open(ctx, etcd.Config{Endpoints: []string{s.Endpoint()}, Username: "root", Password: pw}, etcd.Options{Prefix: etcdtest.Prefix()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	g, err := b.Acquire(ctx, "a", 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	res, err := b.Claim(ctx, g.Lease, []onetick.Tick{{Job: "j", Slot: onetick.SlotOf(time.Now().Add(-time.Minute).Truncate(time.Second)),
		Stream: "s", Payload: "{}", Retention: time.Minute}})
	if err != nil || res.Outcomes[0] != onetick.Claimed {
		t.Fatalf("claim with authentication: %+v, %v", res, err)
	}
	const wrong = "not-the-pw-77"
	_, err = etcd.Open(ctx, etcd.Config{Endpoints: []string{s.Endpoint()}, Username: "root", Password: wrong, DialTimeout: 5 * time.Second}, etcd.Options{})
	if err == nil || strings.Contains(err.Error(), wrong) {
		t.Fatalf("open with a wrong password: %v; want a refusal without the password", err)
	}
}
