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

-- owner returns the consumer an entry is pending for, or nil.
local function owner(stream, group, id)
  local p = redis.pcall('XPENDING', stream, group, id, id, 1)
  if type(p) ~= 'table' or p.err or #p == 0 then return nil end
  return p[1][2]
end

local function is_alive(alive, consumer, now)
  local s = redis.call('ZSCORE', alive, consumer)
  return s and tonumber(s) > now
end

-- split_token returns a marker token's stream and entry id.
local function split_token(tok)
  local i = string.find(tok, '\n', 1, true)
  if not i then return '', tok end
  return string.sub(tok, 1, i - 1), string.sub(tok, i + 1)
end

-- id_less compares stream entry ids "ms-seq".
local function id_less(a, b)
  local am, as = string.match(a, '^(%d+)-(%d+)$')
  local bm, bs = string.match(b, '^(%d+)-(%d+)$')
  if not am or not bm then return a < b end
  am, bm = tonumber(am), tonumber(bm)
  if am ~= bm then return am < bm end
  return tonumber(as) < tonumber(bs)
end

-- marker_free: the job's run marker does not hold the job against tok:
-- it is absent (expired), or names tok, or names an entry that is no
-- longer pending or whose owner is not alive. An entry of another stream
-- (the job's stream changed) cannot be looked at: it holds.
local function marker_free(run, tok, stream, group, alive, now)
  local cur = redis.call('GET', run)
  if (not cur) or cur == tok then return true end
  local s, id = split_token(cur)
  if s ~= stream then return false end
  local o = owner(stream, group, id)
  return (not o) or (not is_alive(alive, o, now))
end

-- places reads the job's waiter places (sorted set waiters: token ->
-- slot) for the entry id of slot: whether it holds one, how many others
-- are held and, when ordered, whether one of them is lower. Places of
-- entries no longer pending are dropped on the way.
local function places(waiters, tok, stream, group, id, slot, ordered)
  local has = redis.call('ZSCORE', waiters, tok) ~= false
  local n = redis.call('ZCARD', waiters)
  if has then n = n - 1 end
  local lower = false
  local ms
  if ordered then
    ms = redis.call('ZRANGEBYSCORE', waiters, '-inf', slot, 'WITHSCORES')
  else
    ms = redis.call('ZRANGE', waiters, 0, -1, 'WITHSCORES')
  end
  do
    for j = 1, #ms, 2 do
      local m, sc = ms[j], tonumber(ms[j + 1])
      if m ~= tok then
        local s, mid = split_token(m)
        if s == stream and not owner(stream, group, mid) then
          redis.call('ZREM', waiters, m)
          n = n - 1
        elseif ordered and (sc < slot or id_less(mid, id)) then
          lower = true
          break
        end
      end
    end
  end
  return has, n, lower
end

-- lower_pending: an entry of job with a lower id than id and a slot no
-- higher is pending in the group without a waiter place (delivered, not
-- begun). At most 1000 entries are looked at.
local function lower_pending(stream, group, id, job, slot, waiters)
  local start = '-'
  for _ = 1, 10 do
    local ps = redis.call('XPENDING', stream, group, start, '(' .. id, 100)
    for _, p in ipairs(ps) do
      local pid = p[1]
      if redis.call('ZSCORE', waiters, stream .. '\n' .. pid) == false then
        local e = redis.call('XRANGE', stream, pid, pid)
        if e[1] then
          local f, pj, ps = e[1][2], nil, nil
          for j = 1, #f, 2 do
            if f[j] == 'job' then pj = f[j + 1] elseif f[j] == 'slot' then ps = tonumber(f[j + 1]) end
          end
          if pj == job and ps and ps <= slot then return true end
        end
      end
      start = '(' .. pid
    end
    if #ps < 100 then return false end
  end
  return false
end

-- decide is worker.DecideOverlap: R run, W wait, S skip.
local function decide(overlap, ordered, maxw, free, has, waiting, lowerw, lowerp)
  if overlap == 'allow' then return 'R' end
  if free and not (ordered and lowerw) then
    if not ordered or not lowerp() then return 'R' end
  end
  if overlap == 'queue' and (has or waiting < math.max(maxw, 1)) then return 'W' end
  return 'S'
end

