//go:build !linux

package executor

import (
	"context"
	"errors"
)

// Execute is unavailable: NewCommand refuses to build a Command outside
// Linux.
func (c *Command) Execute(context.Context, Run) error {
	return errors.New("executor: the command executor requires Linux")
}
