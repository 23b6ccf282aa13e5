package redis

import goredis "github.com/redis/go-redis/v9"

// The worker store's scripts. Every key a script touches arrives in KEYS:
// the group's own keys (derived from the backend's prefix) and the jobs'
// streams and markers, so that a Redis Cluster deployment only needs a
// hash tag shared by the prefix and the stream keys.
//
// Ownership is the group's pending entries list: an entry is this
// consumer's while XPENDING shows it delivered to the consumer. Every
// settling write checks that first, in the same script.
//
// A marker token is "<stream>\n<entry id>": the marker belongs to a stream
// entry, and so to whichever consumer owns that entry. In-flight records
// are members "<job>\n<token>" of a sorted set scored by their expiry.
const luaWorkerLib = luaPrelude + `
local function pending(stream, group, id, consumer)
  local p = redis.pcall('XPENDING', stream, group, id, id, 1, consumer)
  if type(p) ~= 'table' or p.err or #p == 0 then return nil end
  return tonumber(p[1][4])
end

local function release_markers(run, wait, tok, job, channel)
  if redis.call('GET', run) == tok then
    redis.call('DEL', run)
    redis.call('PUBLISH', channel, job)
  end
  if redis.call('GET', wait) == tok then
    redis.call('DEL', wait)
  end
end

local function dead(deadkey, counts, last, now, consumer, stream, id, job, tick, slot, epoch, replica, payload, attempt, deliveries, err)
  redis.call('XADD', deadkey, '*', 'job', job, 'tick', tick, 'slot', slot, 'epoch', epoch, 'replica', replica,
    'payload', payload, 'stream', stream, 'entry', id, 'attempts', attempt, 'deliveries', deliveries,
    'error', err, 'consumer', consumer, 'at', now)
  redis.call('HINCRBY', counts, job, 1)
  redis.call('HSET', last, job, 'dead|' .. now .. '|' .. tick)
end
`

// wFetchScript delivers up to max new entries of the streams in KEYS to
// consumer (XREADGROUP, creating the group at the start of a stream that
// has none), acknowledging entries addressed to another group.
//
// ARGV: group, consumer, max. Returns {entries, tails}: entries as
// {stream index, id, fields}; tails[i] is the stream's newest entry id
// when the stream had no more new entries for the group (so a blocking
// XREAD from there wakes on the next append), "" when it may have more or
// was not visited.
var wFetchScript = goredis.NewScript(`
local g, c, max = ARGV[1], ARGV[2], tonumber(ARGV[3])
local out, tails, n = {}, {}, 0
for i, k in ipairs(KEYS) do
  tails[i] = ''
  if n < max then
    local want = max - n
    local r = redis.pcall('XREADGROUP', 'GROUP', g, c, 'COUNT', want, 'STREAMS', k, '>')
    if type(r) == 'table' and r.err then
      if not string.find(r.err, 'NOGROUP', 1, true) then return redis.error_reply(r.err) end
      redis.call('XGROUP', 'CREATE', k, g, '0', 'MKSTREAM')
      r = redis.call('XREADGROUP', 'GROUP', g, c, 'COUNT', want, 'STREAMS', k, '>')
    end
    local got = 0
    if r then
      for _, e in ipairs(r[1][2]) do
        got = got + 1
        local f, grp = e[2], nil
        for j = 1, #f, 2 do
          if f[j] == 'group' then grp = f[j + 1] end
        end
        if grp and grp ~= g then
          redis.call('XACK', k, g, e[1])
        else
          n = n + 1
          out[n] = {i, e[1], f}
        end
      end
    end
    if got < want then
      local last = redis.call('XREVRANGE', k, '+', '-', 'COUNT', 1)
      if last[1] then tails[i] = last[1][1] else tails[i] = '0-0' end
    end
  end
end
return {out, tails}
`)

