package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
)

// Jobs defined at run time:
//
//	<prefix>:jobs          hash: job name -> "since ms|set|definition (JSON)"
//	<prefix>:jobset:<set>  set of the names of one set
//	<prefix>:jobs:version  integer, increased by every change
//
// A removed job's last-fired slot stays in <prefix>:last.

var _ onetick.JobStore = (*Backend)(nil)

// applyJobsScript: KEYS jobs, jobset, version; ARGV set, dry ("1"/"0"),
// then name, definition pairs. Returns {version, added, changed, removed,
// unchanged} (lists of names), or {-2, name, owning set} when a name
// belongs to another set (nothing written), or {-1, key, reason, kind,
// value} for damage.
var applyJobsScript = goredis.NewScript(luaPrelude + `
local set, dry = ARGV[1], ARGV[2] == '1'
for i, k in ipairs({KEYS[1], KEYS[2]}) do
  local t = keytype(k)
  local want = 'hash'
  if i == 2 then want = 'set' end
  if t ~= 'none' and t ~= want then return {-1, k, 'holds a ' .. t .. ', not a ' .. want, 'type', ''} end
end
local names, defs, n = {}, {}, 0
for i = 3, #ARGV, 2 do
  n = n + 1
  names[n], defs[n] = ARGV[i], ARGV[i + 1]
end
-- Read the current definitions of the applied names, a thousand at a time.
local cur = {}
for i = 1, n, 1000 do
  local v = redis.call('HMGET', KEYS[1], unpack(names, i, math.min(i + 999, n)))
  for k = 1, #v do cur[i + k - 1] = v[k] end
end
local added, changed, unchanged, removed = {}, {}, {}, {}
local keep = {}
for i = 1, n do
  local c = cur[i]
  keep[names[i]] = true
  if c then
    local since, owner, def = string.match(c, '^(%d+)|([^|]*)|(.*)$')
    if owner == nil then
      return {-1, KEYS[1], 'definition of ' .. show(names[i]) .. ' does not parse', 'value', c}
    end
    if owner ~= set then return {-2, names[i], owner} end
    if def == defs[i] then unchanged[#unchanged + 1] = names[i] else changed[#changed + 1] = i end
  else
    added[#added + 1] = i
  end
end
local members = redis.call('SMEMBERS', KEYS[2])
for _, m in ipairs(members) do
  if not keep[m] then removed[#removed + 1] = m end
end
local version = tonumber(redis.call('GET', KEYS[3]) or '0') or 0
local out = function(idx)
  local r = {}
  for k, i in ipairs(idx) do r[k] = names[i] end
  return r
end
if dry or (#added + #changed + #removed == 0) then
  return {version, out(added), out(changed), removed, unchanged}
end
local now = fmtint(now_ms())
local kv = {}
local function flush()
  if #kv > 0 then redis.call('HSET', KEYS[1], unpack(kv)) end
  kv = {}
end
for _, idx in ipairs({added, changed}) do
  for _, i in ipairs(idx) do
    kv[#kv + 1] = names[i]
    kv[#kv + 1] = now .. '|' .. set .. '|' .. defs[i]
    if #kv >= 2000 then flush() end
  end
end
flush()
local add = {}
for _, i in ipairs(added) do
  add[#add + 1] = names[i]
  if #add >= 1000 then redis.call('SADD', KEYS[2], unpack(add)); add = {} end
end
if #add > 0 then redis.call('SADD', KEYS[2], unpack(add)) end
for i = 1, #removed, 1000 do
  local chunk = {unpack(removed, i, math.min(i + 999, #removed))}
  redis.call('HDEL', KEYS[1], unpack(chunk))
  redis.call('SREM', KEYS[2], unpack(chunk))
end
version = redis.call('INCR', KEYS[3])
return {version, out(added), out(changed), removed, unchanged}
`)

// removeJobsScript: KEYS jobs, jobset, version; ARGV names. Returns
// {version, removed names}.
var removeJobsScript = goredis.NewScript(luaPrelude + `
local removed = {}
for _, name in ipairs(ARGV) do
  if redis.call('SISMEMBER', KEYS[2], name) == 1 then
    redis.call('HDEL', KEYS[1], name)
    redis.call('SREM', KEYS[2], name)
    removed[#removed + 1] = name
  end
end
local version = tonumber(redis.call('GET', KEYS[3]) or '0') or 0
if #removed > 0 then version = redis.call('INCR', KEYS[3]) end
return {version, removed}
`)

func (b *Backend) jobKeys(set string) []string {
	p := b.opts.Prefix
	return []string{p + ":jobs", p + ":jobset:" + set, p + ":jobs:version"}
}

