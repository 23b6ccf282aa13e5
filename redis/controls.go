package redis

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/internal/storekit"
)

func (b *Backend) controlKeys() []string {
	return []string{b.paused, b.control, b.log, b.version}
}

// Pause implements onetick.Controller.
func (b *Backend) Pause(ctx context.Context, job string, a onetick.Actor) (onetick.JobControl, error) {
	return b.pauseOrResume(ctx, pauseScript, job, a)
}

// Resume implements onetick.Controller.
func (b *Backend) Resume(ctx context.Context, job string, a onetick.Actor) (onetick.JobControl, error) {
	return b.pauseOrResume(ctx, resumeScript, job, a)
}

func (b *Backend) pauseOrResume(ctx context.Context, s *goredis.Script, job string, a onetick.Actor) (onetick.JobControl, error) {
	v, err := s.Run(ctx, b.c, b.controlKeys(), job, a.Who, a.Reason, storekit.MaxIntervals).Slice()
	if err != nil {
		return onetick.JobControl{}, err
	}
	n, _ := v[0].(int64)
	if n == -1 {
		return onetick.JobControl{}, b.damageOf(v)
	}
	ivs, _ := v[1].(string)
	iv, ok := parseIntervals(ivs)
	if !ok && ivs != "" {
		return onetick.JobControl{}, fmt.Errorf("redis: pause intervals %q do not parse", ivs)
	}
	at, _ := v[2].(int64)
	c := onetick.JobControl{Actor: a, At: msTime(at), Intervals: iv, Changed: n == 1}
	c.Paused = len(iv) > 0 && iv[len(iv)-1].Until.IsZero()
	return c, nil
}

// parseIntervals parses "since:until,..." as the scripts write it.
func parseIntervals(s string) ([]onetick.PauseInterval, bool) {
	if s == "" {
		return nil, false
	}
	var out []onetick.PauseInterval
	for _, part := range strings.Split(s, ",") {
		a, u, ok := strings.Cut(part, ":")
		since, err := strconv.ParseInt(a, 10, 64)
		if !ok || err != nil || since < 0 {
			return nil, false
		}
		p := onetick.PauseInterval{Since: msTime(since)}
		if u != "" {
			until, err := strconv.ParseInt(u, 10, 64)
			if err != nil || until < 0 {
				return nil, false
			}
			p.Until = msTime(until)
		}
		out = append(out, p)
	}
	return out, true
}

type controlJSON struct {
	Paused bool   `json:"paused"`
	Who    string `json:"who"`
	Reason string `json:"reason"`
	At     int64  `json:"at"`
}

// Controls implements onetick.Controller. Damaged entries are left out
// and returned as DamageErrors with the rest.
func (b *Backend) Controls(ctx context.Context) (map[string]onetick.JobControl, int64, error) {
	pipe := b.c.Pipeline()
	pc := pipe.HGetAll(ctx, b.paused)
	cc := pipe.HGetAll(ctx, b.control)
	vc := pipe.Get(ctx, b.version)
	_, _ = pipe.Exec(ctx)
	var bad onetick.DamageErrors
	paused, err := pc.Result()
	if isWrongType(err) {
		return nil, 0, b.wrongType(ctx, b.paused, "a hash")
	} else if err != nil {
		return nil, 0, err
	}
	info, err := cc.Result()
	if isWrongType(err) {
		bad = append(bad, b.wrongType(ctx, b.control, "a hash"))
		info = nil
	} else if err != nil {
		return nil, 0, err
	}
	version, err := b.versionOf(vc)
	if err != nil {
		return nil, 0, err
	}
	out := make(map[string]onetick.JobControl, len(paused))
	for job, s := range paused {
		iv, ok := parseIntervals(s)
		if !ok {
			bad = append(bad, &onetick.DamageError{Key: b.paused, Field: job, Job: job, Kind: onetick.DamageValue, Value: s,
				Repairable: true, Reason: fmt.Sprintf("pause intervals %q do not parse", short(s))})
			continue
		}
		c := onetick.JobControl{Intervals: iv, Paused: iv[len(iv)-1].Until.IsZero()}
		if raw, ok := info[job]; ok {
			var cj controlJSON
			if json.Unmarshal([]byte(raw), &cj) == nil {
				c.Actor = onetick.Actor{Who: cj.Who, Reason: cj.Reason}
				c.At = msTime(cj.At)
			}
		}
		out[job] = c
	}
	if bad != nil {
		return out, version, bad
	}
	return out, version, nil
}

func (b *Backend) versionOf(c *goredis.StringCmd) (int64, error) {
	s, err := c.Result()
	switch {
	case errors.Is(err, goredis.Nil):
		return 0, nil
	case isWrongType(err):
		return 0, &onetick.DamageError{Key: b.version, Kind: onetick.DamageType, Repairable: true, Reason: "holds another type than a string (integer)"}
	case err != nil:
		return 0, err
	}
	n, perr := strconv.ParseInt(s, 10, 64)
	if perr != nil {
		return 0, &onetick.DamageError{Key: b.version, Kind: onetick.DamageValue, Value: s, Repairable: true,
			Reason: fmt.Sprintf("value %q is not an integer", short(s))}
	}
	return n, nil
}

