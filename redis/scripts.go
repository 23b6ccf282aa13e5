package redis

import goredis "github.com/redis/go-redis/v9"

// All scripts read the time from Redis itself (TIME), so the store's clock
// is the only one that decides expiry, term boundaries and early slots.
// Redis 5+ replicates scripts by effects, which makes TIME safe to use.
//
// A Redis script is atomic but not transactional: a runtime error keeps
// the writes made before it. So every script here does all that can fail
// (a key of another type, a value that does not parse) before its first
// write, reading through redis.pcall, and reports damaged state as data
// ({-1, key, reason, kind, value}) instead of failing halfway. Redis refuses a script's
// writes for lack of memory (OOM) only at its first write: once a script
// has written, its later writes succeed, so a claim cannot be cut short
// between appending a tick and recording it.
const luaPrelude = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
-- try calls a command and returns its result, or nil and the error text.
local function try(...)
  local r = redis.pcall(...)
  if type(r) == 'table' and r['err'] then return nil, r['err'] end
  return r, nil
end
local function keytype(key)
  return redis.call('TYPE', key)['ok']
end
local function wrongtype(key, want)
  return 'holds a ' .. keytype(key) .. ', not ' .. want
end
local function show(v)
  if #v > 60 then v = string.sub(v, 1, 60) .. '...' end
  return '"' .. string.gsub(v, '[%c"\\]', '?') .. '"'
end
local function isint(v)
  return type(v) == 'string' and string.match(v, '^%-?%d+$') ~= nil and #v <= 16
end
-- decode returns a history entry as a table, or nil when it is not one.
local function decode(v)
  local ok, h = pcall(cjson.decode, v)
  if ok and type(h) == 'table' and type(h['epoch']) == 'number' then return h end
  return nil
end
local function fmtint(n) return string.format('%.0f', n) end
`

// acquireScript: KEYS leader, epoch, terms; ARGV holder, ttl ms, history length.
//
// Returns {1, epoch, now, note} when acquired (note: {key, reason} when
// the history is damaged, else empty), {0, current value,
// pttl, now} when held, {-1, key, reason, kind, value} when the lease or
// the epoch is damaged (nothing written). The new epoch is the largest of the stored
// epoch + 1, the newest epoch in the history + 1 and the store's clock in
// milliseconds, so it never repeats even when the epoch key was deleted.
// The history is best effort: a damaged entry is skipped, a history key of
// another type is left alone, and the note says so.
var acquireScript = goredis.NewScript(luaPrelude + `
local cur, err = try('GET', KEYS[1])
if err then return {-1, KEYS[1], wrongtype(KEYS[1], 'a string "holder|epoch"'), 'type', ''} end
local now = now_ms()
if cur then
  local pttl = redis.call('PTTL', KEYS[1])
  if not string.match(cur, '^.+|%d+$') then
    return {-1, KEYS[1], 'value ' .. show(cur) .. ' is not a lease ("holder|epoch")', 'value', cur}
  end
  if pttl < 0 then
    return {-1, KEYS[1], 'lease ' .. show(cur) .. ' has no expiry (onetick always sets one)', 'no-expiry', cur}
  end
  return {0, cur, pttl, now}
end
local stored
stored, err = try('GET', KEYS[2])
if err then return {-1, KEYS[2], wrongtype(KEYS[2], 'a string (integer)'), 'type', ''} end
local epoch = now
if stored then
  if not isint(stored) then return {-1, KEYS[2], 'value ' .. show(stored) .. ' is not an integer', 'value', stored} end
  epoch = math.max(epoch, tonumber(stored) + 1)
end
local note = {}
local hist
hist, err = try('LRANGE', KEYS[3], 0, -1)
local head
if err then
  note = {KEYS[3], wrongtype(KEYS[3], 'a list') .. '; this term is not recorded'}
  hist = nil
else
  local bad = 0
  for i, v in ipairs(hist) do
    local h = decode(v)
    if h then
      if h['epoch'] >= epoch then epoch = h['epoch'] + 1 end
      if i == 1 then head = h end
    else
      bad = bad + 1
    end
  end
  if bad > 0 then note = {KEYS[3], bad .. ' entries are not terms (JSON); skipped'} end
