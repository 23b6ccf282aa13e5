package redis

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
)

// Inspect implements onetick.Doctor. It reads the lease, the epoch, the
// whole history, the last-fired slots of the given jobs, the type of every
// tick-record bucket (SCAN) and of every job's stream.
func (b *Backend) Inspect(ctx context.Context, streams map[string]string) ([]*onetick.DamageError, error) {
	var out []*onetick.DamageError
	add := func(err error) error {
		if ds := onetick.Damages(err); ds != nil {
			out = append(out, ds...)
			return nil
		}
		return err
	}
	if _, err := b.Leader(ctx); add(err) != nil {
		return nil, err
	}
	if err := b.inspectEpoch(ctx); add(err) != nil {
		return nil, err
	}
	if _, err := b.History(ctx, 1<<20); add(err) != nil {
		return nil, err
	}
	jobs := make([]string, 0, len(streams))
	for j := range streams {
		jobs = append(jobs, j)
	}
	sort.Strings(jobs)
	for i := 0; i < len(jobs); i += 10000 {
		if _, err := b.LastFired(ctx, jobs[i:min(i+10000, len(jobs))]); add(err) != nil {
			return nil, err
		}
	}
	if _, _, err := b.Controls(ctx); add(err) != nil {
		return nil, err
	}
	if _, err := b.ControlLog(ctx, 1000); add(err) != nil {
		return nil, err
	}
	if err := b.inspectBuckets(ctx); add(err) != nil {
		return nil, err
	}
	if err := b.inspectStreams(ctx, jobs, streams); add(err) != nil {
		return nil, err
	}
	if err := b.inspectLedger(ctx); add(err) != nil {
		return nil, err
	}
	return out, nil
}

// inspectLedger finds run-ledger keys of another type (ledger.go); the
// scripts leave a log of another type alone, so the ledger misses events
// until it is repaired.
func (b *Backend) inspectLedger(ctx context.Context) error {
	keys := []string{b.lg.log, b.lg.folded, b.lg.records, b.lg.spans}
	types, err := b.types(ctx, keys)
	if err != nil {
		return err
	}
	var bad onetick.DamageErrors
	for i, k := range keys {
		if want := b.expectedType(k); types[i] != want && types[i] != "none" {
			bad = append(bad, &onetick.DamageError{Key: k, Kind: onetick.DamageType, Repairable: true,
				Reason: "holds a " + types[i] + ", not a " + want + " of the run ledger"})
		}
	}
	if bad == nil && types[1] == "string" {
		if v, err := b.c.Get(ctx, b.lg.folded).Result(); err == nil {
			if _, ok := parseSlot(v); !ok {
				bad = append(bad, &onetick.DamageError{Key: b.lg.folded, Kind: onetick.DamageValue, Value: v, Repairable: true,
					Reason: fmt.Sprintf("value %q is not an integer", short(v))})
			}
		}
	}
	if bad != nil {
		return bad
	}
	return nil
}

func (b *Backend) inspectEpoch(ctx context.Context) error {
	v, err := b.c.Get(ctx, b.epoch).Result()
	switch {
	case errors.Is(err, goredis.Nil):
		return nil
	case isWrongType(err):
		return b.wrongType(ctx, b.epoch, "a string (integer)")
	case err != nil:
		return err
	}
	if _, ok := parseSlot(v); !ok {
		return &onetick.DamageError{Key: b.epoch, Kind: onetick.DamageValue, Value: v, Repairable: true,
			Reason: fmt.Sprintf("value %q is not an integer", short(v))}
	}
	return nil
}

// inspectBuckets finds tick-record buckets that hold another type than a
// hash.
func (b *Backend) inspectBuckets(ctx context.Context) error {
	var bad onetick.DamageErrors
	iter := b.c.Scan(ctx, 0, b.opts.Prefix+":ticks:*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		return err
	}
	types, err := b.types(ctx, keys)
	if err != nil {
		return err
	}
	for i, k := range keys {
		if types[i] != "hash" && types[i] != "none" {
			bad = append(bad, &onetick.DamageError{Key: k, Kind: onetick.DamageType, Repairable: true,
				Reason: "holds a " + types[i] + ", not a hash of tick records"})
		}
	}
	if bad != nil {
		return bad
	}
	return nil
}

