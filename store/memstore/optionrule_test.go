package memstore

import (
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/options/optionstest"
)

// TestOptionsFollowTheOptionRule: every option of the package is accepted
// when valid and refused, naming itself, when not; a nil option is
// refused by its position counted from 1; every error is reported, not
// only the first; every error wraps store.ErrInvalid.
func TestOptionsFollowTheOptionRule(t *testing.T) {
	scope := func(string) string { return "" }
	key := func(string) {}
	cases := []struct {
		name, option string // option names the exported option the case covers
		opts         []Option
		errs         []string // what New's error says, or nil when it accepts opts
	}{
		{name: "capacity", option: "WithCapacity", opts: []Option{WithCapacity(1000)}},
		{name: "zero capacity", option: "WithCapacity", opts: []Option{WithCapacity(0)}, errs: []string{"WithCapacity(0): "}},
		{name: "max bytes", option: "WithMaxBytes", opts: []Option{WithMaxBytes(64 << 20)}},
		{name: "zero max bytes", option: "WithMaxBytes", opts: []Option{WithMaxBytes(0)}, errs: []string{"WithMaxBytes(0): "}},
		{name: "shards", option: "WithShards", opts: []Option{WithShards(4)}},
		{name: "too many shards", option: "WithShards", opts: []Option{WithShards(maxShards + 1)}, errs: []string{"WithShards(65537): "}},
		{name: "more shards than entries", option: "WithShards", opts: []Option{WithCapacity(10), WithShards(64)}, errs: []string{"WithShards(64): ", "WithCapacity(10)"}},
		{name: "sweep", option: "WithSweepInterval", opts: []Option{WithSweepInterval(time.Minute)}},
		{name: "zero sweep", option: "WithSweepInterval", opts: []Option{WithSweepInterval(0)}, errs: []string{"WithSweepInterval(0s): "}},
		{name: "on evict", option: "WithOnEvict", opts: []Option{WithOnEvict(key)}},
		{name: "nil on evict", option: "WithOnEvict", opts: []Option{WithOnEvict(nil)}, errs: []string{"WithOnEvict(nil): "}},
		{name: "on full", option: "WithOnFull", opts: []Option{WithOnFull(key)}},
		{name: "nil on full", option: "WithOnFull", opts: []Option{WithOnFull(nil)}, errs: []string{"WithOnFull(nil): "}},
		{name: "quota", option: "WithScopeQuota", opts: []Option{WithScopeQuota(10, scope)}},
		{name: "zero quota", option: "WithScopeQuota", opts: []Option{WithScopeQuota(0, scope)}, errs: []string{"WithScopeQuota(0): "}},
		{name: "nil scope", option: "WithScopeQuota", opts: []Option{WithScopeQuota(1, nil)}, errs: []string{"WithScopeQuota: "}},
		{name: "quota over capacity", option: "WithScopeQuota", opts: []Option{WithCapacity(10), WithScopeQuota(11, scope)}, errs: []string{"WithScopeQuota(11): ", "WithCapacity(10)"}},
		{name: "nil", opts: []Option{WithCapacity(10), nil}, errs: []string{"memstore: store: invalid argument: option 2 is nil"}},
		{name: "every error", opts: []Option{nil, WithCapacity(0), WithShards(4), WithOnEvict(nil), nil},
			errs: []string{"option 1 is nil", "WithCapacity(0): ", "WithOnEvict(nil): ", "option 5 is nil"}},
	}
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.option)
		s, err := New(c.opts...)
		if s != nil {
			_ = s.Close()
		}
		if c.errs == nil {
			if err != nil {
				t.Errorf("%s: %v, want it accepted", c.name, err)
			}
			continue
		}
		optionstest.Refused(t, c.name, err, c.errs...)
	}
	optionstest.Covered(t, optionstest.Exported(t, ".", "Option"), covered)
}
