package redis

import goredis "github.com/redis/go-redis/v9"

// Pause intervals live in the hash <prefix>:paused, one field per job:
// "since:until,since:until,..." in store milliseconds, the last until
// empty while the job is paused. The claim script reads them; pause and
// resume write them; the claim drops intervals the job's last-fired slot
// has passed.
const luaIntervals = `
-- parse_iv returns a job's pause intervals as {since, until or false}, or
-- nil when the value does not parse.
local function parse_iv(v)
  local out, n = {}, 0
  for part in string.gmatch(v, '[^,]+') do
    local s, u = string.match(part, '^(%d+):(%d*)$')
    if not s then return nil end
    n = n + 1
    out[n] = {tonumber(s), (u ~= '' and tonumber(u)) or false}
  end
  if n == 0 then return nil end
  return out
end
local function fmt_iv(iv)
  local parts = {}
  for i, p in ipairs(iv) do
    parts[i] = fmtint(p[1]) .. ':' .. ((p[2] and fmtint(p[2])) or '')
  end
  return table.concat(parts, ',')
end
local function in_iv(iv, slot)
  for _, p in ipairs(iv) do
    if slot >= p[1] and ((not p[2]) or slot < p[2]) then return true end
  end
  return false
end
`

// luaControlChecks: the keys a pause or resume writes must hold their
// types (or be absent) before anything is written.
const luaControlChecks = `
local function check(key, want)
  local t = keytype(key)
  if t ~= 'none' and t ~= want then return {-1, key, 'holds a ' .. t .. ', not a ' .. want, 'type', ''} end
  return nil
end
local function checks()
  return check(KEYS[1], 'hash') or check(KEYS[2], 'hash') or check(KEYS[3], 'list') or check(KEYS[4], 'string')
end
local function logc(rec)
  redis.call('LPUSH', KEYS[3], cjson.encode(rec))
  redis.call('LTRIM', KEYS[3], 0, 999)
end
`

// pauseScript: KEYS paused, control, log, version; ARGV job, who, reason,
// most intervals kept. Returns {1, intervals, now, version} ({0, ...} when
// the job was paused already), or {-1, key,
// reason, kind, value} when state it must write is damaged (nothing
// written).
var pauseScript = goredis.NewScript(luaPrelude + luaIntervals + luaControlChecks + `
local bad = checks()
if bad then return bad end
local job, who, reason = ARGV[1], ARGV[2], ARGV[3]
local cur = redis.call('HGET', KEYS[1], job)
local iv = {}
if cur then
  iv = parse_iv(cur)
  if not iv then return {-1, KEYS[1], 'pause intervals ' .. show(cur) .. ' of job ' .. show(job) .. ' do not parse', 'value', cur} end
end
local now = now_ms()
local n = #iv
local detail = ''
if n > 0 and not iv[n][2] then
  detail = 'already paused'
else
  iv[n + 1] = {now, false}
  while #iv > tonumber(ARGV[4]) do table.remove(iv, 1) end
  redis.call('HSET', KEYS[1], job, fmt_iv(iv))
end
redis.call('HSET', KEYS[2], job, cjson.encode({paused = true, who = who, reason = reason, at = now}))
logc({action = 'pause', job = job, who = who, reason = reason, at = now, detail = detail})
local v = redis.call('INCR', KEYS[4])
if detail ~= '' then return {0, fmt_iv(iv), now, v} end
return {1, fmt_iv(iv), now, v}
`)

// resumeScript: KEYS and ARGV as pauseScript. Returns {1, intervals, now,
// version}; {0, intervals, now, version} when the job was not paused.
var resumeScript = goredis.NewScript(luaPrelude + luaIntervals + luaControlChecks + `
local bad = checks()
if bad then return bad end
local job, who, reason = ARGV[1], ARGV[2], ARGV[3]
local cur = redis.call('HGET', KEYS[1], job)
local iv = {}
if cur then
  iv = parse_iv(cur)
  if not iv then return {-1, KEYS[1], 'pause intervals ' .. show(cur) .. ' of job ' .. show(job) .. ' do not parse', 'value', cur} end
end
local now = now_ms()
local n = #iv
if n == 0 or iv[n][2] then
  logc({action = 'resume', job = job, who = who, reason = reason, at = now, detail = 'was not paused'})
  return {0, fmt_iv(iv), now, tonumber(redis.call('GET', KEYS[4]) or '0')}
end
iv[n][2] = math.max(now, iv[n][1])
redis.call('HSET', KEYS[1], job, fmt_iv(iv))
redis.call('HSET', KEYS[2], job, cjson.encode({paused = false, who = who, reason = reason, at = now}))
logc({action = 'resume', job = job, who = who, reason = reason, at = now, detail = ''})
local v = redis.call('INCR', KEYS[4])
return {1, fmt_iv(iv), now, v}
`)