end
local ttl = tonumber(ARGV[2])
redis.call('SET', KEYS[2], fmtint(epoch))
redis.call('SET', KEYS[1], ARGV[1] .. '|' .. fmtint(epoch), 'PX', ttl)
if hist then
  if head and not head['end'] then
    -- The previous term ended without a release: its lease expired.
    head['end'] = math.min(now, head['exp'] or now)
    head['reason'] = 'expired'
    redis.call('LSET', KEYS[3], 0, cjson.encode(head))
  end
  redis.call('LPUSH', KEYS[3], cjson.encode({epoch = epoch, holder = ARGV[1], start = now, exp = now + ttl}))
  redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[3]) - 1)
end
return {1, epoch, now, note}
`)

// updateHead is shared by renew and release: it applies f to the newest
// history entry when that entry is this term's, best effort, and returns a
// note when the history is damaged.
const luaUpdateHead = `
local function update_head(key, epoch, f)
  local v, err = try('LINDEX', key, 0)
  if err then return {key, wrongtype(key, 'a list')} end
  if not v then return {} end
  local h = decode(v)
  if not h then return {key, 'the newest entry is not a term (JSON); skipped'} end
  if h['epoch'] == epoch then
    f(h)
    redis.call('LSET', key, 0, cjson.encode(h))
  end
  return {}
end
`

// renewScript: KEYS leader, terms; ARGV token, ttl ms, epoch.
// Compare-and-extend: returns {store time, history note}, or nil when the
// lease is not (any longer) this token's.
var renewScript = goredis.NewScript(luaPrelude + luaUpdateHead + `
local cur = try('GET', KEYS[1])
if cur ~= ARGV[1] then
  return false
end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
local now = now_ms()
local note = update_head(KEYS[2], tonumber(ARGV[3]), function(h) h['exp'] = now + tonumber(ARGV[2]) end)
return {now, note}
`)

// releaseScript: KEYS leader, terms; ARGV token, epoch, channel.
// Compare-and-delete, close the term, notify standbys. Returns {1, note}
// or {0, {}}; the note is {key, reason} when the history is damaged.
var releaseScript = goredis.NewScript(luaPrelude + luaUpdateHead + `
local cur = try('GET', KEYS[1])
if cur ~= ARGV[1] then
  return {0, {}}
