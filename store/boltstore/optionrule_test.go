package boltstore_test

import (
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/idemkit/idemkit/internal/options/optionstest"
	"github.com/idemkit/idemkit/store/boltstore"
)

// TestOptionsFollowTheOptionRule: every option of the package is accepted
// by Open when valid and refused, naming itself, when not; New refuses
// the options only Open applies, every one of them; a nil option is
// refused by its position counted from 1; every error is reported, not
// only the first; every error wraps store.ErrInvalid.
func TestOptionsFollowTheOptionRule(t *testing.T) {
	now := func() time.Time { return time.Unix(1, 0) }
	long := strings.Repeat("b", bolt.MaxKeySize+1)
	cases := []struct {
		name, option string // option names the exported option the case covers
		forNew       bool   // New rather than Open
		opts         []boltstore.Option
		errs         []string // what the error says, or nil when the options are accepted
	}{
		{name: "none"},
		{name: "open timeout", option: "WithOpenTimeout", opts: []boltstore.Option{boltstore.WithOpenTimeout(time.Second)}},
		{name: "zero open timeout", option: "WithOpenTimeout", opts: []boltstore.Option{boltstore.WithOpenTimeout(0)}, errs: []string{"WithOpenTimeout(0s): "}},
		{name: "open timeout on New", option: "WithOpenTimeout", forNew: true, opts: []boltstore.Option{boltstore.WithOpenTimeout(time.Second)},
			errs: []string{"WithOpenTimeout applies to Open only"}},
		{name: "sweep interval", option: "WithSweepInterval", opts: []boltstore.Option{boltstore.WithSweepInterval(time.Minute)}},
		{name: "sweep interval on New", option: "WithSweepInterval", forNew: true, opts: []boltstore.Option{boltstore.WithSweepInterval(time.Minute)}},
		{name: "zero sweep interval", option: "WithSweepInterval", opts: []boltstore.Option{boltstore.WithSweepInterval(0)}, errs: []string{"WithSweepInterval(0s): "}},
		{name: "without sweeper", option: "WithoutSweeper", opts: []boltstore.Option{boltstore.WithoutSweeper(), boltstore.WithSweepBatch(10)}},
		{name: "without sweeper and an interval", option: "WithoutSweeper", opts: []boltstore.Option{boltstore.WithSweepInterval(time.Second), boltstore.WithoutSweeper()},
			errs: []string{"WithoutSweeper: ", "WithSweepInterval(1s)"}},
		{name: "sweep batch", option: "WithSweepBatch", opts: []boltstore.Option{boltstore.WithSweepBatch(boltstore.MaxSweepBatch)}},
		{name: "zero sweep batch", option: "WithSweepBatch", opts: []boltstore.Option{boltstore.WithSweepBatch(0)}, errs: []string{"WithSweepBatch(0): "}},
		{name: "sweep batch too large", option: "WithSweepBatch", opts: []boltstore.Option{boltstore.WithSweepBatch(boltstore.MaxSweepBatch + 1)},
			errs: []string{"WithSweepBatch(1048577): "}},
		{name: "no sync", option: "WithNoSync", opts: []boltstore.Option{boltstore.WithNoSync()}},
		{name: "no sync on New", option: "WithNoSync", forNew: true, opts: []boltstore.Option{boltstore.WithNoSync()},
			errs: []string{"WithNoSync applies to Open only"}},
		{name: "bucket", option: "WithBucket", opts: []boltstore.Option{boltstore.WithBucket("mine")}},
		{name: "empty bucket", option: "WithBucket", opts: []boltstore.Option{boltstore.WithBucket("")}, errs: []string{"WithBucket: "}},
		{name: "long bucket", option: "WithBucket", opts: []boltstore.Option{boltstore.WithBucket(long)}, errs: []string{"WithBucket: "}},
		{name: "bucket on New", option: "WithBucket", forNew: true, opts: []boltstore.Option{boltstore.WithBucket("mine")},
			errs: []string{"WithBucket applies to Open only"}},
		{name: "clock", option: "WithClock", opts: []boltstore.Option{boltstore.WithClock(now)}},
		{name: "nil clock", option: "WithClock", opts: []boltstore.Option{boltstore.WithClock(nil)}, errs: []string{"WithClock(nil): "}},
		{name: "nil", opts: []boltstore.Option{boltstore.WithNoSync(), nil}, errs: []string{"boltstore: store: invalid argument: option 2 is nil"}},
		{name: "every error", opts: []boltstore.Option{nil, boltstore.WithSweepBatch(0), boltstore.WithNoSync(), boltstore.WithClock(nil), nil},
			errs: []string{"option 1 is nil", "WithSweepBatch(0): ", "WithClock(nil): ", "option 5 is nil"}},
		{name: "every Open-only option on New", forNew: true, opts: []boltstore.Option{boltstore.WithNoSync(), boltstore.WithBucket("mine")},
			errs: []string{"WithNoSync applies to Open only", "WithBucket applies to Open only"}},
	}
	db := openDB(t)
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.option)
		var s *boltstore.Store
		var err error
		if c.forNew {
			s, err = boltstore.New(db, testBucket, c.opts...)
		} else {
			s, err = boltstore.Open(t.TempDir()+"/x.db", c.opts...)
		}
		if s != nil {
			_ = s.Close()
		}
		if c.errs == nil {
			if err != nil {
				t.Errorf("%s: %v, want it accepted", c.name, err)
			}
			continue
		}
		if s != nil {
			t.Errorf("%s: a Store returned with its error", c.name)
		}
		optionstest.Refused(t, c.name, err, c.errs...)
	}
	optionstest.Covered(t, optionstest.Exported(t, ".", "Option"), covered)
}