// enqueueScript appends manual ticks of one job outside the election.
//
// KEYS: control log, epoch, then per tick its record key (a trigger's own
// key, or the tick-record bucket of a backfilled slot) and its stream
// (for a relayed tick, asynq's pending list), then the relayed ticks'
// other asynq keys, then the run ledger's log. ARGV: who, reason, tolerance ms, action, job,
// detail, the ticks as MessagePack: 7 values per tick: tick id, slot
// (ignored for a trigger: the store's now), payload, retention ms, maxlen
// (decimal string), kind, definition version ("" for none), relay (as in
// the claim: packer.relay; a relayed tick is written as asynq's task
// instead of appended, and a task id asynq holds already makes it a
// duplicate); and "1" when
// the run ledger is kept (each appended tick is noted there, enqueued by
// the actor).
//
// As in the claim, everything that can fail is read first (records,
// through pcall), appends go through pcall and a tick's record is written
// only after its append: a retried request appends nothing twice. Per
// tick: 3 early (a backfilled slot ahead of the store's time plus the
// tolerance), 2 duplicate (its record exists), 4 broken (its record key or
// its stream holds another type), 1 appended. Returns {now, outcomes,
// damages (key, field, reason, kind, value), broken tick -> damage,
// epoch}.
var enqueueScript = goredis.NewScript(luaPrelude + luaLedger + luaAsynq + `
local now = now_ms()
local who, reason, tol, action, job, detail = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4], ARGV[5], ARGV[6]
local d = cmsgpack.unpack(ARGV[7])
local ledger = ARGV[8] == '1'
local lops, nlops = {}, 0
local lt = keytype(KEYS[1])
if lt ~= 'none' and lt ~= 'list' then return {-1, KEYS[1], 'holds a ' .. lt .. ', not a list', 'type', ''} end
local epoch = try('GET', KEYS[2])
if not isint(epoch) then epoch = '0' end
local dmg, ndmg = {}, 0
local function damage(key, reason, kind)
  dmg[ndmg + 1], dmg[ndmg + 2], dmg[ndmg + 3], dmg[ndmg + 4], dmg[ndmg + 5] = key, '', reason, kind, ''
  ndmg = ndmg + 5
  return ndmg / 5
end
local nt = #d / 8
local state = {}   -- per tick: false (to append), or an outcome
local bad = {}     -- per tick: damage number
for i = 1, nt do
  local k = i * 8 - 7
  local rkey = KEYS[1 + 2 * i]
  local kind = d[k + 5]
  local slot = d[k + 1]
  if kind == 'trigger' then
    d[k + 1] = now
    local v, err = try('GET', rkey)
    if err then bad[i] = damage(rkey, wrongtype(rkey, 'a string (a trigger record)'), 'type'); state[i] = '4'
    elseif v then state[i] = '2'
    else state[i] = false end
  else
    if slot > now + tol then
      state[i] = '3'
    else
      local v, err = try('HGET', rkey, d[k])
      if err then bad[i] = damage(rkey, wrongtype(rkey, 'a hash'), 'type'); state[i] = '4'
      elseif v then state[i] = '2'
      else state[i] = false end
    end
  end
end
local out, brk, nb, n = {}, {}, 0, 0
local wrote = false
local token = 'manual|' .. who
for i = 1, nt do
  local k = i * 8 - 7
  local res = state[i]
  local stream = KEYS[2 + 2 * i]
  local rl = d[k + 7]
  local ok, err
  if res == false and type(rl) == 'string' and rl ~= '' then
    -- A relay this store cannot write: refused, not appended.
    bad[i] = damage(stream, rl, 'value')
    res = '4'
  elseif res == false and rl ~= '' then
    local st, bk, why = asynq_check(rl)
    if st == 'dup' then
      res = '2'
    elseif st == 'bad' then
      bad[i] = damage(bk, why, 'type')
      res = '4'
    else
      err = asynq_write(rl, now)
      if err then return redis.error_reply(err) end
      ok = true
    end
  end
  if res == false then
    local args = {'XADD', stream}
    if d[k + 4] ~= '0' then args = {'XADD', stream, 'MAXLEN', '~', d[k + 4]} end
    local fields = {'*', 'job', job, 'slot', d[k + 1], 'tick', d[k], 'epoch', epoch, 'replica', token,
      'payload', d[k + 2], 'kind', d[k + 5]}
    if d[k + 6] ~= '' then fields[#fields + 1], fields[#fields + 2] = 'version', d[k + 6] end
    for _, f in ipairs(fields) do args[#args + 1] = f end
    if rl == '' then ok, err = try(unpack(args)) end
    if err then
      if not wrote and string.sub(err, 1, 9) ~= 'WRONGTYPE' then return redis.error_reply(err) end
      bad[i] = damage(stream, wrongtype(stream, 'a stream'), 'type')
      res = '4'
    else
      wrote = true
      res = '1'
      local rkey = KEYS[1 + 2 * i]
      if d[k + 5] == 'trigger' then
        redis.call('SET', rkey, token, 'PX', d[k + 3])
      else
        redis.call('HSET', rkey, d[k], token)
        local exp = (math.floor(d[k + 1] / 60000) + 1) * 60000 + d[k + 3]
        local ttl = redis.call('PTTL', rkey)
        if ttl < 0 or now + ttl < exp then redis.call('PEXPIREAT', rkey, exp) end
      end
      n = n + 1
      if ledger then
        nlops = nlops + 1
        lops[nlops] = lop_e('e', job, fmtint(d[k + 1]), d[k], d[k + 5])
      end
    end
  end
  out[i] = res
  if res == '4' then nb = nb + 1; brk[nb] = bad[i] end
end
redis.call('LPUSH', KEYS[1], cjson.encode({action = action, job = job, who = who, reason = reason, at = now,
  detail = detail .. ' (' .. n .. ' of ' .. nt .. ' enqueued)'}))
redis.call('LTRIM', KEYS[1], 0, 999)
if ledger then ledger_push(KEYS[#KEYS], now, '', token, '', lops, nlops) end
return {now, table.concat(out), dmg, brk, epoch}
`)
