//go:build !unix

package sqlite

import (
	"errors"
	"os"
)

// tryLock: without flock(2) no term lock proves its holder dead, and a
// crashed leader's lease stands until its TTL runs out.
func tryLock(*os.File) (bool, error) {
	return false, errors.New("no flock on this system")
}
