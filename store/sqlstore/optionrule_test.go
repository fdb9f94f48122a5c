package sqlstore_test

import (
	"testing"
	"time"

	"github.com/idemkit/idemkit/internal/options/optionstest"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// TestOptionsFollowTheOptionRule: every option of the package is accepted
// when valid and refused, naming itself, when not; an option that could
// not take effect with the others is refused, not ignored; a nil option
// is refused by its position counted from 1; every error is reported,
// not only the first; every error wraps store.ErrInvalid. New makes no
// round trip.
func TestOptionsFollowTheOptionRule(t *testing.T) {
	hook := func(int64, error) {}
	cases := []struct {
		name, option string // option names the exported option the case covers
		mysql        bool   // the MySQL dialect rather than PostgreSQL
		opts         []sqlstore.Option
		errs         []string // what New's error says, or nil when it accepts opts
	}{
		{name: "none"},
		{name: "table", option: "WithTable", opts: []sqlstore.Option{sqlstore.WithTable("idem.records")}},
		{name: "bad table", option: "WithTable", opts: []sqlstore.Option{sqlstore.WithTable("a.b.c")}, errs: []string{`WithTable("a.b.c"): `}},
		{name: "empty table", option: "WithTable", opts: []sqlstore.Option{sqlstore.WithTable("")}, errs: []string{`WithTable(""): `}},
		{name: "outbox table", option: "WithOutboxTable", opts: []sqlstore.Option{sqlstore.WithOutboxTable("idem.events")}},
		{name: "bad outbox table", option: "WithOutboxTable", opts: []sqlstore.Option{sqlstore.WithOutboxTable("1x")}, errs: []string{`WithOutboxTable("1x"): `}},
		{name: "outbox table is the record table", option: "WithOutboxTable",
			opts: []sqlstore.Option{sqlstore.WithTable("idem"), sqlstore.WithOutboxTable("idem")},
			errs: []string{`WithOutboxTable("idem"): `, "WithTable"}},
		{name: "sweep interval", option: "WithSweepInterval", opts: []sqlstore.Option{sqlstore.WithSweepInterval(time.Second)}},
		{name: "zero sweep interval", option: "WithSweepInterval", opts: []sqlstore.Option{sqlstore.WithSweepInterval(0)}, errs: []string{"WithSweepInterval(0s): "}},
		{name: "sweep batch", option: "WithSweepBatch", opts: []sqlstore.Option{sqlstore.WithSweepBatch(100_000)}},
		{name: "zero sweep batch", option: "WithSweepBatch", opts: []sqlstore.Option{sqlstore.WithSweepBatch(0)}, errs: []string{"WithSweepBatch(0): "}},
		{name: "sweep batch too large", option: "WithSweepBatch", opts: []sqlstore.Option{sqlstore.WithSweepBatch(100_001)}, errs: []string{"WithSweepBatch(100001): "}},
		{name: "without sweeper", option: "WithoutSweeper", opts: []sqlstore.Option{sqlstore.WithoutSweeper(), sqlstore.WithSweepBatch(10)}},
		{name: "without sweeper and an interval", option: "WithoutSweeper",
			opts: []sqlstore.Option{sqlstore.WithSweepInterval(time.Second), sqlstore.WithoutSweeper()},
			errs: []string{"WithoutSweeper: ", "WithSweepInterval(1s)"}},
		{name: "without sweeper and a hook", option: "WithoutSweeper",
			opts: []sqlstore.Option{sqlstore.WithoutSweeper(), sqlstore.WithOnSweep(hook)},
			errs: []string{"WithoutSweeper: ", "WithOnSweep"}},
		{name: "sweep hook", option: "WithOnSweep", opts: []sqlstore.Option{sqlstore.WithOnSweep(hook)}},
		{name: "nil sweep hook", option: "WithOnSweep", opts: []sqlstore.Option{sqlstore.WithOnSweep(nil)}, errs: []string{"WithOnSweep(nil): "}},
		{name: "async claims", option: "WithAsyncClaims", opts: []sqlstore.Option{sqlstore.WithAsyncClaims()}},
		{name: "async claims on MySQL", option: "WithAsyncClaims", mysql: true, opts: []sqlstore.Option{sqlstore.WithAsyncClaims()},
			errs: []string{"WithAsyncClaims: "}},
		{name: "nil", opts: []sqlstore.Option{sqlstore.WithSweepBatch(10), nil}, errs: []string{"sqlstore.New: store: invalid argument: option 2 is nil"}},
		{name: "every error", mysql: true,
			opts: []sqlstore.Option{nil, sqlstore.WithSweepBatch(0), sqlstore.WithTable("a.b.c"), sqlstore.WithAsyncClaims(), sqlstore.WithOnSweep(nil), nil},
			errs: []string{"option 1 is nil", "WithSweepBatch(0): ", `WithTable("a.b.c"): `, "WithOnSweep(nil): ", "option 6 is nil", "WithAsyncClaims: "}},
	}
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.option)
		b := pg
		if c.mysql {
			b = my
		}
		s, err := sqlstore.New(b.db, b.dialect, c.opts...)
		if s != nil {
			s.Close()
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
