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
// KEYS: leader, last-fired hash, terms, then per tick: tick record, stream.
// ARGV: token, tolerance ms, epoch, holder, then per tick 7 values:
// job, slot, tick id, payload, retention ms, maxlen, out-of-order flag.
//
// Fencing first: if the lease is not this token's, nothing is written, the
// term is marked fenced and the script fails with FENCED. Then per tick:
// 3 (early) when the slot is beyond the store's time plus tolerance; a tick
// record already present is 1 when this same term wrote it (a retried
// claim) and 2 (duplicate) otherwise; an in-order tick whose slot is not
// after the job's last-fired slot is 2; otherwise the record is written,
// the last-fired slot moved, the entry appended, and the answer is 1.
// Returns {store time ms, outcome...}.
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
local epoch, holder = ARGV[3], ARGV[4]
local n = (#ARGV - 4) / 7
local out = {now}
local last = {}
for i = 0, n - 1 do
  local a = 5 + 7 * i
  local job, slotArg = ARGV[a], ARGV[a + 1]
  local slot = tonumber(slotArg)
  local tickKey, stream = KEYS[4 + 2 * i], KEYS[5 + 2 * i]
  local res
  if slot > limit then
    res = 3
  else
    local rec = redis.call('GET', tickKey)
    if rec then
      if rec == token then res = 1 else res = 2 end
    else
      local ooo = ARGV[a + 6] == '1'
      local lf = last[job]
      if lf == nil then
        lf = tonumber(redis.call('HGET', KEYS[2], job)) or -1
        last[job] = lf
      end
      if (not ooo) and slot <= lf then
        res = 2
      else
        redis.call('SET', tickKey, token, 'PX', ARGV[a + 4])
        if not ooo then
          redis.call('HSET', KEYS[2], job, slotArg)
          last[job] = slot
        end
        local maxlen = tonumber(ARGV[a + 5])
        if maxlen > 0 then
          redis.call('XADD', stream, 'MAXLEN', '~', maxlen, '*', 'job', job, 'slot', slotArg,
            'tick', ARGV[a + 2], 'epoch', epoch, 'replica', holder, 'payload', ARGV[a + 3])
        else
          redis.call('XADD', stream, '*', 'job', job, 'slot', slotArg,
            'tick', ARGV[a + 2], 'epoch', epoch, 'replica', holder, 'payload', ARGV[a + 3])
        end
        res = 1
      end
    end
  end
  out[#out + 1] = res
end
return out
`)