// wReclaimScript takes over up to max entries of the streams in KEYS that
// have been idle for at least idle ms (XAUTOCLAIM, which counts a
// delivery). ARGV: group, consumer, idle ms, max. Returns entries as
// {stream index, id, fields, delivery count}.
var wReclaimScript = goredis.NewScript(`
local g, c, idle, max = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local out, n = {}, 0
for i, k in ipairs(KEYS) do
  if n >= max then break end
  local cursor = '0-0'
  repeat
    local r = redis.pcall('XAUTOCLAIM', k, g, c, idle, cursor, 'COUNT', max - n)
    if type(r) == 'table' and r.err then
      if string.find(r.err, 'NOGROUP', 1, true) then break end
      return redis.error_reply(r.err)
    end
    cursor = r[1]
    for _, e in ipairs(r[2]) do
      if e and e[2] then
        local p = redis.call('XPENDING', k, g, e[1], e[1], 1)
        n = n + 1
        out[n] = {i, e[1], e[2], p[1][4]}
      end
    end
  until cursor == '0-0' or n >= max
end
return out
`)

// wBeginScript admits deliveries (see worker.Store.Begin).
//
// KEYS: running, last, dead, dead counts, then per start: stream, done
// bucket, run marker, waiter slot. ARGV: consumer, group, hold ms, then
// per start 10 values: id, job, tick, overlap, max deliveries, slot,
// epoch, replica, payload, attempt. Returns {now, codes, delivery counts}
// with one code per start: R run, W wait, D skipped done, S skipped
// overlap, X dead (delivery limit), L not owned.
var wBeginScript = goredis.NewScript(luaWorkerLib + `
local c, g, hold = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = now_ms()
local codes, counts = {}, {}
local nitems = (#ARGV - 3) / 10
for i = 1, nitems do
  local a, k = 3 + (i - 1) * 10, 4 + (i - 1) * 4
  local stream, done, run, wait = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4]
  local id, job, tick, overlap, maxd = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], tonumber(ARGV[a + 5])
  local count = pending(stream, g, id, c)
  local code
  if not count then
    code, count = 'L', 0
  elseif redis.call('HEXISTS', done, tick) == 1 then
    redis.call('XACK', stream, g, id)
    code = 'D'
  elseif maxd > 0 and count > maxd then
    dead(KEYS[3], KEYS[4], KEYS[2], now, c, stream, id, job, tick, ARGV[a + 6], ARGV[a + 7], ARGV[a + 8],
      ARGV[a + 9], ARGV[a + 10], count,
      'delivery limit: delivered ' .. count .. ' times without a result (max_deliveries ' .. maxd .. ')')
    redis.call('XACK', stream, g, id)
    code = 'X'
  else
    local tok = stream .. '\n' .. id
    code = 'R'
    if overlap ~= 'allow' then
      local cur = redis.call('GET', run)
      if (not cur) or cur == tok then
        redis.call('SET', run, tok, 'PX', hold)
        if redis.call('GET', wait) == tok then redis.call('DEL', wait) end
      else
        code = 'S'
        if overlap == 'queue' then
          local w = redis.call('GET', wait)
          if (not w) or w == tok then
            redis.call('SET', wait, tok, 'PX', hold)
            code = 'W'
          end
        end
      end
    end
    if code == 'R' then
      redis.call('ZADD', KEYS[1], now + hold, job .. '\n' .. tok)
    elseif code == 'S' then
      redis.call('XACK', stream, g, id)
      redis.call('HSET', KEYS[2], job, 'skipped_overlap|' .. now .. '|' .. tick)
    end
  end
  codes[i] = code
  counts[i] = count
end
return {now, table.concat(codes), counts}
`)