// ControlsVersion implements onetick.Controller.
func (b *Backend) ControlsVersion(ctx context.Context) (int64, error) {
	return b.versionOf(b.c.Get(ctx, b.version))
}

// Enqueue implements onetick.Controller.
func (b *Backend) Enqueue(ctx context.Context, ticks []onetick.Tick, a onetick.Actor) (onetick.ClaimResult, error) {
	if len(ticks) == 0 {
		return onetick.ClaimResult{}, nil
	}
	m, err := storekit.Manual(ticks, a)
	if err != nil {
		return onetick.ClaimResult{}, fmt.Errorf("redis: %w", err)
	}
	keys := []string{b.log, b.epoch}
	var relayed []string // asynq's task keys and asynq:queues, declared after the pairs
	var p packer
	p.b = make([]byte, 0, 128*len(ticks))
	p.array(8 * len(ticks))
	for _, t := range ticks {
		rkey := b.opts.Prefix + ":ticks:" + strconv.FormatInt(int64(t.Slot)/60000, 10)
		if m.Trigger() {
			rkey = b.opts.Prefix + ":trigger:" + t.ID()
		}
		if t.Relay != nil && t.Relay.Kind == onetick.RelayAsynq {
			ak := asynqRelayKeys(*t.Relay, t.ID())
			keys = append(keys, rkey, ak[1])
			relayed = append(relayed, ak[0], ak[2])
		} else {
			keys = append(keys, rkey, t.Stream)
		}
		p.str(t.ID())
		p.uint(uint64(max(t.Slot, 0)))
		p.str(t.Payload)
		p.uint(uint64(max(t.Retention.Milliseconds(), 1)))
		p.int(t.MaxLen)
		p.str(m.Kind)
		p.str(t.Version)
		p.relay(t, m.Kind)
	}
	keys = append(keys, relayed...)
	keys = append(keys, b.lg.log)
	v, err := enqueueScript.Run(ctx, b.c, keys, a.Who, a.Reason, b.opts.ClockTolerance.Milliseconds(), m.Kind, m.Job,
		m.Detail(ticks), p.b, b.ledgerFlag()).Slice()
	if err != nil {
		return onetick.ClaimResult{}, err
	}
	if n, ok := v[0].(int64); ok && n == -1 {
		return onetick.ClaimResult{}, b.damageOf(v)
	}
	now, _ := v[0].(int64)
	outs, _ := v[1].(string)
	if len(outs) != len(ticks) {
		return onetick.ClaimResult{}, fmt.Errorf("redis: enqueue returned %d outcomes for %d ticks", len(outs), len(ticks))
	}
	return b.result(now, outs, v[2], v[3], ticks), nil
}

// result decodes a claim's or enqueue's outcomes and damages.
func (b *Backend) result(now int64, outs string, dmgv, brkv any, ticks []onetick.Tick) onetick.ClaimResult {
	res := onetick.ClaimResult{StoreTime: msTime(now), Outcomes: make([]onetick.Outcome, len(ticks))}
	dmg, _ := dmgv.([]any)
	brk, _ := brkv.([]any)
	nb := 0
	for i := range outs {
		res.Outcomes[i] = onetick.Outcome(outs[i] - '0')
		if res.Outcomes[i] != onetick.Broken {
			continue
		}
		if res.Damaged == nil {
			res.Damaged = map[int]*onetick.DamageError{}
		}
		d := &onetick.DamageError{Reason: "damaged state (no detail)"}
		if nb < len(brk) {
			if k, ok := brk[nb].(int64); ok && k >= 1 && int(5*k) <= len(dmg) {
				field, _ := dmg[5*k-4].(string)
				d = b.damageAt([]any{dmg[5*k-5], dmg[5*k-3], dmg[5*k-2], dmg[5*k-1]}, 0, field)
			}
		}
		nb++
		d.Job = ticks[i].Job
		res.Damaged[i] = d
	}
	return res
}

type recordJSON struct {
	Action string `json:"action"`
	Job    string `json:"job"`
	Who    string `json:"who"`
	Reason string `json:"reason"`
	At     int64  `json:"at"`
	Detail string `json:"detail"`
}

// ControlLog implements onetick.Controller.
func (b *Backend) ControlLog(ctx context.Context, n int) ([]onetick.ControlRecord, error) {
	if n <= 0 {
		return nil, nil
	}
	raw, err := b.c.LRange(ctx, b.log, 0, int64(n-1)).Result()
	if isWrongType(err) {
		return nil, b.wrongType(ctx, b.log, "a list")
	} else if err != nil {
		return nil, err
	}
	out := make([]onetick.ControlRecord, 0, len(raw))
	var bad onetick.DamageErrors
	for i, r := range raw {
		var rj recordJSON
		if err := json.Unmarshal([]byte(r), &rj); err != nil || rj.Action == "" {
			bad = append(bad, &onetick.DamageError{Key: b.log, Field: strconv.Itoa(i), Kind: onetick.DamageValue, Value: r,
				Repairable: true, Reason: fmt.Sprintf("entry %q is not a control record; skipped", short(r))})
			continue
		}
		out = append(out, onetick.ControlRecord{Action: rj.Action, Job: rj.Job, Who: rj.Who, Reason: rj.Reason,
			At: msTime(rj.At), Detail: rj.Detail})
	}
	if bad != nil {
		return out, bad
	}
	return out, nil
}