end
redis.call('DEL', KEYS[1])
local now = now_ms()
local note = update_head(KEYS[2], tonumber(ARGV[2]), function(h)
  h['end'] = now
  h['reason'] = 'released'
end)
redis.call('PUBLISH', ARGV[3], ARGV[1])
return {1, note}
`)

// leaderScript: KEYS leader. Returns {value or false, pttl}, or {-1, key,
// reason, kind, value} when the key holds another type.
var leaderScript = goredis.NewScript(luaPrelude + `
local v, err = try('GET', KEYS[1])
if err then return {-1, KEYS[1], wrongtype(KEYS[1], 'a string "holder|epoch"'), 'type', ''} end
return {v, redis.call('PTTL', KEYS[1])}
`)

// claimScript claims a batch of ticks atomically.
//
// KEYS: leader, last-fired hash, terms, pause intervals, the ledger's log.
// ARGV: token, tolerance ms, epoch,
// holder, tick-record key prefix, the batch, "1" when the run ledger is
// kept. The batch is MessagePack: an array of
// 11 values per tick: job, slot (integer), tick id, payload, retention ms
// (integer), maxlen (decimal string), stream, out-of-order (bool), the
// job's definition version ("" for none: no "version" field), its
// ledger text (ledgerText; "" when the ledger is off), and its relay
// (packer.relay: "" for none, {queue, task id, msg} for asynq, whose
// task is then written instead of the XADD; a non-empty string: a relay
// this store cannot write, so the tick is Broken). Lua
// passes integer-valued numbers to Redis commands in full ("%.17g"), so
// slots reach XADD and HSET as exact decimal strings. (Tick-record keys and
// streams are not declared in KEYS, which single-server Redis allows; it is
// one reason Redis Cluster is not supported.)
//
// Per-tick records live as fields (tick id -> token of the claiming term)
// of hashes that bucket slots by the minute, "<prefix><minute>"; a bucket
// expires once the newest retention of its ticks has passed after the
// bucket's end, so every record lives at least its retention past its
// slot. Reading and writing them a thousand at a time leaves one command
// per tick: the XADD.
//
// Fencing first: if the lease is not this token's, nothing is written but
// the best-effort mark "fenced" on the term, and the script fails with
// FENCED. Then everything is read (last-fired slots, tick records) before
// anything is written: the last-fired hash of another type returns {-1,
// key, reason} with nothing written; a damaged job's field or record
// bucket makes that job's (or that bucket's) ticks Broken. Then per tick:
// 3 (early) when the slot is beyond the store's time plus tolerance; 4
// (broken) when its bucket or, for an in-order tick, its job's last-fired
// slot is damaged; 2 (duplicate) when an in-order tick's slot is not after
// the job's last-fired slot, or its tick record exists, unless this same
// term wrote the record, which makes a retried claim answer 1 without
// appending again; for a relayed tick (asynq.go), 2 also when asynq
// holds its task id already; 5 (paused) when an in-order tick's slot falls in one of
// its job's pause intervals: its last-fired slot moves, nothing is
// appended; otherwise the entry is appended and the answer is 1. An
// append that fails (its stream holds another type) makes that tick 4 and
// writes nothing for it, except that a failure before the script's first
// write (out of memory) fails the whole claim, still having written
// nothing. Records and moved last-fired slots are written at the end, only
// for appended ticks.
//
// Each record written (claimed or paused, not a retry's) is noted in the
// run ledger's log, with the tick's skipped ranges, in one entry.
//
// Returns {store time ms, outcomes as a string of digits, damages as a
// flat list of (key, field, reason, kind, value), for each broken tick
// in order the number of its damage, the ledger log's length (0: nothing
// appended, -1: the log holds another type)}, or {-1, key, reason, kind, value}
// when the last-fired hash is damaged (nothing written).
var claimScript = goredis.NewScript(luaPrelude + luaIntervals + luaLedger + luaAsynq + `
local token = ARGV[1]
local cur = try('GET', KEYS[1])
if cur ~= token then
  local epoch = tonumber(ARGV[3])
  local terms = try('LRANGE', KEYS[3], 0, -1)
  if terms then
    for i, v in ipairs(terms) do
      local h = decode(v)
      if h and h['epoch'] == epoch then
        if h['reason'] ~= 'released' and h['reason'] ~= 'fenced' then
          h['reason'] = 'fenced'
          redis.call('LSET', KEYS[3], i - 1, cjson.encode(h))
        end
        break
      end
    end
  end
  return redis.error_reply('FENCED lease superseded')
end
local now = now_ms()
local limit = now + tonumber(ARGV[2])
local epoch, holder, prefix = ARGV[3], ARGV[4], ARGV[5]
local d = cmsgpack.unpack(ARGV[6])
local BUCKET = 60000
-- The run ledger: one op per record written (claimed or paused), made
-- of the tick's ledger text from the batch (ledgerText: the fields of an
-- e or p op after its code, then the tick's skipped ranges).
local ledger = ARGV[7] == '1'
local lops, nlops = {}, 0

-- Damages found, as key, field, reason, kind, value; each job, bucket
-- or stream is reported once.
local dmg, ndmg = {}, 0
local function damage(key, field, reason, kind, value)
  dmg[ndmg + 1], dmg[ndmg + 2], dmg[ndmg + 3], dmg[ndmg + 4], dmg[ndmg + 5] = key, field, reason, kind, value
  ndmg = ndmg + 5
  return ndmg / 5
end

