package setup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/policy/budget"
	"github.com/idemkit/idemkit/policy/nearcache"
	"github.com/idemkit/idemkit/policy/tiered"
	"github.com/idemkit/idemkit/store"
	_ "github.com/idemkit/idemkit/store/memstore" // mem://, the usual fallback
)

// defaultBudget is the budget of network stores when Config.Budget is 0.
const defaultBudget = budget.Default

// TierEvent is a change of the fallback's breaker or a copy problem; see
// tiered.Event.
type TierEvent = tiered.Event

// Stack is the store stack Build assembled: give Store and Options to
// idemkit.New (or call NewEngine), and Close it when the engine is done.
type Stack struct {
	// Store is the outermost store of the stack, for idemkit.New.
	Store store.Store
	// Options are the engine options the configuration implies (the
	// failure mode), to pass to idemkit.New before the program's own.
	Options []idemkit.Option
	// Tiered is the tiered store of the fallback, nil without a fallback:
	// tiered.StatsOf(Tiered) tells how the fallback is used.
	Tiered store.Store
	// Near is the near cache, nil without one: nearcache.StatsOf(Near)
	// counts its hits.
	Near store.Store

	desc   string
	openFn func(ctx context.Context, rawURL string) (store.Store, error)
	closed bool
}

// Build opens the stores c names and assembles the stack. Every error
// wraps ErrConfig (or store.ErrInvalid from a store URL it cannot use, or
// store.ErrUnavailable from a backend that cannot be opened) and never
// quotes a password; what Build opened before an error is closed. Build
// sends nothing to a network store: use store.Pinger on Stack.Store to
// learn whether it answers.
func Build(ctx context.Context, c Config) (*Stack, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	st := &Stack{desc: c.String(), openFn: c.Open, Options: []idemkit.Option{idemkit.WithFailureMode(c.OnStoreError)}}
	if c.KeySecret != nil {
		st.Options = append(st.Options, idemkit.WithKeySecret(c.KeySecret))
	}
	primary, err := st.open(ctx, "store", c.Store, c.budgetFor(c.Store))
	if err != nil {
		return nil, err
	}
	st.Store = primary
	if c.Fallback != "" {
		if err := st.addFallback(ctx, c); err != nil {
			return nil, errors.Join(err, closeStore(st.Store))
		}
	}
	if c.NearCache > 0 {
		near, err := nearcache.New(st.Store, idemkit.Settled, nearcache.WithCapacity(c.NearCache))
		if err != nil {
			return nil, errors.Join(fmt.Errorf("setup: near cache: %w", err), closeStore(st.Store))
		}
		st.Near, st.Store = near, near
	}
	return st, nil
}

// addFallback opens c.Fallback and puts st.Store and it behind a breaker.
func (st *Stack) addFallback(ctx context.Context, c Config) error {
	fallback, err := st.open(ctx, "fallback", c.Fallback, c.budgetFor(c.Fallback))
	if err != nil {
		return err
	}
	var opts []tiered.Option
	if c.OnTierEvent != nil {
		opts = append(opts, tiered.WithObserver(c.OnTierEvent))
	}
	ts, err := tiered.New(st.Store, fallback, idemkit.Supersedes, opts...)
	if err != nil {
		return errors.Join(fmt.Errorf("setup: fallback: %w", err), closeStore(fallback))
	}
	st.Tiered, st.Store = ts, ts
	return nil
}

// open opens the store at rawURL, wrapped in a budget of d when d > 0
// (the budget then owns it).
func (st *Stack) open(ctx context.Context, what, rawURL string, d time.Duration) (store.Store, error) {
	open := store.Open
	if st.openFn != nil {
		open = st.openFn
	}
	s, err := open(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("setup: %s URL: %w", what, err)
	}
	if d <= 0 {
		return s, nil
	}
	b, err := budget.New(s, d)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("setup: %s: %w", what, err), closeStore(s))
	}
	return b, nil
}

// closeStore closes s if it is a store.Closer.
func closeStore(s store.Store) error {
	if c, ok := s.(store.Closer); ok {
		return c.Close()
	}
	return nil
}

// NewEngine returns idemkit.New(st.Store, st.Options..., opts...).
func (st *Stack) NewEngine(opts ...idemkit.Option) (*idemkit.Engine, error) {
	return idemkit.New(st.Store, append(append([]idemkit.Option(nil), st.Options...), opts...)...)
}

// Close closes the stack: each policy owns what it wraps, so closing the
// outermost store stops the fallback's copying and closes every store the
// stack opened. It returns their errors joined. Close the engines first;
// a second Close does nothing.
func (st *Stack) Close() error {
	if st.closed {
		return nil
	}
	st.closed = true
	return closeStore(st.Store)
}

// String describes the stack, passwords hidden.
func (st *Stack) String() string { return st.desc }
