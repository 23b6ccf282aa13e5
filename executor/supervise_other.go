//go:build !linux

package executor

import "errors"

// MaybeSupervise must be the first call in main of a program that uses the
// command executor. The command executor supervises processes with Linux
// facilities; elsewhere this does nothing.
func MaybeSupervise() {}

func supervisorAvailable() error {
	return errors.New("executor: the command executor requires Linux")
}
