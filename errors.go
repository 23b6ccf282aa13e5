package onetick

import (
	"errors"
	"fmt"
)

var (
	// ErrLeaseHeld is returned (wrapped in *HeldError) by Acquire when
	// another holder has the lease.
	ErrLeaseHeld = errors.New("onetick: lease held by another replica")
	// ErrLeaseLost is returned by Renew and Release when the store no longer
	// holds the caller's lease.
	ErrLeaseLost = errors.New("onetick: lease lost")
	// ErrFenced is returned by Claim when the store no longer holds the
	// caller's lease: the caller is a superseded leader and nothing was
	// written.
	ErrFenced = errors.New("onetick: claim fenced: lease superseded")
	// ErrInvalidConfig wraps every configuration error.
	ErrInvalidConfig = errors.New("onetick: invalid configuration")
)

// HeldError describes who holds the lease when Acquire fails.
type HeldError struct {
	Leader LeaderInfo
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("onetick: lease held by %q (epoch %d, %s left)", e.Leader.Lease.Holder, e.Leader.Lease.Epoch, e.Leader.TTL)
}

// Unwrap makes errors.Is(err, ErrLeaseHeld) hold.
func (e *HeldError) Unwrap() error { return ErrLeaseHeld }

// ConfigError names the field that is wrong.
type ConfigError struct {
	Field string
	Msg   string
}

func (e *ConfigError) Error() string { return e.Field + ": " + e.Msg }

// Unwrap makes errors.Is(err, ErrInvalidConfig) hold.
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

func configErr(field, format string, args ...any) error {
	return &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
}