-- release drops tok's run marker and waiter place and tells the waiters.
local function release(run, waiters, tok, job, channel)
  local freed = false
  if redis.call('GET', run) == tok then
    redis.call('DEL', run)
    freed = true
  end
  if redis.call('ZREM', waiters, tok) == 1 then freed = true end
  if freed then redis.call('PUBLISH', channel, job) end
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

// wReclaimScript takes over up to max entries of the streams in KEYS[2..]
// whose owner is not alive (its score in the alive set, KEYS[1], is past,
// or it has none: given back entries belong to "onetick:released"), and
// then, as the backstop, entries idle for at least idle ms (XAUTOCLAIM).
// Both count a delivery. ARGV: group, consumer, idle ms, max. Returns
// entries as {stream index (1-based, into the streams), id, fields,
// delivery count}.
var wReclaimScript = goredis.NewScript(luaWorkerLib + `
local g, c, idle, max = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local now = now_ms()
local out, n = {}, 0
for i = 2, #KEYS do
  if n >= max then break end
  local k = KEYS[i]
  local taken = {}
  local function take(id)
    local e = redis.call('XCLAIM', k, g, c, 0, id)
    taken[id] = true
    if e[1] and e[1][2] then
      local p = redis.call('XPENDING', k, g, id, id, 1)
      n = n + 1
      out[n] = {i - 1, id, e[1][2], p[1][4]}
    end
  end
  local sum = redis.pcall('XPENDING', k, g)
  if type(sum) == 'table' and sum.err then
    if not string.find(sum.err, 'NOGROUP', 1, true) then return redis.error_reply(sum.err) end
  elseif tonumber(sum[1]) > 0 then
    for _, cc in ipairs(sum[4]) do
      if n >= max then break end
      if cc[1] ~= c and not is_alive(KEYS[1], cc[1], now) then
        for _, p in ipairs(redis.call('XPENDING', k, g, '-', '+', max - n, cc[1])) do take(p[1]) end
      end
    end
    local start = '-'
    while n < max do
      local want = max - n
      local ps = redis.call('XPENDING', k, g, 'IDLE', idle, start, '+', want)
      for _, p in ipairs(ps) do
        if not taken[p[1]] and n < max then take(p[1]) end
        start = '(' .. p[1]
      end
      if #ps < want then break end
    end
  end
end
return out
`)

// wRegisterScript starts a new process of a consumer: its pending entries
// in the streams (KEYS[2..]) are given back, as Finish gives back (owned
// by "onetick:released", idle forever, their delivery counts kept), and
// it is alive (KEYS[1]) for live ms. ARGV: consumer, group, live ms.
var wRegisterScript = goredis.NewScript(luaPrelude + `
local c, g, live = ARGV[1], ARGV[2], tonumber(ARGV[3])
for i = 2, #KEYS do
  local k = KEYS[i]
  while true do
    local ps = redis.pcall('XPENDING', k, g, '-', '+', 1000, c)
    if type(ps) ~= 'table' or ps.err or #ps == 0 then break end
    local args = {'XCLAIM', k, g, 'onetick:released', 0}
    for _, p in ipairs(ps) do args[#args + 1] = p[1] end
    args[#args + 1] = 'IDLE'
    args[#args + 1] = 1000000000
    args[#args + 1] = 'JUSTID'
    redis.call(unpack(args))
    if #ps < 1000 then break end
  end
end
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZADD', KEYS[1], now + live, c)
return 1
`)