-- Read, a thousand at a time, the last-fired slot of every job and the
-- record of every tick in the batch. (Counters instead of the # operator:
-- it is a binary search in Lua 5.1, and this loop runs per tick.)
local last, rec, badJob, piv = {}, {}, {}, {}
local jobs, nj, seenJob = {}, 0, {}
local buckets = {}    -- bucket number -> {key, fields, nf, new, nn, expire, bad}
local order, no = {}, 0
local tb = {}         -- tick index -> its bucket
local lastB, lastBk
local lastErr
local function readLast()
  local v, err = try('HMGET', KEYS[2], unpack(jobs, 1, nj))
  if err then
    lastErr = {KEYS[2], wrongtype(KEYS[2], 'a hash')}
    nj = 0
    return
  end
  local pv
  pv, err = try('HMGET', KEYS[4], unpack(jobs, 1, nj))
  if err then
    lastErr = {KEYS[4], wrongtype(KEYS[4], 'a hash')}
    nj = 0
    return
  end
  for k = 1, nj do
    local x = pv[k]
    if x then
      local iv = parse_iv(x)
      if iv then
        piv[jobs[k]] = iv
      else
        badJob[jobs[k]] = damage(KEYS[4], jobs[k], 'pause intervals ' .. show(x) .. ' do not parse', 'value', x)
      end
    end
  end
  for k = 1, nj do
    local x = v[k]
    if not x then
      last[jobs[k]] = -1
    elseif isint(x) then
      last[jobs[k]] = tonumber(x)
    elseif not badJob[jobs[k]] then
      badJob[jobs[k]] = damage(KEYS[2], jobs[k], 'last-fired slot ' .. show(x) .. ' is not an integer (Unix ms)', 'value', x)
    end
  end
  nj = 0
end
local function readRecords(bk)
  local f = bk.fields
  if not bk.bad then
    local v, err = try('HMGET', bk.key, unpack(f, 1, bk.nf))
    if err then
      bk.bad = damage(bk.key, '', wrongtype(bk.key, 'a hash'), 'type', '')
    else
      for k = 1, bk.nf do rec[f[k]] = v[k] end
    end
  end
  bk.nf = 0
end
for i = 1, #d, 11 do
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
if lastErr then return {-1, lastErr[1], lastErr[2], 'type', ''} end
for k = 1, no do
  if order[k].nf > 0 then readRecords(order[k]) end
  order[k].fields = nil
end

-- Claim. A job's slots arrive in order, so appending its moved last-fired
-- slots in order and writing them with HSET (later pairs win) keeps the
-- newest.
local out, nout = {}, 0
local moved, nm = {}, 0
local brk, nb = {}, 0
local streamBad = {}  -- stream -> damage number
local wrote = false
local function broken(n)
  nb = nb + 1
  brk[nb] = n
  return '4'
end
for i = 1, #d, 11 do
  local job, slot, id, stream = d[i], d[i + 1], d[i + 2], d[i + 6]
  local ooo = d[i + 7]
  local bk = tb[i]
  local r = rec[id]
  local res
  if slot > limit then
    res = '3'
  elseif bk.bad then
    res = broken(bk.bad)
  elseif r then
    if r == token then res = '1' elseif r == token .. '|p' then res = '5' else res = '2' end
  elseif (not ooo) and badJob[job] then
    res = broken(badJob[job])
  elseif (not ooo) and slot <= last[job] then
    res = '2'
  elseif (not ooo) and piv[job] and in_iv(piv[job], slot) then
    -- Paused: accounted for (last-fired moves) but not appended; the
    -- record lets a retry of this claim answer paused again.
    rec[id] = token .. '|p'
    if ledger then nlops = nlops + 1; lops[nlops] = '1:p' .. d[i + 9] end
    local nn = bk.nn
    bk.new[nn + 1] = id
    bk.new[nn + 2] = token .. '|p'
    bk.nn = nn + 2
    last[job] = slot
    moved[nm + 1] = job
    moved[nm + 2] = slot
    nm = nm + 2
    res = '5'
  elseif type(d[i + 10]) == 'string' and d[i + 10] ~= '' then
    -- A relay this store cannot write: refused, not appended to the stream.
    res = broken(damage(stream, '', d[i + 10], 'value', ''))
  elseif d[i + 10] == '' and streamBad[stream] then
    res = broken(streamBad[stream])
  else
    local ok, err, dup, badn
    local ver = d[i + 8]
    local rl = d[i + 10]
    if rl ~= '' then
      -- Relayed to asynq (asynq.go) instead of the stream.
      local st, k, why = asynq_check(rl)
      if st == 'dup' then
        dup = true
      elseif st == 'bad' then
        streamBad[k] = streamBad[k] or damage(k, '', why, 'type', '')
        badn, err = streamBad[k], 'BAD'
      else
        err = asynq_write(rl, now)
        if err then return redis.error_reply(err) end
      end
    elseif d[i + 5] ~= '0' then
      if ver == '' then
        ok, err = try('XADD', stream, 'MAXLEN', '~', d[i + 5], '*', 'job', job, 'slot', slot,
          'tick', id, 'epoch', epoch, 'replica', holder, 'payload', d[i + 3])
      else
        ok, err = try('XADD', stream, 'MAXLEN', '~', d[i + 5], '*', 'job', job, 'slot', slot,
          'tick', id, 'epoch', epoch, 'replica', holder, 'payload', d[i + 3], 'version', ver)
      end
    elseif ver == '' then
      ok, err = try('XADD', stream, '*', 'job', job, 'slot', slot,
        'tick', id, 'epoch', epoch, 'replica', holder, 'payload', d[i + 3])
    else
      ok, err = try('XADD', stream, '*', 'job', job, 'slot', slot,
        'tick', id, 'epoch', epoch, 'replica', holder, 'payload', d[i + 3], 'version', ver)
    end
    if dup then
      -- asynq holds this task id already: not pushed twice.
      res = '2'
    elseif err == 'BAD' then
      res = broken(badn)
    elseif err then
      if not wrote and string.sub(err, 1, 9) ~= 'WRONGTYPE' then
        -- Nothing is written yet: fail the claim as a whole.
        return redis.error_reply(err)
      end
      local reason, kind = err, 'value'
      if string.sub(err, 1, 9) == 'WRONGTYPE' then reason, kind = wrongtype(stream, 'a stream'), 'type' end
      streamBad[stream] = damage(stream, '', reason, kind, '')
      res = broken(streamBad[stream])
    else
      wrote = true
      rec[id] = token
      if ledger then nlops = nlops + 1; lops[nlops] = '1:e' .. d[i + 9] end
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
      res = '1'
    end
  end
  nout = nout + 1
  out[nout] = res
