// Package storekit holds the rules every onetick store applies, written
// once: the stores read and write their own state, the kit decides.
//
// The rules here:
//
//   - the claim's decision for one tick (Decide): given what a store read
//     for the tick (its record, its job's last-fired slot and pause
//     intervals, damage), which Outcome it gets and what the store
//     writes: the record and its token, the move of the last-fired slot,
//     the append to the stream;
//   - the token conventions of tick records (PausedToken, ManualToken);
//   - the pause rules (Pause, Resume, DropPassed, MaxIntervals) and the
//     control log's words (AlreadyPaused, WasNotPaused);
//   - the enqueue of triggers and backfills (Manual): one job's ticks of
//     one kind, the per-tick decision and the control log's detail;
//   - the worker store's Begin, Finish and Heartbeat over the primitives
//     of one transaction (work*.go);
//   - how a store answers Sharder.Shard (Shard): checked numbers, a view
//     never sharded again, shard 0 of 1 the store itself.
//
// A store uses it as an adapter: inside its own atomic step it reads
// what a View asks for, calls Decide, and applies the Decision to its
// state (the memory and SQLite stores do exactly that; PostgreSQL decides
// in Go between its batched read and its batched write). The Redis store
// keeps the same rules in Lua, for atomicity on the server; ClaimCases
// and PauseCases are the one table of cases that the kit's tests and
// each store's tests run, so the Lua and the kit cannot drift apart
// unnoticed. The run ledger's rules (Note) run in Go on every store: the
// Redis scripts append events to a log that the store folds with Note,
// and NoteCases holds that path to the same table of cases.
package storekit
