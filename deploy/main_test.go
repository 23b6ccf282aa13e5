// Package deploy_test checks the operations files against what onetick
// exports: the Grafana dashboard and the Prometheus alert rules may only
// name metrics a replica serves.
package deploy_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
