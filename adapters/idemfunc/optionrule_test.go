package idemfunc_test

import (
	"context"
	"testing"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemfunc"
	"github.com/idemkit/idemkit/internal/options/optionstest"
	"github.com/idemkit/idemkit/internal/testkit"
)

// TestOptionsFollowTheOptionRule: every option of the package is accepted
// when valid and refused, naming itself, when not; a nil option is
// refused by its position counted from 1; every error is reported, not
// only the first; every error wraps store.ErrInvalid.
func TestOptionsFollowTheOptionRule(t *testing.T) {
	e := testkit.NewEngine(t)
	fn := func(context.Context, msg) (int, error) { return 1, nil }
	fp := func(m msg) (string, error) { return m.Body, nil }
	cases := []struct {
		name, option string // option names the exported option the case covers
		opts         []idemfunc.Option[msg]
		errs         []string // what Wrap's error says, or nil when it accepts opts
	}{
		{name: "fingerprint", option: "WithFingerprint", opts: []idemfunc.Option[msg]{idemfunc.WithFingerprint(fp)}},
		{name: "nil fingerprint", option: "WithFingerprint", opts: []idemfunc.Option[msg]{idemfunc.WithFingerprint[msg](nil)}, errs: []string{"WithFingerprint(nil): "}},
		{name: "JSON fingerprint", option: "WithJSONFingerprint", opts: []idemfunc.Option[msg]{idemfunc.WithJSONFingerprint[msg]()}},
		{name: "engine options", option: "WithEngineOptions", opts: []idemfunc.Option[msg]{idemfunc.WithEngineOptions[msg](idemkit.WithRetention(60e9))}},
		{name: "bad engine option", option: "WithEngineOptions", opts: []idemfunc.Option[msg]{idemfunc.WithEngineOptions[msg](idemkit.WithRetention(0))}, errs: []string{"engine options: "}},
		{name: "nil", opts: []idemfunc.Option[msg]{idemfunc.WithJSONFingerprint[msg](), nil}, errs: []string{"idemfunc: store: invalid argument: option 2 is nil"}},
		{name: "every error", opts: []idemfunc.Option[msg]{nil, idemfunc.WithFingerprint[msg](nil), nil},
			errs: []string{"option 1 is nil", "WithFingerprint(nil): ", "option 3 is nil"}},
	}
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.option)
		_, err := idemfunc.Wrap(e, "n", byID, fn, c.opts...)
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