func strs(x any) []string {
	v, _ := x.([]any)
	out := make([]string, 0, len(v))
	for _, s := range v {
		if str, ok := s.(string); ok {
			out = append(out, str)
		}
	}
	sort.Strings(out)
	return out
}

// ApplyJobs implements onetick.JobStore.
func (b *Backend) ApplyJobs(ctx context.Context, set string, jobs []onetick.StoredJob, dryRun bool) (onetick.JobsDiff, error) {
	if err := onetick.ValidateJobSet(set); err != nil {
		return onetick.JobsDiff{}, err
	}
	dry := "0"
	if dryRun {
		dry = "1"
	}
	args := make([]any, 0, 2+2*len(jobs))
	args = append(args, set, dry)
	for _, j := range jobs {
		args = append(args, j.Name, string(j.Def))
	}
	v, err := applyJobsScript.Run(ctx, b.c, b.jobKeys(set), args...).Slice()
	if err != nil {
		return onetick.JobsDiff{}, err
	}
	switch n, _ := v[0].(int64); n {
	case -1:
		return onetick.JobsDiff{}, b.damageOf(v)
	case -2:
		name, _ := v[1].(string)
		owner, _ := v[2].(string)
		return onetick.JobsDiff{}, &onetick.InputError{Msg: fmt.Sprintf("job %q belongs to the set %q, not %q: remove it there first, or rename it", name, owner, set)}
	}
	version, _ := v[0].(int64)
	return onetick.JobsDiff{Version: version, Added: strs(v[1]), Changed: strs(v[2]), Removed: strs(v[3]),
		Unchanged: strs(v[4]), DryRun: dryRun}, nil
}

// RemoveJobs implements onetick.JobStore.
func (b *Backend) RemoveJobs(ctx context.Context, set string, names []string) (onetick.JobsDiff, error) {
	if err := onetick.ValidateJobSet(set); err != nil {
		return onetick.JobsDiff{}, err
	}
	args := make([]any, len(names))
	for i, n := range names {
		args[i] = n
	}
	if len(args) == 0 {
		return onetick.JobsDiff{}, nil
	}
	v, err := removeJobsScript.Run(ctx, b.c, b.jobKeys(set), args...).Slice()
	if err != nil {
		return onetick.JobsDiff{}, err
	}
	version, _ := v[0].(int64)
	return onetick.JobsDiff{Version: version, Removed: strs(v[1])}, nil
}

// StoredJobs implements onetick.JobStore: it scans the definitions and
// starts again if their version changed meanwhile.
func (b *Backend) StoredJobs(ctx context.Context) ([]onetick.StoredJob, int64, error) {
	keys := b.jobKeys("")
	for attempt := 0; ; attempt++ {
		v0, err := b.JobsVersion(ctx)
		if err != nil {
			return nil, 0, err
		}
		var out []onetick.StoredJob
		var bad onetick.DamageErrors
		iter := b.c.HScan(ctx, keys[0], 0, "", 10000).Iterator()
		for iter.Next(ctx) {
			name := iter.Val()
			if !iter.Next(ctx) {
				break
			}
			raw := iter.Val()
			since, rest, ok1 := strings.Cut(raw, "|")
			set, def, ok2 := strings.Cut(rest, "|")
			ms, err := strconv.ParseInt(since, 10, 64)
			if !ok1 || !ok2 || err != nil || !json.Valid([]byte(def)) {
				bad = append(bad, &onetick.DamageError{Key: keys[0], Field: name, Job: name, Kind: onetick.DamageValue,
					Value: raw, Repairable: true, Reason: "job definition does not parse"})
				continue
			}
			out = append(out, onetick.StoredJob{Set: set, Name: name, Def: json.RawMessage(def), Since: msTime(ms)})
		}
		if err := iter.Err(); err != nil {
			if isWrongType(err) {
				return nil, 0, b.wrongType(ctx, keys[0], "a hash")
			}
			return nil, 0, err
		}
		v1, err := b.JobsVersion(ctx)
		if err != nil {
			return nil, 0, err
		}
		if v1 != v0 && attempt < 5 {
			continue
		}
		sort.Slice(out, func(i, k int) bool { return out[i].Name < out[k].Name })
		if bad != nil {
			return out, v1, bad
		}
		return out, v1, nil
	}
}

// JobsVersion implements onetick.JobStore.
func (b *Backend) JobsVersion(ctx context.Context) (int64, error) {
	return b.versionOf(b.c.Get(ctx, b.jobKeys("")[2]))
}
