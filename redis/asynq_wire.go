package redis

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// asynq's data layout, as github.com/hibiken/asynq v0.26.0 writes it
// (internal/base/base.go and internal/rdb/rdb.go's enqueueCmd), which is
// the layout this file targets. asynq's protobuf package is internal, so
// its TaskMessage (internal/proto/asynq.proto) is encoded here by hand,
// with the same field numbers and wire types.
const (
	// AsynqLayout names the asynq release whose Redis layout the relay
	// writes.
	AsynqLayout = "v0.26.0"

	asynqQueues = "asynq:queues" // SET of queue names
)

// asynqQueuePrefix is the prefix of every key of queue q; the braces are
// asynq's own Redis Cluster hash tag.
func asynqQueuePrefix(q string) string { return "asynq:{" + q + "}:" }

// asynqTaskKey is the hash of task id in queue q: msg, state,
// pending_since.
func asynqTaskKey(q, id string) string { return asynqQueuePrefix(q) + "t:" + id }

// asynqPendingKey is queue q's list of pending task ids (LPUSH, workers
// take from the right).
func asynqPendingKey(q string) string { return asynqQueuePrefix(q) + "pending" }

// asynqMsg is the part of asynq's TaskMessage a relay sets.
type asynqMsg struct {
	Type      string
	Payload   []byte
	ID        string
	Queue     string
	Retry     int32 // max retries (asynq's MaxRetry)
	Timeout   int64 // seconds
	Retention int64 // seconds
}

// TaskMessage field numbers at v0.26.0 (asynq.proto; next id 16).
const (
	fType         = 1  // string
	fPayload      = 2  // bytes
	fID           = 3  // string
	fQueue        = 4  // string
	fRetry        = 5  // int32
	fRetried      = 6  // int32
	fErrorMsg     = 7  // string
	fTimeout      = 8  // int64
	fDeadline     = 9  // int64
	fUniqueKey    = 10 // string
	fLastFailedAt = 11 // int64
	fRetention    = 12 // int64
	fCompletedAt  = 13 // int64
	fGroupKey     = 14 // string
	fHeaders      = 15 // map<string, string>
)

// encode returns m in protobuf wire format, as proto.Marshal of asynq's
// TaskMessage writes it (fields in number order, zero values omitted).
func (m asynqMsg) encode() []byte {
	var b []byte
	str := func(n protowire.Number, s string) {
		if s != "" {
			b = protowire.AppendTag(b, n, protowire.BytesType)
			b = protowire.AppendString(b, s)
		}
	}
	num := func(n protowire.Number, v int64) {
		if v != 0 {
			b = protowire.AppendTag(b, n, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(v))
		}
	}
	str(fType, m.Type)
	if len(m.Payload) > 0 {
		b = protowire.AppendTag(b, fPayload, protowire.BytesType)
		b = protowire.AppendBytes(b, m.Payload)
	}
	str(fID, m.ID)
	str(fQueue, m.Queue)
	num(fRetry, int64(m.Retry))
	num(fTimeout, m.Timeout)
	num(fRetention, m.Retention)
	return b
}

// checkAsynqMsg reports whether b reads as a v0.26.0 TaskMessage: every
// field one v0.26.0 knows, with its wire type. A field number beyond them
// is the mark of a newer layout.
func checkAsynqMsg(b []byte) error {
	for len(b) > 0 {
		n, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return fmt.Errorf("msg is not protobuf: %v", protowire.ParseError(l))
		}
		var want protowire.Type
		switch n {
		case fType, fPayload, fID, fQueue, fErrorMsg, fUniqueKey, fGroupKey, fHeaders:
			want = protowire.BytesType
		case fRetry, fRetried, fTimeout, fDeadline, fLastFailedAt, fRetention, fCompletedAt:
			want = protowire.VarintType
		default:
			return fmt.Errorf("msg has field %d, which asynq %s's TaskMessage does not have (a newer asynq layout)", n, AsynqLayout)
		}
		if typ != want {
			return fmt.Errorf("msg's field %d has wire type %d, not %d as in asynq %s", n, typ, want, AsynqLayout)
		}
		b = b[l:]
		l = protowire.ConsumeFieldValue(n, typ, b)
		if l < 0 {
			return fmt.Errorf("msg's field %d does not parse: %v", n, protowire.ParseError(l))
		}
		b = b[l:]
	}
	return nil
}