end

-- Write the records and the moved last-fired slots, a thousand at a time.
-- Their keys were read above, so they hold hashes, and the script has
-- written already, so these writes cannot fail.
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
-- Drop the pause intervals that no future in-order slot can fall in.
for job, iv in pairs(piv) do
  local kept, n = {}, 0
  local l = last[job] or -1
  for _, p in ipairs(iv) do
    if (not p[2]) or l < p[2] - 1 then
      n = n + 1
      kept[n] = p
    end
  end
  if n < #iv then
    if n == 0 then redis.call('HDEL', KEYS[4], job) else redis.call('HSET', KEYS[4], job, fmt_iv(kept)) end
  end
end
local llen = 0
if ledger then llen = ledger_push(KEYS[5], now, epoch, holder, '', lops, nlops) end
return {now, table.concat(out), dmg, brk, llen}
`)

// repairScript moves one damaged piece aside, only if it is still exactly
// as reported. KEYS: the damaged key, the quarantine key. ARGV: mode,
// then per mode: "type" expected-type (move the key when it holds another
// type); "value" value (move a string key holding exactly value);
// "noexpiry" value (the same, and only while it has no expiry); "field"
// field value (move one hash field); "entry" value (move one list entry).
// Returns 1 when moved, 0 when the damage is no longer there.
var repairScript = goredis.NewScript(luaPrelude + `
local key, q, mode = KEYS[1], KEYS[2], ARGV[1]
if mode == 'type' then
  local t = keytype(key)
  if t == 'none' or t == ARGV[2] then return 0 end
  redis.call('RENAME', key, q)
  return 1
elseif mode == 'value' or mode == 'noexpiry' then
  if keytype(key) ~= 'string' or redis.call('GET', key) ~= ARGV[2] then return 0 end
  if mode == 'noexpiry' and redis.call('PTTL', key) >= 0 then return 0 end
  redis.call('RENAME', key, q)
  return 1
elseif mode == 'field' then
  if keytype(key) ~= 'hash' or redis.call('HGET', key, ARGV[2]) ~= ARGV[3] then return 0 end
  redis.call('HSET', q, ARGV[2], ARGV[3])
  redis.call('HDEL', key, ARGV[2])
  return 1
elseif mode == 'entry' then
  if keytype(key) ~= 'list' then return 0 end
  if redis.call('LREM', key, 1, ARGV[2]) ~= 1 then return 0 end
  redis.call('RPUSH', q, ARGV[2])
  return 1
end
return redis.error_reply('ERR unknown repair mode ' .. mode)
`)
