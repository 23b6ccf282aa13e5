package storekit

import "github.com/onetick/onetick"

// Relays: a tick whose job names a relay (Tick.Relay) reaches only a
// store that hands that relay's ticks in its claim. Every other store
// answers it Broken, naming the job, rather than append it to the job's
// stream, where no consumer of the relay looks. A store that relays says
// which kind (View.Relays, ManualBatch.Relays); the zero value refuses
// every relay.

// RelayRefused is the damage that holds tick t of a store that hands
// ticks of relay kind relays ("" none), or nil when the store takes it:
// t has no relay, or its relay is the store's.
func RelayRefused(t onetick.Tick, relays string) *onetick.DamageError {
	return relayRefused(t.Job, t.Relay, relays)
}

func relayRefused(job string, r *onetick.Relay, relays string) *onetick.DamageError {
	if !r.InClaim() || r.Kind == relays {
		// No relay, a relay the store hands, or NATS (its ticks go to the
		// stream; the worker's relay consumer publishes them).
		return nil
	}
	return &onetick.DamageError{Kind: onetick.DamageType, Key: "relay", Field: r.Kind, Job: job,
		Reason: "job " + job + " relays its ticks to " + r.Kind + ", which this store cannot hand ticks to " +
			"(its ticks are held, not appended to its stream)"}
}

// RelayDetail is the detail of a relayed tick's enqueued event in the
// ledger: where the claim handed it.
func RelayDetail(t onetick.Tick) string {
	if !t.Relay.InClaim() {
		return ""
	}
	return "relayed to " + t.Relay.Kind
}
