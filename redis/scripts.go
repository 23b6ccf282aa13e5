package redis

import goredis "github.com/redis/go-redis/v9"

// All scripts read the time from Redis itself (TIME), so the store's clock
// is the only one that decides expiry, term boundaries and early slots.
// Redis 5+ replicates scripts by effects, which makes TIME safe to use.
const luaNow = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
`

// acquireScript: KEYS leader, epoch, terms; ARGV holder, ttl ms, history length.
// Returns {1, epoch, now} when acquired, {0, current value, pttl, now} when held.
var acquireScript = goredis.NewScript(luaNow + `
local cur = redis.call('GET', KEYS[1])
local now = now_ms()
if cur then
  return {0, cur, redis.call('PTTL', KEYS[1]), now}
end
local ttl = tonumber(ARGV[2])
local epoch = redis.call('INCR', KEYS[2])
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. epoch, 'PX', ttl)
local head = redis.call('LINDEX', KEYS[3], 0)
if head then
  local h = cjson.decode(head)
  if not h['end'] then
    -- The previous term ended without a release: its lease expired.
    h['end'] = math.min(now, h['exp'] or now)
    h['reason'] = 'expired'
    redis.call('LSET', KEYS[3], 0, cjson.encode(h))
  end
end
redis.call('LPUSH', KEYS[3], cjson.encode({epoch = epoch, holder = ARGV[1], start = now, exp = now + ttl}))
redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[3]) - 1)
return {1, epoch, now}
`)

// renewScript: KEYS leader, terms; ARGV token, ttl ms, epoch.
// Compare-and-extend: returns the store time, or nil when the lease is not
// (any longer) this token's.
var renewScript = goredis.NewScript(luaNow + `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return false
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local now = now_ms()
local head = redis.call('LINDEX', KEYS[2], 0)
if head then
  local h = cjson.decode(head)
  if h['epoch'] == tonumber(ARGV[3]) then
    h['exp'] = now + tonumber(ARGV[2])
    redis.call('LSET', KEYS[2], 0, cjson.encode(h))
  end
end
return now
`)

// releaseScript: KEYS leader, terms; ARGV token, epoch, channel.
// Compare-and-delete, close the term, notify standbys. Returns 1 or 0.
var releaseScript = goredis.NewScript(luaNow + `
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
local now = now_ms()
local head = redis.call('LINDEX', KEYS[2], 0)
if head then
  local h = cjson.decode(head)
  if h['epoch'] == tonumber(ARGV[2]) then
    h['end'] = now
    h['reason'] = 'released'
    redis.call('LSET', KEYS[2], 0, cjson.encode(h))
  end
end
redis.call('PUBLISH', ARGV[3], ARGV[1])
return 1
`)

// leaderScript: KEYS leader. Returns {value or false, pttl}.
var leaderScript = goredis.NewScript(`
return {redis.call('GET', KEYS[1]), redis.call('PTTL', KEYS[1])}
`)

// claimScript claims a batch of ticks atomically.
//
// KEYS: leader, last-fired hash, terms. ARGV: token, tolerance ms, epoch,
// holder, tick-record key prefix, and the batch as MessagePack: an array of
// 8 values per tick: job, slot (integer), tick id, payload, retention ms
// (integer), maxlen (decimal string), stream, out-of-order (bool). Lua
// passes integer-valued numbers to Redis commands in full ("%.17g"), so
// slots reach XADD and HSET as exact decimal strings. (Tick-record keys and streams are not declared in
// KEYS, which single-server Redis allows; it is one reason Redis Cluster
// is not supported.)
//
// Per-tick records live as fields (tick id -> token of the claiming term)
// of hashes that bucket slots by the minute, "<prefix><minute>"; a bucket
// expires once the newest retention of its ticks has passed after the
// bucket's end, so every record lives at least its retention past its
// slot. Reading and writing them a thousand at a time leaves one command
// per tick: the XADD.
//
// Fencing first: if the lease is not this token's, nothing is written, the
// term is marked fenced and the script fails with FENCED. Then per tick:
// 3 (early) when the slot is beyond the store's time plus tolerance; 2
// (duplicate) when an in-order tick's slot is not after the job's
// last-fired slot, or its tick record exists, unless this same term wrote
// the record, which makes a retried claim answer 1 without appending
// again; otherwise the record is written, the entry appended and the
// answer is 1.
//
// Returns {store time ms, outcomes as a string of digits}.
var claimScript = goredis.NewScript(luaNow + `
local token = ARGV[1]
if redis.call('GET', KEYS[1]) ~= token then
  local epoch = tonumber(ARGV[3])
  local terms = redis.call('LRANGE', KEYS[3], 0, -1)
  for i, v in ipairs(terms) do
    local h = cjson.decode(v)
    if h['epoch'] == epoch then
      if h['reason'] ~= 'released' and h['reason'] ~= 'fenced' then
        h['reason'] = 'fenced'
        redis.call('LSET', KEYS[3], i - 1, cjson.encode(h))
      end
      break
    end
  end
  return redis.error_reply('FENCED lease superseded')