// wHeartbeatScript keeps held entries (see worker.Store.Heartbeat): XCLAIM
// to the owner itself with JUSTID resets the idle time and, unlike a
// delivery, does not increment the delivery counter.
//
// KEYS: running, then per hold: stream, marker (run marker or waiter slot;
// ignored without one). ARGV: consumer, group, hold ms, then per hold: id,
// job, marker kind (n, r, w). Returns the 1-based indexes of lost holds.
var wHeartbeatScript = goredis.NewScript(luaWorkerLib + `
local c, g, hold = ARGV[1], ARGV[2], tonumber(ARGV[3])
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
local lost = {}
local nitems = (#ARGV - 3) / 3
for i = 1, nitems do
  local a, k = 3 + (i - 1) * 3, 1 + (i - 1) * 2
  local stream, marker = KEYS[k + 1], KEYS[k + 2]
  local id, job, kind = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local tok = stream .. '\n' .. id
  if not pending(stream, g, id, c) then
    lost[#lost + 1] = i
  else
    redis.call('XCLAIM', stream, g, c, 0, id, 'JUSTID')
    if kind ~= 'n' and redis.call('GET', marker) ~= tok then
      lost[#lost + 1] = i
    else
      if kind ~= 'n' then redis.call('PEXPIRE', marker, hold) end
      redis.call('ZADD', KEYS[1], 'XX', now + hold, job .. '\n' .. tok)
    end
  end
end
return lost
`)

// wFinishScript settles deliveries (see worker.Store.Finish).
//
// KEYS: running, last, retries, dead, dead counts, then per finish:
// stream, done bucket, run marker, waiter slot. ARGV: consumer, group,
// release channel, then per finish 12 values: kind (d done, r retry, x
// dead, g give back), id, job, tick, slot, epoch, replica, payload,
// attempt, error, retention or delay ms, retry member. Returns a string
// with 1 (owned) or 0 per finish.
//
// A done record is field tick of a bucket hash per minute of slots,
// "<entry id>|<consumer>|<store ms>"; the bucket expires after its last
// record's retention. A retry is a member of the retries sorted set,
// scored by its due time; the member, built by the caller, is the JSON of
// the next attempt's entry.
var wFinishScript = goredis.NewScript(luaWorkerLib + `
local c, g, channel = ARGV[1], ARGV[2], ARGV[3]
local now = now_ms()
local out = {}
local nitems = (#ARGV - 3) / 12
for i = 1, nitems do
  local a, k = 3 + (i - 1) * 12, 5 + (i - 1) * 4
  local stream, done, run, wait = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4]
  local kind, id, job, tick = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4]
  local num = tonumber(ARGV[a + 11])
  local count = pending(stream, g, id, c)
  if not count then
    out[i] = '0'
    if kind == 'd' then
      local v = redis.call('HGET', done, tick)
      local mine = id .. '|' .. c .. '|'
      if v and string.sub(v, 1, #mine) == mine then out[i] = '1' end
    end
  else
    out[i] = '1'
    local tok = stream .. '\n' .. id
    release_markers(run, wait, tok, job, channel)
    redis.call('ZREM', KEYS[1], job .. '\n' .. tok)
    if kind == 'g' then
      -- Owned by no live consumer and idle for a very long time: any
      -- consumer may take it over now, and the old owner's heartbeat
      -- cannot refresh it.
      redis.call('XCLAIM', stream, g, 'onetick:released', 0, id, 'IDLE', 1000000000, 'JUSTID')
    else
      if kind == 'd' then
        redis.call('HSET', done, tick, id .. '|' .. c .. '|' .. now)
        local bucket_end = (math.floor(tonumber(ARGV[a + 5]) / 60000) + 1) * 60000
        local exp = math.max(bucket_end, now) + num
        local ttl = redis.call('PTTL', done)
        if ttl < 0 or now + ttl < exp then redis.call('PEXPIREAT', done, exp) end
        redis.call('HSET', KEYS[2], job, 'succeeded|' .. now .. '|' .. tick)
      elseif kind == 'r' then
        redis.call('ZADD', KEYS[3], now + num, ARGV[a + 12])
        redis.call('HSET', KEYS[2], job, 'retried|' .. now .. '|' .. tick)
      elseif kind == 'x' then
        dead(KEYS[4], KEYS[5], KEYS[2], now, c, stream, id, job, tick, ARGV[a + 5], ARGV[a + 6], ARGV[a + 7],
          ARGV[a + 8], ARGV[a + 9], count, ARGV[a + 10])
      end
      redis.call('XACK', stream, g, id)
    end
  end
end
return table.concat(out)
`)

