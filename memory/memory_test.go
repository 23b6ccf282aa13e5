package memory_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/onetick/onetick"
	"github.com/onetick/onetick/backendtest"
	"github.com/onetick/onetick/memory"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestConformance(t *testing.T) {
	backendtest.Exercise(t, backendtest.Harness{
		New:    func(*testing.T) onetick.Backend { return memory.New(memory.Options{}) },
		Expire: func(_ *testing.T, b onetick.Backend) { b.(*memory.Backend).ForceExpire() },
		Stream: func(_ *testing.T, b onetick.Backend, key string) []onetick.TickRecord {
			return b.(*memory.Backend).Stream(key)
		},
	})
}
