package redistest

import (
	"testing"

	"github.com/idemkit/idemkit/internal/options/optionstest"
)

// TestOptionsFollowTheOptionRule: every option of the package is accepted
// when valid and refused, naming itself, when not; a nil option is
// refused by its position counted from 1; every error is reported, not
// only the first; every error wraps store.ErrInvalid. newConfig is what
// Start, StartMain, StartReplicated, StartSentinel and StartCluster
// apply their options with; it starts no server.
func TestOptionsFollowTheOptionRule(t *testing.T) {
	cases := []struct {
		name, option string // option names the exported option the case covers
		opts         []Option
		args         []string // the arguments the accepted options give
		errs         []string // what newConfig's error says, or nil when it accepts opts
	}{
		{name: "none"},
		{name: "args", option: "WithArgs", opts: []Option{WithArgs("--maxmemory", "1mb"), WithArgs("--appendonly", "no")},
			args: []string{"--maxmemory", "1mb", "--appendonly", "no"}},
		{name: "no args", option: "WithArgs", opts: []Option{WithArgs()}, errs: []string{"WithArgs(): "}},
		{name: "nil", opts: []Option{WithArgs("--appendonly", "no"), nil}, errs: []string{"redistest: store: invalid argument: option 2 is nil"}},
		{name: "every error", opts: []Option{nil, WithArgs(), nil}, errs: []string{"option 1 is nil", "WithArgs(): ", "option 3 is nil"}},
	}
	var covered []string
	for _, c := range cases {
		covered = append(covered, c.option)
		cfg, err := newConfig(c.opts)
		if c.errs == nil {
			if err != nil {
				t.Errorf("%s: %v, want it accepted", c.name, err)
			} else if len(cfg.args) != len(c.args) {
				t.Errorf("%s: args %q, want %q", c.name, cfg.args, c.args)
			}
			continue
		}
		optionstest.Refused(t, c.name, err, c.errs...)
	}
	optionstest.Covered(t, optionstest.Exported(t, ".", "Option"), covered)
}
