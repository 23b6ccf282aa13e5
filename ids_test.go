package onetick_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/cron"
	"github.com/onetick/onetick/memory"
)

// Job names may contain ':'; a trigger's identity is "job:trigger:key".
// Before keys were restricted, triggering job "a" with the key
// "1796201640000" took the identity of the scheduled slot 1796201640000 of
// a job named "a:trigger", which was then refused as a duplicate and never
// ran. Now such a key is refused (bad input, nothing enqueued) and a
// trigger and a scheduled slot of those two jobs never share an identity.
func TestTriggerCannotTakeASlotsIdentity(t *testing.T) {
	ctx := context.Background()
	mem := memory.New(memory.Options{})
	every, err := cron.Parse("@every 1s", nil)
	if err != nil {
		t.Fatal(err)
	}
	ops := &onetick.Ops{Backend: mem, Jobs: []onetick.Job{{Name: "a", Schedule: every}, {Name: "a:trigger", Schedule: every}}}
	slot := onetick.SlotOf(time.Now().Add(-time.Minute).Truncate(time.Second))
	key := strings.TrimPrefix(onetick.TickID("", slot), ":")

	_, err = ops.Trigger(ctx, "a", key, "", onetick.Actor{Who: "t"})
	var in *onetick.InputError
	if !errors.As(err, &in) || !strings.Contains(in.Msg, "must not be a number") {
		t.Fatalf("trigger with a numeric key: %v, want an input error", err)
	}
	for _, k := range []string{"x:1", "-12", "a b", "\x1b[2J", strings.Repeat("k", onetick.MaxTriggerKey+1)} {
		if _, err := ops.Trigger(ctx, "a", k, "", onetick.Actor{Who: "t"}); !errors.As(err, &in) {
			t.Fatalf("trigger with key %q: %v, want an input error", k, err)
		}
	}
	res, err := ops.Trigger(ctx, "a", "n"+key, "", onetick.Actor{Who: "t"})
	if err != nil || !res.Enqueued {
		t.Fatalf("trigger: %+v, %v", res, err)
	}
	l, err := mem.Acquire(ctx, "r", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c, err := mem.Claim(ctx, l.Lease, []onetick.Tick{{Job: "a:trigger", Slot: slot, Stream: "s", Payload: "{}", Retention: time.Minute}})
	if err != nil || c.Outcomes[0] != onetick.Claimed {
		t.Fatalf("the scheduled slot of a:trigger after a trigger of a: %+v, %v; want claimed", c, err)
	}
	for range 100 {
		if k := onetick.NewTriggerKey(); onetick.ValidTriggerKey(k) != nil {
			t.Fatalf("NewTriggerKey gave %q: %v", k, onetick.ValidTriggerKey(k))
		}
	}
}

// Limits on who and why: bounded, no control characters; nothing changed
// when they are refused.
func TestActorLimits(t *testing.T) {
	ctx := context.Background()
	mem := memory.New(memory.Options{})
	every, _ := cron.Parse("@every 1s", nil)
	ops := &onetick.Ops{Backend: mem, Jobs: []onetick.Job{{Name: "j", Schedule: every}}}
	bad := []onetick.Actor{
		{Who: "t", Reason: strings.Repeat("r", onetick.MaxReason+1)},
		{Who: strings.Repeat("w", onetick.MaxWho+1), Reason: "r"},
		{Who: "t", Reason: "fine\r\nINFO forged line"},
		{Who: "t\x1b[2J", Reason: "r"},
		{Who: "t", Reason: "\xff"},
	}
	var in *onetick.InputError
	for _, a := range bad {
		if _, err := ops.Pause(ctx, "j", a); !errors.As(err, &in) {
			t.Fatalf("pause by %q for %q: %v, want an input error", onetick.Excerpt(a.Who), onetick.Excerpt(a.Reason), err)
		}
		if _, err := ops.Trigger(ctx, "j", "", "", a); !errors.As(err, &in) {
			t.Fatalf("trigger by %q: %v, want an input error", onetick.Excerpt(a.Who), err)
		}
	}
	if _, err := ops.Trigger(ctx, "j", "", `"`+strings.Repeat("p", onetick.MaxPayload)+`"`, onetick.Actor{Who: "t"}); !errors.As(err, &in) {
		t.Fatalf("trigger with an oversized payload: %v, want an input error", err)
	}
	ctl, _, err := mem.Controls(ctx)
	if err != nil || len(ctl) != 0 {
		t.Fatalf("controls after refused requests: %v, %v; want none", ctl, err)
	}
	if log, err := mem.ControlLog(ctx, 10); err != nil || len(log) != 0 {
		t.Fatalf("control log after refused requests: %v, %v; want empty", log, err)
	}
}

func TestExcerpt(t *testing.T) {
	for in, want := range map[string]string{
		"abc":                   `"abc"`,
		"a\x1bb":                `"a\x1bb"`,
		strings.Repeat("x", 70): `"` + strings.Repeat("x", 64) + `"... (70 bytes)`,
		strings.Repeat("é", 40): `"` + strings.Repeat("é", 32) + `"... (80 bytes)`,
	} {
		if got := onetick.Excerpt(in); got != want {
			t.Errorf("Excerpt(%q) = %s, want %s", in, got, want)
		}
	}
}

// FuzzTickID: every identity reads back as the job and slot or key it was
// made from, so two different ticks never share an identity.
func FuzzTickID(f *testing.F) {
	f.Add("a", int64(1796201640000), "1796201640000")
	f.Add("a:trigger", int64(5), "k")
	f.Add("x:1:trigger", int64(-3), "trigger")
	f.Fuzz(func(t *testing.T, job string, slot int64, key string) {
		if onetick.ValidJobName(job) != nil {
			return
		}
		id := onetick.TickID(job, onetick.Slot(slot))
		if r, err := onetick.ParseTickID(id); err != nil || r != (onetick.TickRef{Job: job, Slot: onetick.Slot(slot)}) {
			t.Fatalf("ParseTickID(%q) = %+v, %v; want job %q slot %d", id, r, err, job, slot)
		}
		if onetick.ValidTriggerKey(key) != nil {
			return
		}
		tid := onetick.TriggerID(job, key)
		if r, err := onetick.ParseTickID(tid); err != nil || r != (onetick.TickRef{Job: job, Key: key}) {
			t.Fatalf("ParseTickID(%q) = %+v, %v; want job %q key %q", tid, r, err, job, key)
		}
	})
}
