package nearcache_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/policy/nearcache"
)

// Every option: a valid value is accepted, each invalid value is refused
// with an error wrapping ErrInvalid that names the option, and a nil
// option is refused with its position.
func TestOptionsFollowTheOptionRule(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []nearcache.Option
		want string // "" for accepted
	}{
		{"WithCapacity(1)", []nearcache.Option{nearcache.WithCapacity(1)}, ""},
		{"WithCapacity(0)", []nearcache.Option{nearcache.WithCapacity(0)}, "WithCapacity(0)"},
		{"WithCapacity(-3)", []nearcache.Option{nearcache.WithCapacity(-3)}, "WithCapacity(-3)"},
		{"WithMaxValue(0)", []nearcache.Option{nearcache.WithMaxValue(0)}, ""},
		{"WithMaxValue(-1)", []nearcache.Option{nearcache.WithMaxValue(-1)}, "WithMaxValue(-1)"},
		{"nil option", []nearcache.Option{nearcache.WithCapacity(1), nil}, "option 2 is nil"},
	} {
		_, err := nearcache.New(newMem(t), settledS, c.opts...)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want it accepted", c.name, err)
		case c.want != "" && !errors.Is(err, idemkit.ErrInvalid):
			t.Errorf("%s: %v, want an error wrapping ErrInvalid", c.name, err)
		case c.want != "" && !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: %q does not say %q", c.name, err, c.want)
		}
	}
}