// inspectStreams finds job streams whose key holds another type.
func (b *Backend) inspectStreams(ctx context.Context, jobs []string, streams map[string]string) error {
	byStream := map[string][]string{}
	var keys []string
	for _, j := range jobs {
		s := streams[j]
		if _, ok := byStream[s]; !ok {
			keys = append(keys, s)
		}
		byStream[s] = append(byStream[s], j)
	}
	types, err := b.types(ctx, keys)
	if err != nil {
		return err
	}
	var bad onetick.DamageErrors
	for i, k := range keys {
		if types[i] == "stream" || types[i] == "none" {
			continue
		}
		for _, j := range byStream[k] {
			bad = append(bad, &onetick.DamageError{Key: k, Job: j, Kind: onetick.DamageType,
				Reason: "holds a " + types[i] + ", not a stream; onetick does not touch it: delete or rename it, or give the job another stream"})
		}
	}
	if bad != nil {
		return bad
	}
	return nil
}

// types returns the TYPE of each key, pipelined.
func (b *Backend) types(ctx context.Context, keys []string) ([]string, error) {
	out := make([]string, 0, len(keys))
	for i := 0; i < len(keys); i += 1000 {
		pipe := b.c.Pipeline()
		cmds := make([]*goredis.StatusCmd, 0, 1000)
		for _, k := range keys[i:min(i+1000, len(keys))] {
			cmds = append(cmds, pipe.Type(ctx, k))
		}
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, err
		}
		for _, c := range cmds {
			out = append(out, c.Val())
		}
	}
	return out, nil
}

// Repair implements onetick.Doctor: it moves the damaged key, field or
// entry to "<prefix>:damaged:<store ms>:<what>", where it stays for the
// operator to look at.
func (b *Backend) Repair(ctx context.Context, d *onetick.DamageError, confirmed bool) (string, error) {
	if d == nil || !b.owned(d.Key) {
		return "", fmt.Errorf("%w: %s is not one of onetick's keys (prefix %q)", onetick.ErrNotRepairable, keyOf(d), b.opts.Prefix)
	}
	now, err := b.Time(ctx)
	if err != nil {
		return "", err
	}
	what := strings.TrimPrefix(d.Key, b.opts.Prefix+":")
	q := b.opts.Prefix + ":damaged:" + strconv.FormatInt(now.UnixMilli(), 10) + ":" + what
	var args []any
	switch {
	case d.Kind == onetick.DamageType:
		args = []any{"type", b.expectedType(d.Key)}
	case d.Kind == onetick.DamageNoExpiry:
		if !confirmed {
			return "", fmt.Errorf("%w without confirmation: %s has a lease value without expiry; wait one lease TTL to confirm no live leader renews it, then repair with confirmation", onetick.ErrNotRepairable, d.Key)
		}
		args = []any{"noexpiry", d.Value}
	case (d.Key == b.last || d.Key == b.paused || d.Key == b.control) && d.Field != "":
		args = []any{"field", d.Field, d.Value}
	case (d.Key == b.terms || d.Key == b.log) && d.Field != "":
		args = []any{"entry", d.Value}
	case d.Kind == onetick.DamageValue:
		args = []any{"value", d.Value}
	default:
		return "", fmt.Errorf("%w: unknown damage %+v", onetick.ErrNotRepairable, *d)
	}
	n, err := repairScript.Run(ctx, b.c, []string{d.Key, q}, args...).Int64()
	if err != nil {
		return "", err
	}
	if n != 1 {
		return "", fmt.Errorf("%s: the damage is no longer there as reported (fixed, or changed since): inspect again", keyOf(d))
	}
	return q, nil
}

func (b *Backend) expectedType(key string) string {
	switch key {
	case b.leader, b.epoch, b.version:
		return "string"
	case b.terms, b.log, b.lg.log:
		return "list"
	case b.lg.folded:
		return "string"
	}
	if strings.HasPrefix(key, b.lg.idx) {
		return "zset"
	}
	if strings.HasPrefix(key, b.opts.Prefix+":trigger:") {
		return "string"
	}
	return "hash" // last-fired, pause intervals, control info, tick-record buckets
}

func keyOf(d *onetick.DamageError) string {
	if d == nil {
		return "<nil>"
	}
	if d.Field != "" {
		return d.Key + " field " + d.Field
	}
	return d.Key
}