// wBeginScript admits deliveries (see worker.Store.Begin), the overlap
// decision by decide, as worker.DecideOverlap.
//
// KEYS: running, last, dead, dead counts, alive, the run ledger's log,
// then per start: stream, done bucket, run marker, waiter places. ARGV:
// consumer, group, hold ms, release channel, "1" when the run ledger is
// kept (each decision but wait is noted there: started, skipped_done,
// skipped_overlap, dead), then per start 12 values: id, job, tick, overlap, max
// deliveries, slot, epoch, replica, payload, attempt, max waiting,
// ordered (1 or 0). Returns {now, codes, delivery counts} with one code
// per start: R run, W wait, D skipped done, S skipped overlap, X dead
// (delivery limit), L not owned.
var wBeginScript = goredis.NewScript(luaWorkerLib + luaLedger + `
local c, g, hold, channel = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
local ledger = ARGV[5] == '1'
local lops, nlops = {}, 0
local function lnote(job, slot, tick, what, attempt, detail)
  if not ledger then return end
  nlops = nlops + 1
  lops[nlops] = lop_n(job, slot, tick, what, attempt, detail)
end
local now = now_ms()
local codes, counts = {}, {}
local nitems = (#ARGV - 5) / 12
for i = 1, nitems do
  local a, k = 5 + (i - 1) * 12, 6 + (i - 1) * 4
  local stream, done, run, waiters = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4]
  local id, job, tick, overlap, maxd = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3], ARGV[a + 4], tonumber(ARGV[a + 5])
  local slot, maxw, ordered = tonumber(ARGV[a + 6]), tonumber(ARGV[a + 11]), ARGV[a + 12] == '1'
  local tok = stream .. '\n' .. id
  local count = pending(stream, g, id, c)
  local code
  if not count then
    code, count = 'L', 0
  elseif redis.call('HEXISTS', done, tick) == 1 then
    redis.call('XACK', stream, g, id)
    release(run, waiters, tok, job, channel)
    lnote(job, ARGV[a + 6], tick, 'skipped_done', ARGV[a + 10], '')
    code = 'D'
  elseif maxd > 0 and count > maxd then
    local msg = 'delivery limit: delivered ' .. count .. ' times without a result (max_deliveries ' .. maxd .. ')'
    dead(KEYS[3], KEYS[4], KEYS[2], now, c, stream, id, job, tick, ARGV[a + 6], ARGV[a + 7], ARGV[a + 8],
      ARGV[a + 9], ARGV[a + 10], count, msg)
    redis.call('XACK', stream, g, id)
    release(run, waiters, tok, job, channel)
    lnote(job, ARGV[a + 6], tick, 'dead', ARGV[a + 10], msg)
    code = 'X'
  else
    local free, has, waiting, lowerw = true, false, 0, false
    if overlap ~= 'allow' then
      free = marker_free(run, tok, stream, g, KEYS[5], now)
      has, waiting, lowerw = places(waiters, tok, stream, g, id, slot, ordered)
    end
    code = decide(overlap, ordered, maxw, free, has, waiting, lowerw,
      function() return lower_pending(stream, g, id, job, slot, waiters) end)
    if code == 'R' then
      if overlap ~= 'allow' then
        redis.call('SET', run, tok, 'PX', hold)
        redis.call('ZREM', waiters, tok)
      end
      redis.call('ZADD', KEYS[1], now + hold, job .. '\n' .. tok)
      lnote(job, ARGV[a + 6], tick, 'started', ARGV[a + 10], '')
    elseif code == 'W' then
      if not has then redis.call('ZADD', waiters, slot, tok) end
    else
      redis.call('XACK', stream, g, id)
      redis.call('HSET', KEYS[2], job, 'skipped_overlap|' .. now .. '|' .. tick)
      lnote(job, ARGV[a + 6], tick, 'skipped_overlap', ARGV[a + 10], '')
    end
  end
  codes[i] = code
  counts[i] = count
end
if ledger then ledger_push(KEYS[6], now, '', '', c, lops, nlops) end
return {now, table.concat(codes), counts}
`)

// wHeartbeatScript marks the consumer alive and keeps its held entries
// (see worker.Store.Heartbeat): XCLAIM to the owner itself with JUSTID
// resets the idle time and, unlike a delivery, does not increment the
// delivery counter.
//
// KEYS: running, alive, then per hold: stream, marker (run marker or
// waiter places; ignored without one). ARGV: consumer, group, hold ms,
// live ms, then per hold: id, job, marker kind (n, r, w). Returns the
// 1-based indexes of lost holds.
var wHeartbeatScript = goredis.NewScript(luaWorkerLib + `
local c, g, hold, live = ARGV[1], ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local now = now_ms()
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], now + live, c)
local lost = {}
local nitems = (#ARGV - 4) / 3
for i = 1, nitems do
  local a, k = 4 + (i - 1) * 3, 2 + (i - 1) * 2
  local stream, marker = KEYS[k + 1], KEYS[k + 2]
  local id, job, kind = ARGV[a + 1], ARGV[a + 2], ARGV[a + 3]
  local tok = stream .. '\n' .. id
  if not pending(stream, g, id, c) then
    lost[#lost + 1] = i
  else
    redis.call('XCLAIM', stream, g, c, 0, id, 'JUSTID')
    if kind == 'r' and redis.call('GET', marker) ~= tok then
      lost[#lost + 1] = i
    elseif kind == 'w' and redis.call('ZSCORE', marker, tok) == false then
      lost[#lost + 1] = i
    else
      if kind == 'r' then redis.call('PEXPIRE', marker, hold) end
      redis.call('ZADD', KEYS[1], 'XX', now + hold, job .. '\n' .. tok)
    end
  end
end
return lost
`)

