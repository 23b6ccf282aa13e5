package storekit_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain is the worker kit's while the package has no main_test.go; the
// merge keeps one.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
