//go:build !verify

package cli

import "github.com/jonboulle/clockwork"

// testClock is the replica's clock: the real one. The verification build
// (tag verify) replaces it with one that can be skewed, to test clock skew
// with real processes.
func testClock(func(string) string) (clockwork.Clock, error) { return nil, nil }
