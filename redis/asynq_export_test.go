package redis

import "github.com/onetick/onetick"

// RelayTask exposes relayTask to the tests: a relayed tick's asynq queue,
// task id and encoded TaskMessage.
func RelayTask(t onetick.Tick, kind string) (queue, id string, msg []byte) { return relayTask(t, kind) }
