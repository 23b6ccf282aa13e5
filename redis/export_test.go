package redis

import (
	"context"
	"strconv"

	goredis "github.com/redis/go-redis/v9"

	"github.com/onetick/onetick"
)

// noteScript appends one event to the ledger's log with the ops builders
// the scripts use: an e or p op for enqueued and paused, an r op for an
// event with a result (as a finish passes it), an n op otherwise. KEYS:
// the log. ARGV: epoch, replica, worker, job, slot, tick, what, attempt,
// detail, event JSON.
var noteScript = goredis.NewScript(luaPrelude + luaLedger + `
local op
if ARGV[10] ~= '' then
  op = lop_r(ARGV[4], ARGV[5], ARGV[6], ARGV[10])
elseif ARGV[7] == 'enqueued' then
  op = lop_e('e', ARGV[4], ARGV[5], ARGV[6], '')
elseif ARGV[7] == 'paused' then
  op = lop_e('p', ARGV[4], ARGV[5], ARGV[6], '')
else
  op = lop_n(ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8], ARGV[9])
end
return ledger_push(KEYS[1], now_ms(), ARGV[1], ARGV[2], ARGV[3], {op}, 1)
`)

// NoteLog appends ev on the record of job's tick at slot to the ledger's
// log, as the scripts do.
func (b *Backend) NoteLog(ctx context.Context, job string, slot onetick.Slot, tick string, ev onetick.RunEvent) error {
	var js string
	if ev.Result != (onetick.Result{}) {
		var err error
		if js, err = eventJSON(ev); err != nil {
			return err
		}
	}
	epoch := ""
	if ev.Epoch != 0 {
		epoch = strconv.FormatInt(int64(ev.Epoch), 10)
	}
	return noteScript.Run(ctx, b.c, []string{b.lg.log}, epoch, ev.Replica, ev.Worker, job,
		strconv.FormatInt(int64(slot), 10), tick, ev.What, strconv.Itoa(ev.Attempt), ev.Detail, js).Err()
}

// FoldAfter is the log length past which a claim folds a chunk.
func FoldAfter() int { return foldAfter }

// SetFoldAfter sets it until the returned restore is called.
func SetFoldAfter(n int) (restore func()) {
	old := foldAfter
	foldAfter = n
	return func() { foldAfter = old }
}