// wFinishScript settles deliveries (see worker.Store.Finish).
//
// KEYS: running, last, retries, dead, dead counts, the run ledger's log,
// then per finish: stream, done bucket, run marker, waiter places. ARGV:
// consumer, group, release channel, "1" when the run ledger is kept, then
// per finish 13 values: kind (d done, r retry, x dead, g give back), id,
// job, tick, slot, epoch, replica, payload, attempt, error, retention or
// delay ms, retry member, and the ledger event (JSON, noted for each owned
// finish). Returns a string with 1 (owned) or 0 per finish.
//
// A done record is field tick of a bucket hash per minute of slots,
// "<entry id>|<consumer>|<store ms>"; the bucket expires after its last
// record's retention. A retry is a member of the retries sorted set,
// scored by its due time; the member, built by the caller, is the JSON of
// the next attempt's entry.
var wFinishScript = goredis.NewScript(luaWorkerLib + luaLedger + `
local c, g, channel = ARGV[1], ARGV[2], ARGV[3]
local ledger = ARGV[4] == '1'
local lops, nlops = {}, 0
local now = now_ms()
local out = {}
local nitems = (#ARGV - 4) / 13
for i = 1, nitems do
  local a, k = 4 + (i - 1) * 13, 6 + (i - 1) * 4
  local stream, done, run, waiters = KEYS[k + 1], KEYS[k + 2], KEYS[k + 3], KEYS[k + 4]
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
    release(run, waiters, tok, job, channel)
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
    if ledger then
      nlops = nlops + 1
      lops[nlops] = lop_r(job, ARGV[a + 5], tick, ARGV[a + 13])
    end
  end
end
if ledger then ledger_push(KEYS[6], now, '', '', c, lops, nlops) end
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
    if r.v then
      redis.call('XADD', KEYS[tonumber(ARGV[i])], '*', 'job', r.j, 'slot', r.sl, 'tick', r.t, 'epoch', r.e,
        'replica', r.r, 'payload', r.p, 'attempt', r.a, 'group', r.g, 'version', r.v)
    else
      redis.call('XADD', KEYS[tonumber(ARGV[i])], '*', 'job', r.j, 'slot', r.sl, 'tick', r.t, 'epoch', r.e,
        'replica', r.r, 'payload', r.p, 'attempt', r.a, 'group', r.g)
    end
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
// 1, for the group, and deletes the dead letter, noting "replayed" in the
// run ledger. KEYS: dead, dead counts, the stream, the ledger's log. ARGV:
// dead letter id, group, "1" when the run ledger is kept. Returns 0 when
// there is no such dead letter, else the new entry's id.
var wReplayScript = goredis.NewScript(luaPrelude + luaLedger + `
local e = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1])
if not e[1] then return 0 end
local f, v = e[1][2], {}
for j = 1, #f, 2 do v[f[j]] = f[j + 1] end
if v.stream ~= KEYS[3] then return redis.error_reply('dead letter ' .. ARGV[1] .. ' is for stream ' .. tostring(v.stream)) end
local id = redis.call('XADD', KEYS[3], '*', 'job', v.job, 'slot', v.slot, 'tick', v.tick, 'epoch', v.epoch,
  'replica', v.replica, 'payload', v.payload, 'attempt', '1', 'group', ARGV[2])
redis.call('XDEL', KEYS[1], ARGV[1])
redis.call('HINCRBY', KEYS[2], v.job, -1)
if ARGV[3] == '1' then
  ledger_push(KEYS[4], now_ms(), '', '', '', {lop_n(v.job, v.slot, v.tick, 'replayed', '0', '')}, 1)
end
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
