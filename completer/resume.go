package completer

import (
	"context"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/internal/options"
	"github.com/idemkit/idemkit/store"
)

// Outcome is what Resume did with one abandoned operation.
type Outcome struct {
	Abandoned
	// Resumed is set when this pass took the operation over and ran its
	// function: Result is what the function returned (recorded when Err
	// is nil), and Err its error or the error recording it.
	Resumed bool
	Result  idemkit.Result
	// Err is, when Resumed is not set, why the operation was left as it
	// is: wrapping idemkit.ErrNoInput (claimed without idemkit.WithInput),
	// idemkit.ErrNoFunction (no function for its name: it stays abandoned
	// and is reported again by the next pass), idemkit.ErrNotAbandoned
	// (another caller took it over since the listing), or the store's
	// error.
	Err error
}

// Resumed is what one Resume pass did: the Report of its listing, and
// the outcome of every abandoned operation in it, oldest first.
type Resumed struct {
	Report
	Outcomes []Outcome
}

// Resume finds the operations abandoned under e as Find does, then takes
// each over and finishes it with the function funcs registers for its
// name (see idemkit.WithInput and Engine.Resume): its recorded steps are
// skipped and the rest run with its stored input. An operation it cannot
// resume is reported in its Outcome and left as it is, never dropped.
// Several instances may run it at once: each operation is taken over by
// one of them, with a fencing token above its abandoned claim's. It
// returns an error only when the listing fails.
func Resume(ctx context.Context, e *idemkit.Engine, s store.Scanner, funcs idemkit.Funcs, opts ...Option) (Resumed, error) {
	rep, err := Find(ctx, e, s, opts...)
	if err != nil {
		return Resumed{}, err
	}
	cfg := defaultConfig()
	_ = options.Apply(&cfg, opts) // Find applied them without an error
	out := Resumed{Report: rep, Outcomes: make([]Outcome, 0, len(rep.Abandoned))}
	for _, a := range rep.Abandoned {
		if ctx.Err() != nil {
			return out, nil
		}
		o := Outcome{Abandoned: a}
		ran := make(idemkit.Funcs, len(funcs)) // notes whether the function ran
		for name, f := range funcs {
			ran[name] = func(ctx context.Context, input []byte) ([]byte, error) {
				o.Resumed = true
				return f(ctx, input)
			}
		}
		o.Result, o.Err = e.Resume(ctx, a.StoreKey, ran)
		out.Outcomes = append(out.Outcomes, o)
		if cfg.outcomes != nil {
			cfg.outcomes(o)
		}
	}
	return out, nil
}