// wDueScript lists up to ARGV[1] retries due by the store's clock.
// KEYS: retries. Returns {now, ms until the first retry not listed (-1:
// none), members}.
var wDueScript = goredis.NewScript(luaPrelude + `
local now = now_ms()
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[1]))
local next = -1
local first = redis.call('ZRANGE', KEYS[1], #due, #due, 'WITHSCORES')
if first[2] then next = math.max(tonumber(first[2]) - now, 0) end
return {now, next, due}
`)

// wPromoteScript moves listed retries into their streams: a member that
// ZREM removes (so only one caller) becomes a new entry with its attempt
// and group. KEYS: retries, then the streams. ARGV: pairs of stream index
// (into KEYS, 2-based) and member. Returns {promoted, ms until the next
// retry is due (-1: none)}.
var wPromoteScript = goredis.NewScript(luaPrelude + `
local n = 0
for i = 1, #ARGV, 2 do
  local m = ARGV[i + 1]
  if redis.call('ZREM', KEYS[1], m) == 1 then
    local r = cjson.decode(m)
    redis.call('XADD', KEYS[tonumber(ARGV[i])], '*', 'job', r.j, 'slot', r.sl, 'tick', r.t, 'epoch', r.e,
      'replica', r.r, 'payload', r.p, 'attempt', r.a, 'group', r.g)
    n = n + 1
  end
end
local now = now_ms()
local next = -1
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if first[2] then next = math.max(tonumber(first[2]) - now, 0) end
return {n, next}
`)

// wReplayScript appends a dead letter's tick to its stream again, attempt
// 1, for the group, and deletes the dead letter. KEYS: dead, dead counts,
// the stream. ARGV: dead letter id, group. Returns 0 when there is no such
// dead letter, else the new entry's id.
var wReplayScript = goredis.NewScript(`
local e = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if not e[1] then return 0 end
local f, v = e[1][2], {}
for j = 1, #f, 2 do v[f[j]] = f[j + 1] end
if v.stream ~= KEYS[3] then return redis.error_reply('dead letter ' .. ARGV[1] .. ' is for stream ' .. tostring(v.stream)) end
local id = redis.call('XADD', KEYS[3], '*', 'job', v.job, 'slot', v.slot, 'tick', v.tick, 'epoch', v.epoch,
  'replica', v.replica, 'payload', v.payload, 'attempt', '1', 'group', ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[1])
redis.call('HINCRBY', KEYS[2], v.job, -1)
return id
`)

// wStatusScript reads what the group's status needs the store's clock
// for. KEYS: running, dead. Returns {now, in-flight members, dead total}.
var wStatusScript = goredis.NewScript(luaPrelude + `
local now = now_ms()
return {now, redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf'), redis.call('XLEN', KEYS[2])}
`)

// wPruneScript deletes the group's consumers that own no pending entry and
// have been idle for at least ARGV[2] ms (every worker process adds a
// consumer name; without this they would accumulate forever). Deleting
// such a consumer loses nothing: a live one is recreated by its next read.
// KEYS: streams. ARGV: group, idle ms. Returns how many were deleted.
var wPruneScript = goredis.NewScript(`
local g, idle, n = ARGV[1], tonumber(ARGV[2]), 0
for _, k in ipairs(KEYS) do
  local cs = redis.pcall('XINFO', 'CONSUMERS', k, g)
  if type(cs) == 'table' and not cs.err then
    for _, c in ipairs(cs) do
      local v = {}
      for j = 1, #c, 2 do v[c[j]] = c[j + 1] end
      if tonumber(v.pending) == 0 and tonumber(v.idle) >= idle then
        redis.call('XGROUP', 'DELCONSUMER', k, g, v.name)
        n = n + 1
      end
    end
  end
end
return n
`)