end
local now = now_ms()
local limit = now + tonumber(ARGV[2])
local epoch, holder, prefix = ARGV[3], ARGV[4], ARGV[5]
local d = cmsgpack.unpack(ARGV[6])
local BUCKET = 60000

-- Read, a thousand at a time, the last-fired slot of every job and the
-- record of every tick in the batch. (Counters instead of the # operator:
-- it is a binary search in Lua 5.1, and this loop runs per tick.)
local last, rec = {}, {}
local jobs, nj, seenJob = {}, 0, {}
local buckets = {}    -- bucket number -> {key, fields, nf, new, nn, expire}
local order, no = {}, 0
local tb = {}         -- tick index -> its bucket
local lastB, lastBk
local function readLast()
  local v = redis.call('HMGET', KEYS[2], unpack(jobs, 1, nj))
  for k = 1, nj do last[jobs[k]] = tonumber(v[k]) or -1 end
  nj = 0
end
local function readRecords(bk)
  local f = bk.fields
  local v = redis.call('HMGET', bk.key, unpack(f, 1, bk.nf))
  for k = 1, bk.nf do rec[f[k]] = v[k] end
  bk.nf = 0
end
for i = 1, #d, 8 do
  local job = d[i]
  if not seenJob[job] then
    seenJob[job] = true
    nj = nj + 1
    jobs[nj] = job
    if nj == 1000 then readLast() end
  end
  local b = math.floor(d[i + 1] / BUCKET)
  local bk = lastBk
  if b ~= lastB then
    bk = buckets[b]
    if not bk then
      bk = {key = prefix .. b, fields = {}, nf = 0, new = {}, nn = 0, expire = 0}
      buckets[b] = bk
      no = no + 1
      order[no] = bk
    end
    lastB, lastBk = b, bk
  end
  tb[i] = bk
  local nf = bk.nf + 1
  bk.fields[nf] = d[i + 2]
  bk.nf = nf
  local exp = (b + 1) * BUCKET + d[i + 4]
  if exp > bk.expire then bk.expire = exp end
  if nf == 1000 then readRecords(bk) end
end
if nj > 0 then readLast() end
for k = 1, no do
  if order[k].nf > 0 then readRecords(order[k]) end
  order[k].fields = nil
end

-- Claim. A job's slots arrive in order, so appending its moved last-fired
-- slots in order and writing them with HSET (later pairs win) keeps the
-- newest.
local out, nout = {}, 0
local moved, nm = {}, 0
for i = 1, #d, 8 do
  local job, slot, id = d[i], d[i + 1], d[i + 2]
  local ooo = d[i + 7]
  local r = rec[id]
  local res
  if slot > limit then
    res = '3'
  elseif r then
    if r == token then res = '1' else res = '2' end
  elseif (not ooo) and slot <= last[job] then
    res = '2'
  else
    rec[id] = token
    local bk = tb[i]
    local nn = bk.nn
    bk.new[nn + 1] = id
    bk.new[nn + 2] = token
    bk.nn = nn + 2
    if not ooo then
      last[job] = slot
      moved[nm + 1] = job
      moved[nm + 2] = slot
      nm = nm + 2
    end
    if d[i + 5] ~= '0' then
      redis.call('XADD', d[i + 6], 'MAXLEN', '~', d[i + 5], '*', 'job', job, 'slot', slot,
        'tick', id, 'epoch', epoch, 'replica', holder, 'payload', d[i + 3])
    else
      redis.call('XADD', d[i + 6], '*', 'job', job, 'slot', slot,
        'tick', id, 'epoch', epoch, 'replica', holder, 'payload', d[i + 3])
    end
    res = '1'
  end
  nout = nout + 1
  out[nout] = res
end

-- Write the records and the moved last-fired slots, a thousand at a time.
local function hset(key, kv, n)
  for k = 1, n, 2000 do
    redis.call('HSET', key, unpack(kv, k, math.min(k + 1999, n)))
  end
end
for k = 1, no do
  local bk = order[k]
  if bk.nn > 0 then
    hset(bk.key, bk.new, bk.nn)
    local ttl = redis.call('PTTL', bk.key)
    if ttl < 0 or now + ttl < bk.expire then
      redis.call('PEXPIREAT', bk.key, bk.expire)
    end
  end
end
hset(KEYS[2], moved, nm)
return {now, table.concat(out)}
`)
