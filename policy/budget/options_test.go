package budget_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/policy/budget"
)

// Every option: a valid value is accepted, each invalid value is refused
// with an error wrapping ErrInvalid that names the option, and a nil
// option is refused with its position.
func TestOptionsFollowTheOptionRule(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []budget.Option
		want string // "" for accepted
	}{
		{"WithInline", []budget.Option{budget.WithInline()}, ""},
		{"WithMaxAbandoned(1)", []budget.Option{budget.WithMaxAbandoned(1)}, ""},
		{"WithMaxAbandoned(0)", []budget.Option{budget.WithMaxAbandoned(0)}, "WithMaxAbandoned(0)"},
		{"WithMaxAbandoned(-1)", []budget.Option{budget.WithMaxAbandoned(-1)}, "WithMaxAbandoned(-1)"},
		{"WithMaxAbandoned with WithInline", []budget.Option{budget.WithInline(), budget.WithMaxAbandoned(8)}, "WithMaxAbandoned: no calls are detached with WithInline"},
		{"nil option", []budget.Option{budget.WithInline(), nil}, "option 2 is nil"},
	} {
		_, err := budget.New(newMem(t), time.Second, c.opts...)
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
