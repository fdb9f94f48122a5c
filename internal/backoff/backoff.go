// Package backoff computes the retry delays of idemkit's client-side
// retries (idemhttp.Transport and the idemgrpc client interceptor): one
// exponential schedule with jitter, so both transports wait alike.
package backoff

import (
	"math/rand/v2"
	"time"
)

// The default schedule of every idemkit client (idemhttp.Transport, the
// idemgrpc client): the first retry after DefaultMin, doubling up to
// DefaultMax, which also bounds the delay a server may ask for
// (Retry-After, RetryInfo) before the client gives up. An HTTP
// Retry-After is whole seconds, at least 1, and the middleware asks for
// 1 s when its store is down: DefaultMax must leave room for a few of
// those, and DefaultMin gives a first request that is still running a
// moment to finish before the first retry.
const (
	DefaultMin = 100 * time.Millisecond
	DefaultMax = 5 * time.Second
)

// Ceiling returns base doubled attempt times, capped at limit, without
// overflowing. A non-positive base or limit returns 0.
func Ceiling(base, limit time.Duration, attempt int) time.Duration {
	if base <= 0 || limit <= 0 {
		return 0
	}
	d := base
	for range attempt {
		if d > limit/2 {
			return limit
		}
		d *= 2
	}
	return min(d, limit)
}

// Delay returns the wait before retry attempt+1: Ceiling with jitter over
// its upper half, so concurrent clients spread out without ever retrying
// sooner than half the schedule.
func Delay(base, limit time.Duration, attempt int) time.Duration {
	d := Ceiling(base, limit, attempt)
	return d/2 + rand.N(d/2+1)
}
