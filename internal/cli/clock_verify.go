//go:build verify

package cli

import (
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/onetick/onetick/internal/clockskew"
)

// testClock, in the verification build only, shifts the replica's clock by
// ONETICK_TEST_CLOCK_OFFSET (a Go duration, negative = behind), so the
// suite can run a replica whose clock runs ahead of or behind the store's.
func testClock(getenv func(string) string) (clockwork.Clock, error) {
	v := getenv("ONETICK_TEST_CLOCK_OFFSET")
	if v == "" {
		return nil, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		return nil, fmt.Errorf("ONETICK_TEST_CLOCK_OFFSET: %v", err)
	}
	return clockskew.New(d), nil
}
