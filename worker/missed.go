package worker

import "context"

// ReasonTakeover is the reason label of worker_missed_ticks_total for a
// tick taken over from a consumer that may have done its work already,
// which the handler drops rather than do twice (a relay's publish, for a
// job that prefers missed).
const ReasonTakeover = "takeover"

type missedKey struct{}

// Missed counts, from a handler's context, the running attempt's tick as
// a slot missed for reason, in worker_missed_ticks_total of the job's
// preference. The handler drops the tick: it returns nil, and the tick is
// finished as succeeded (say why with Report). Missed does nothing
// outside a handler's context.
func Missed(ctx context.Context, reason string) {
	if f, _ := ctx.Value(missedKey{}).(func(string)); f != nil {
		f(reason)
	}
}
