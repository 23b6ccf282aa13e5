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
	// ErrNotReplicated says that a write was applied by the store's
	// primary but not acknowledged by enough replicas in time (a backend's
	// replicated durability mode). The write stands on the primary; a
	// failover before the replicas catch up may lose it.
	ErrNotReplicated = errors.New("onetick: write not acknowledged by enough replicas")
	// ErrNotRepairable is returned by Doctor.Repair for damage onetick
	// must not touch by itself.
	ErrNotRepairable = errors.New("onetick: not repairable by onetick")
	// ErrInvalidConfig wraps every configuration error.
	ErrInvalidConfig = errors.New("onetick: invalid configuration")
	// ErrUnknownJob is returned by Ops for a job name not in its set.
	ErrUnknownJob = errors.New("onetick: unknown job")
	// ErrShardsUnsupported is returned by Sharder.Shard for more than one
	// shard on a store that keeps one leader only (the file store).
	ErrShardsUnsupported = errors.New("onetick: the store does not shard")
	// ErrLedgerOff is returned by a store's ledger reads when its
	// configuration keeps no ledger (LedgerRetention.Off).
	ErrLedgerOff = errors.New("onetick: the run ledger is off (ledger.off in the configuration)")
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

// InputError is bad input to an operation: the CLI exits 2, the HTTP API
// answers 400. Nothing was changed.
type InputError struct{ Msg string }

func (e *InputError) Error() string { return e.Msg }

func inputErr(format string, args ...any) error {
	return &InputError{Msg: fmt.Sprintf(format, args...)}
}

// ErrDamaged is wrapped by every *DamageError: state the store keeps for
// onetick cannot be used as it is (a key of another type, a value that does
// not parse, a lease that never expires). onetick never guesses around such
// state: it refuses the part of the work that depends on it, says which key
// is damaged, and leaves the repair to the operator (`onetick repair`).
var ErrDamaged = errors.New("onetick: damaged store state")

// DamageKind says what is wrong with a piece of store state.
type DamageKind string

const (
	// DamageType: the key holds another type than onetick keeps there.
	DamageType DamageKind = "type"
	// DamageValue: the value does not parse.
	DamageValue DamageKind = "value"
	// DamageNoExpiry: a lease without an expiry; onetick always sets one,
	// so nobody could ever take it over.
	DamageNoExpiry DamageKind = "no-expiry"
)

// DamageError names one damaged piece of store state.
type DamageError struct {
	Kind DamageKind `json:"kind"`
	// Key is the store's key (or table) that is damaged.
	Key string `json:"key"`
	// Field is the part of Key that is damaged, where only a part is: a
	// job's field of the last-fired hash, an entry of the history list.
	Field string `json:"field,omitempty"`
	// Job is the job whose state this is, if it belongs to one job.
	Job string `json:"job,omitempty"`
	// Reason says what is wrong, in terms an operator can act on.
	Reason string `json:"reason"`
	// Value is the damaged value, for DamageValue and DamageNoExpiry:
	// Repair moves it aside only if it is still exactly this.
	Value string `json:"value,omitempty"`
	// Repairable is true when `onetick repair` can move the damage aside:
	// the key belongs to onetick. A job's stream belongs to its consumers,
	// so onetick never touches it.
	Repairable bool `json:"repairable"`
}

func (e *DamageError) Error() string {
	where := "key " + e.Key
	if e.Field != "" {
		where += " field " + e.Field
	}
	return "onetick: damaged store state: " + where + ": " + e.Reason
}

// Unwrap makes errors.Is(err, ErrDamaged) hold.
func (e *DamageError) Unwrap() error { return ErrDamaged }

// DamageErrors is several damaged pieces found by one read.
type DamageErrors []*DamageError

func (es DamageErrors) Error() string {
	if len(es) == 1 {
		return es[0].Error()
	}
	s := fmt.Sprintf("onetick: %d damaged pieces of store state: ", len(es))
	for i, e := range es {
		if i > 0 {
			s += "; "
		}
		s += e.Key
		if e.Field != "" {
			s += " field " + e.Field
		}
		s += ": " + e.Reason
	}
	return s
}

// Unwrap returns each damage, so errors.Is(err, ErrDamaged) holds.
func (es DamageErrors) Unwrap() []error {
	out := make([]error, len(es))
	for i, e := range es {
		out[i] = e
	}
	return out
}

// Damages returns every *DamageError in err (joined, wrapped or a
// DamageErrors), or nil.
func Damages(err error) []*DamageError {
	var out []*DamageError
	var walk func(error)
	walk = func(err error) {
		switch e := err.(type) {
		case nil:
		case *DamageError:
			out = append(out, e)
		case DamageErrors:
			out = append(out, e...)
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			walk(e.Unwrap())
		}
	}
	walk(err)
	return out
}
