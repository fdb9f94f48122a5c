package setup

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/policy"
	"github.com/idemkit/idemkit/store"
	_ "github.com/idemkit/idemkit/store/memstore" // mem://, the usual fallback
)

// defaultBudget is the budget of network stores when Config.Budget is 0.
const defaultBudget = policy.DefaultBudget

// TierEvent is a change of the fallback's breaker or a copy problem; see
// policy.TierEvent.
type TierEvent = policy.TierEvent

// Stack is the store stack Build assembled: give Store and Options to
// idemkit.New (or call NewEngine), and Close it when the engine is done.
type Stack struct {
	// Store is the outermost store of the stack, for idemkit.New.
	Store store.Store
	// Options are the engine options the configuration implies (the
	// failure mode), to pass to idemkit.New before the program's own.
	Options []idemkit.Option
	// Tiered is the fallback breaker, nil without a fallback: its Stats
	// and State tell how the fallback is used.
	Tiered *policy.Tiered
	// Near is the near cache, nil without one: its Stats count hits.
	Near *policy.NearCache

	desc    string
	openFn  func(ctx context.Context, rawURL string) (store.Store, error)
	closers []func() error // in the order Close calls them
}

// Build opens the stores c names and assembles the stack. Every error
// wraps ErrConfig (or store.ErrInvalid from a store URL it cannot use, or
// store.ErrUnavailable from a backend that cannot be opened) and never
// quotes a password. Build sends nothing to a network store: use
// store.Pinger on Stack.Store to learn whether it answers.
func Build(ctx context.Context, c Config) (*Stack, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	st := &Stack{desc: c.String(), openFn: c.Open, Options: []idemkit.Option{idemkit.WithFailureMode(c.OnStoreError)}}
	primary, err := st.open(ctx, "store", c.Store, c.budgetFor(c.Store))
	if err != nil {
		return nil, err
	}
	st.Store = primary
	if c.Fallback != "" {
		fallback, err := st.open(ctx, "fallback", c.Fallback, c.budgetFor(c.Fallback))
		if err != nil {
			return nil, errors.Join(err, st.Close())
		}
		var opts []policy.TieredOption
		if c.OnTierEvent != nil {
			opts = append(opts, policy.WithTierObserver(c.OnTierEvent))
		}
		st.Tiered = policy.NewTiered(primary, fallback, opts...)
		st.Store = st.Tiered
		// The breaker stops copying before the stores under it close.
		st.closers = append([]func() error{st.Tiered.Close}, st.closers...)
	}
	if c.NearCache > 0 {
		st.Near = policy.NewNearCache(st.Store, policy.WithSettled(idemkit.Settled), policy.WithNearCapacity(c.NearCache))
		st.Store = st.Near
	}
	return st, nil
}

// open opens the store at rawURL, wrapped in a budget of d when d > 0,
// and registers its Close.
func (st *Stack) open(ctx context.Context, what, rawURL string, d time.Duration) (store.Store, error) {
	open := store.Open
	if st.openFn != nil {
		open = st.openFn
	}
	s, err := open(ctx, rawURL)
	if err != nil {
		return nil, fmt.Errorf("setup: %s: %w", what, err)
	}
	if c, ok := s.(store.Closer); ok {
		st.closers = append(st.closers, c.Close)
	}
	if d > 0 {
		s = policy.Budget(s, d)
	}
	return s, nil
}

// NewEngine returns idemkit.New(st.Store, st.Options..., opts...).
func (st *Stack) NewEngine(opts ...idemkit.Option) (*idemkit.Engine, error) {
	return idemkit.New(st.Store, append(append([]idemkit.Option(nil), st.Options...), opts...)...)
}

// Close stops the fallback's copying and closes the stores the stack
// opened, returning their errors joined. Close the engines first.
func (st *Stack) Close() error {
	var errs []error
	for _, c := range st.closers {
		errs = append(errs, c())
	}
	st.closers = nil
	return errors.Join(errs...)
}

// String describes the stack, passwords hidden.
func (st *Stack) String() string { return st.desc }
