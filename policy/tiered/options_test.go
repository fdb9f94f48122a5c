package tiered_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/policy/tiered"
)

// Every option: a valid value is accepted, each invalid value is refused
// with an error wrapping ErrInvalid that names the option, and a nil
// option is refused with its position.
func TestOptionsFollowTheOptionRule(t *testing.T) {
	for _, c := range []struct {
		name string
		opts []tiered.Option
		want string // "" for accepted
	}{
		{"WithFailureThreshold(1)", []tiered.Option{tiered.WithFailureThreshold(1)}, ""},
		{"WithFailureThreshold(0)", []tiered.Option{tiered.WithFailureThreshold(0)}, "WithFailureThreshold(0)"},
		{"WithCoolDown(1ms)", []tiered.Option{tiered.WithCoolDown(time.Millisecond)}, ""},
		{"WithCoolDown(0)", []tiered.Option{tiered.WithCoolDown(0)}, "WithCoolDown(0s)"},
		{"WithCoolDown(-1s)", []tiered.Option{tiered.WithCoolDown(-time.Second)}, "WithCoolDown(-1s)"},
		{"WithJournalSize(1)", []tiered.Option{tiered.WithJournalSize(1)}, ""},
		{"WithJournalSize(0)", []tiered.Option{tiered.WithJournalSize(0)}, "WithJournalSize(0)"},
		{"WithCopyTimeout(1ms)", []tiered.Option{tiered.WithCopyTimeout(time.Millisecond)}, ""},
		{"WithCopyTimeout(0)", []tiered.Option{tiered.WithCopyTimeout(0)}, "WithCopyTimeout(0s)"},
		{"WithObserver", []tiered.Option{tiered.WithObserver(func(tiered.Event) {})}, ""},
		{"WithObserver(nil)", []tiered.Option{tiered.WithObserver(nil)}, "WithObserver(nil)"},
		{"nil option", []tiered.Option{nil, tiered.WithJournalSize(1)}, "option 1 is nil"},
	} {
		s, err := tiered.New(newMem(t), newMem(t), idemkit.Supersedes, c.opts...)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want it accepted", c.name, err)
		case c.want == "":
			_ = tieredStore{s}.Close()
		case !errors.Is(err, idemkit.ErrInvalid):
			t.Errorf("%s: %v, want an error wrapping ErrInvalid", c.name, err)
		case !strings.Contains(err.Error(), c.want):
			t.Errorf("%s: %q does not say %q", c.name, err, c.want)
		}
	}
}
