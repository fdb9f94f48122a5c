package completer

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/options"
	"github.com/idemkit/idemkit/store"
)

// Kind classifies an Outcome, for metrics and logs.
type Kind uint8

const (
	// KindResumed: the pass took the operation over, ran its function
	// and recorded the result.
	KindResumed Kind = iota + 1
	// KindFailed: the pass took the operation over and ran its function,
	// which failed (or its result could not be recorded); the engine
	// settled the claim as Do settles a failure.
	KindFailed
	// KindReported: the operation cannot be resumed (claimed without
	// idemkit.WithInput, or no function is registered for its name). It
	// is left as it is, for reconciliation, and reported again by the
	// next pass.
	KindReported
	// KindTaken: another caller (a client's retry, another completer)
	// took the operation over between the listing and the take-over.
	KindTaken
	// KindError: the store failed the take-over; the next pass tries
	// again.
	KindError
)

// String returns the kind's name as metrics label it: resumed, failed,
// reported, taken or error.
func (k Kind) String() string {
	switch k {
	case KindResumed:
		return "resumed"
	case KindFailed:
		return "failed"
	case KindReported:
		return "reported"
	case KindTaken:
		return "taken"
	case KindError:
		return "error"
	}
	return fmt.Sprintf("Kind(%d)", uint8(k))
}

// Kind classifies o.
func (o Outcome) Kind() Kind {
	switch {
	case o.Resumed && o.Err == nil:
		return KindResumed
	case o.Resumed:
		return KindFailed
	case errors.Is(o.Err, idemkit.ErrNoInput), errors.Is(o.Err, idemkit.ErrNoFunction):
		return KindReported
	case errors.Is(o.Err, idemkit.ErrNotAbandoned):
		return KindTaken
	}
	return KindError
}

// Run runs Resume every interval until ctx ends, the first pass at once,
// and returns ctx's error. Pass errors (a failed listing) do not stop it:
// the next pass tries again. Give WithPasses a function to see every
// pass, WithOutcomes one for every operation. Several instances (one per
// process of a fleet) may run at once: each abandoned operation is taken
// over by one. It returns an error wrapping idemkit.ErrInvalid at once
// for a nil engine or scanner, an interval that is not positive or an
// invalid option.
func Run(ctx context.Context, e *idemkit.Engine, s store.Scanner, funcs idemkit.Funcs, every time.Duration, opts ...Option) error {
	cfg := defaultConfig()
	errs := options.Collect(&cfg, opts)
	if e == nil {
		errs = append(errs, errors.New("nil engine"))
	}
	if s == nil {
		errs = append(errs, errors.New("nil scanner"))
	}
	if every <= 0 {
		errs = append(errs, fmt.Errorf("Run: the interval %v must be positive", every))
	}
	if err := options.Invalid(errs...); err != nil {
		return fmt.Errorf("completer: %w", err)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		pass, err := Resume(ctx, e, s, funcs, opts...)
		if cfg.passes != nil && ctx.Err() == nil {
			cfg.passes(pass, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
}
