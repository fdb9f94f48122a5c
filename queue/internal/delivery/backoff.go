package delivery

import (
	"fmt"
	"time"

	"github.com/idemkit/idemkit"
)

// Backoff is the redelivery schedule after a failure: the first delay,
// doubled for each later attempt up to Max, and the number of attempts a
// failing effect gets.
type Backoff struct {
	// First is the delay after the first failed attempt (0: at once).
	First time.Duration
	// Max caps the delay; it is at least First.
	Max time.Duration
	// Attempts is how many times a failing effect runs before its message
	// is dropped (0: no bound).
	Attempts int
}

// check refuses a negative delay, a cap under the first delay and a
// negative attempt count.
func (b Backoff) check() error {
	switch {
	case b.First < 0:
		return fmt.Errorf("%w: negative retry delay %v", idemkit.ErrInvalid, b.First)
	case b.Max < b.First:
		return fmt.Errorf("%w: maximum retry delay %v is under the first delay %v", idemkit.ErrInvalid, b.Max, b.First)
	case b.Attempts < 0:
		return fmt.Errorf("%w: negative attempt count %d", idemkit.ErrInvalid, b.Attempts)
	}
	return nil
}

// Delay returns the delay after the failed attempt number attempt (from
// 1; 0 counts as 1): First, doubled for each attempt after the first,
// capped at Max.
func (b Backoff) Delay(attempt int) time.Duration {
	d := b.First
	for n := 1; n < attempt && d < b.Max; n++ {
		d *= 2
	}
	return min(d, b.Max)
}

// Exhausted reports whether attempt is the last one allowed.
func (b Backoff) Exhausted(attempt int) bool {
	return b.Attempts > 0 && max(attempt, 1) >= b.Attempts
}
