package redis

import goredis "github.com/redis/go-redis/v9"

// luaLedger builds the run ledger's log entries (ledger.go): a script
// that changes a tick's state collects one op per event in a table and,
// at its end, pushes one entry with all of them, in the same call as the
// change. Every field is a netstring "<length>:<bytes>", so that job
// names, tick ids, errors and results need no escaping.
//
// An entry is the header (format "1", store ms, epoch, replica, worker:
// the context of every event in it) and the ops:
//
//	e job slot tick kind          enqueued (claim, enqueue)
//	p job slot tick kind          paused (claim)
//	s job from through count reason   a skipped range (claim; built by Go)
//	n job slot tick what attempt detail   a worker's event (begin, replay)
//	r job slot tick event-json    an event built by Go (finish)
const luaLedger = `
local function nsf(s) return #s .. ':' .. s end
-- lop_e is an e or p op.
local function lop_e(code, job, slot, tick, kind)
  return '1:' .. code .. #job .. ':' .. job .. #slot .. ':' .. slot .. #tick .. ':' .. tick .. #kind .. ':' .. kind
end
-- lop_n is an n op.
local function lop_n(job, slot, tick, what, attempt, detail)
  return '1:n' .. #job .. ':' .. job .. #slot .. ':' .. slot .. #tick .. ':' .. tick .. #what .. ':' .. what ..
    #attempt .. ':' .. attempt .. #detail .. ':' .. detail
end
-- lop_r is an r op.
local function lop_r(job, slot, tick, ev)
  return '1:r' .. #job .. ':' .. job .. #slot .. ':' .. slot .. #tick .. ':' .. tick .. #ev .. ':' .. ev
end
-- ledger_push appends the entry of ops[1..n] to the log key and returns
-- the log's length (0 when there was nothing to write, -1 when the key
-- holds another type: the ledger then misses the entry, the change it
-- records is made all the same, and the fold reports the damage). It
-- comes after the script's other writes, so it cannot be its first.
local function ledger_push(key, now, epoch, replica, worker, ops, n)
  if n == 0 then return 0 end
  local r = try('RPUSH', key, '1:1' .. nsf(fmtint(now)) .. nsf(epoch) .. nsf(replica) .. nsf(worker) ..
    table.concat(ops, '', 1, n))
  if type(r) ~= 'number' then return -1 end
  return r
end
`

// foldReadScript reads what a fold starts from, in one step: the folded
// counter, the log's length and its first ARGV[1] entries. KEYS: folded
// counter, log. Returns {counter ("0" when absent), length, entries}, or
// {-1, key, reason, kind, value} when a key holds another type.
var foldReadScript = goredis.NewScript(luaPrelude + `
local cnt, err = try('GET', KEYS[1])
if err then return {-1, KEYS[1], wrongtype(KEYS[1], 'a string (integer)'), 'type', ''} end
local n
n, err = try('LLEN', KEYS[2])
if err then return {-1, KEYS[2], wrongtype(KEYS[2], 'a list'), 'type', ''} end
return {cnt or '0', n, redis.call('LRANGE', KEYS[2], 0, tonumber(ARGV[1]) - 1)}
`)

// foldCommitScript writes what a fold of the log's first n entries made of
// them, if no other fold committed since this one read the log.
//
// KEYS: folded counter, log, records, spans, then the index of each job
// the fold touches. ARGV: the counter as read, n, the numbers of records
// set, records deleted and spans, then the sets (tick, record), the
// deleted ticks, the spans (job, longest skipped range ms), and per index
// in KEYS order: how many members it gains and loses, the members it
// gains each after its score (0), and those it loses.
//
// Returns 1 when written, 0 when another fold came first (nothing
// written), or {-1, key, reason, kind, value} when a key holds another
// type (nothing written).
var foldCommitScript = goredis.NewScript(luaPrelude + `
local want = {'string', 'list', 'hash', 'hash'}
for i = 1, #KEYS do
  local t = keytype(KEYS[i])
  local w = want[i] or 'zset'
  if t ~= 'none' and t ~= w then return {-1, KEYS[i], 'holds a ' .. t .. ', not a ' .. w, 'type', ''} end
end
if (redis.call('GET', KEYS[1]) or '0') ~= ARGV[1] then return 0 end
local n = tonumber(ARGV[2])
local nset, ndel, nspan = tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
redis.call('LTRIM', KEYS[2], n, -1)
redis.call('INCRBY', KEYS[1], n)
-- batch runs cmd on key with the args ARGV[a .. a+m-1], at most 1000 a
-- call (an even number: pairs stay together).
local function batch(cmd, key, a, m)
  for k = 0, m - 1, 1000 do
    redis.call(cmd, key, unpack(ARGV, a + k, a + math.min(k + 1000, m) - 1))
  end
end
local a = 6
batch('HSET', KEYS[3], a, 2 * nset)
a = a + 2 * nset
batch('HDEL', KEYS[3], a, ndel)
a = a + ndel
for k = 0, nspan - 1 do
  local job, span = ARGV[a + 2 * k], tonumber(ARGV[a + 2 * k + 1])
  local cur = tonumber(redis.call('HGET', KEYS[4], job) or '0') or 0
  if span > cur then redis.call('HSET', KEYS[4], job, ARGV[a + 2 * k + 1]) end
end
a = a + 2 * nspan
for i = 5, #KEYS do
  local nadd, nrem = tonumber(ARGV[a]), tonumber(ARGV[a + 1])
  a = a + 2
  batch('ZADD', KEYS[i], a, 2 * nadd)
  a = a + 2 * nadd
  batch('ZREM', KEYS[i], a, nrem)
  a = a + nrem
end
return 1
`)
