package redis_test

import (
	"testing"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/backendtest"
	"github.com/onetick/onetick/internal/redistest"
)

// Redis hands ticks to asynq only: a River-relayed tick is Broken.
func TestRelayRiverRefusedOnRedis(t *testing.T) {
	srv := redistest.Start(t)
	backendtest.RelayRefused(t, harness(t, srv), onetick.Relay{Kind: onetick.RelayRiver})
}
