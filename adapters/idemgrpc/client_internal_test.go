package idemgrpc

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func newTestClient(t *testing.T, opts ...Option) *Client {
	t.Helper()
	c, err := NewClient(append([]Option{WithMethods("/s.S/M")}, opts...)...)
	require.NoError(t, err)
	return c
}

func TestRetryDelayFollowsTheBackoffSchedule(t *testing.T) {
	c := newTestClient(t, WithBackoff(10*time.Millisecond, 80*time.Millisecond))
	unavailable := status.Error(codes.Unavailable, "down")
	for attempt, ceiling := range []time.Duration{10, 20, 40, 80, 80, 80} {
		ceiling *= time.Millisecond
		for range 50 {
			d, ok := c.retryDelay(unavailable, attempt)
			require.True(t, ok)
			assert.GreaterOrEqual(t, d, ceiling/2)
			assert.LessOrEqual(t, d, ceiling)
		}
	}
	d, ok := c.retryDelay(unavailable, 1000)
	require.True(t, ok, "no overflow on long runs")
	assert.LessOrEqual(t, d, 80*time.Millisecond)
}

// Long backoffs stay within [ceiling/2, ceiling] on every attempt: a
// doubling that overflows int64 must not turn into a tiny or arbitrary
// wait.
func TestRetryDelayNeverOverflows(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "down")
	// The second pair overflows at attempt 23 into a positive value below
	// half the maximum.
	for _, b := range [][2]time.Duration{{time.Hour, 2 * time.Hour}, {94559534224188, 51062148481061520}} {
		c := newTestClient(t, WithBackoff(b[0], b[1]))
		for attempt := range 64 {
			ceiling := b[0]
			for range attempt {
				if ceiling >= b[1]/2 {
					ceiling = b[1]
					break
				}
				ceiling *= 2
			}
			d, ok := c.retryDelay(unavailable, attempt)
			require.True(t, ok)
			assert.GreaterOrEqual(t, d, ceiling/2, "attempt %d", attempt)
			assert.LessOrEqual(t, d, ceiling, "attempt %d", attempt)
		}
	}
}

func TestRetryDelayHonoursRetryInfo(t *testing.T) {
	c := newTestClient(t, WithBackoff(10*time.Millisecond, 80*time.Millisecond))
	aborted := withRetryInfo(codes.Aborted, "busy", 50*time.Millisecond)
	for range 50 {
		d, ok := c.retryDelay(aborted, 0)
		require.True(t, ok)
		assert.GreaterOrEqual(t, d, 50*time.Millisecond, "the server's delay is honoured")
		assert.LessOrEqual(t, d, 60*time.Millisecond)
	}
	_, ok := c.retryDelay(status.Error(codes.Aborted, "no hint"), 0)
	assert.False(t, ok)
	_, ok = c.retryDelay(errors.New("plain"), 0)
	assert.False(t, ok)
}

// A RetryInfo delay is the server's word: one beyond the client's maximum
// backoff is not waited (the error is returned), and no delay, however
// large, overflows into an immediate retry.
func TestRetryDelayBoundsRetryInfo(t *testing.T) {
	c := newTestClient(t)
	for _, d := range []time.Duration{2 * DefaultMaxBackoff, 10000 * time.Hour, time.Duration(1<<63 - 1)} {
		_, ok := c.retryDelay(withRetryInfo(codes.Aborted, "busy", d), 0)
		assert.False(t, ok, "a delay of %v is not waited", d)
	}
	d, ok := c.retryDelay(withRetryInfo(codes.Aborted, "busy", DefaultMaxBackoff), 0)
	require.True(t, ok, "the engine's default hint (1s) is honoured")
	assert.GreaterOrEqual(t, d, DefaultMaxBackoff)
	assert.LessOrEqual(t, d, DefaultMaxBackoff*6/5)

	huge := newTestClient(t, WithBackoff(time.Millisecond, time.Duration(1<<63-1)))
	for range 50 {
		d, ok := huge.retryDelay(withRetryInfo(codes.Aborted, "busy", time.Duration(1<<63-1)), 0)
		require.True(t, ok)
		assert.Positive(t, d, "no overflow into a negative wait")
	}
}
