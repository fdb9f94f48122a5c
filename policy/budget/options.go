package budget

import "fmt"

// DefaultMaxAbandoned is how many detached calls a budgeted store lets run
// on past their budget (see WithMaxAbandoned).
const DefaultMaxAbandoned = 1024

// Option configures the store New returns. An invalid option makes New
// return an error naming it.
type Option func(*config) error

type config struct {
	inline          bool
	maxAbandoned    int
	maxAbandonedSet bool
}

// WithInline runs each call on the caller's goroutine and relies on the
// wrapped store to honour its context's deadline, saving a goroutine and a
// copy of the value per call. A store that ignores its context is then no
// longer cut off at the budget; see the package documentation ("Time
// budget"). It cannot be combined with WithMaxAbandoned.
func WithInline() Option {
	return func(c *config) error {
		c.inline = true
		return nil
	}
}

// WithMaxAbandoned bounds how many detached calls cut off at their budget
// may still be running (default DefaultMaxAbandoned); past the bound a new
// call fails at once with an error wrapping store.ErrUnavailable. n must
// be at least 1.
func WithMaxAbandoned(n int) Option {
	return func(c *config) error {
		if n < 1 {
			return fmt.Errorf("WithMaxAbandoned(%d): must be at least 1", n)
		}
		c.maxAbandoned = n
		c.maxAbandonedSet = true
		return nil
	}
}
