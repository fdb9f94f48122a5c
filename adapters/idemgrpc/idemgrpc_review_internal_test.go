package idemgrpc

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// Long backoffs must stay within [base/2, max] on every attempt: a shift
// that overflows int64 must not turn into a tiny or arbitrary wait.
func TestReviewBackoffNeverOverflows(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "down")
	// The second pair overflows at attempt 23 into a positive value below
	// half the maximum.
	for _, b := range [][2]time.Duration{{time.Hour, 2 * time.Hour}, {94559534224188, 51062148481061520}} {
		c := newConfig([]Option{WithMethods("/s.S/M"), WithBackoff(b[0], b[1])})
		require.NoError(t, c.err)
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

// A RetryInfo delay is the server's word: one beyond the client's maximum
// backoff is not waited (the error is returned), and no delay, however
// large, overflows into an immediate retry.
func TestReviewRetryInfoDelayIsBounded(t *testing.T) {
	c := newConfig(nil)
	for _, d := range []time.Duration{2 * DefaultMaxBackoff, 10000 * time.Hour, time.Duration(1<<63 - 1)} {
		_, ok := c.retryDelay(withRetryInfo(codes.Aborted, "busy", d), 0)
		assert.False(t, ok, "a delay of %v is not waited", d)
	}
	d, ok := c.retryDelay(withRetryInfo(codes.Aborted, "busy", DefaultMaxBackoff), 0)
	require.True(t, ok, "the engine's default hint (1s) is honoured")
	assert.GreaterOrEqual(t, d, DefaultMaxBackoff)
	assert.LessOrEqual(t, d, DefaultMaxBackoff*6/5)

	huge := newConfig([]Option{WithBackoff(time.Millisecond, time.Duration(1<<63-1))})
	for range 50 {
		d, ok := huge.retryDelay(withRetryInfo(codes.Aborted, "busy", time.Duration(1<<63-1)), 0)
		require.True(t, ok)
		assert.Positive(t, d, "no overflow into a negative wait")
	}
}

// A stored status that decodes to code OK is corrupt: it must replay as
// Internal, never as a nil error (a success with no response).
func TestReviewStoredStatusOKIsCorrupt(t *testing.T) {
	sc := statusCodec{codes.NotFound: true}
	err := sc.DecodeError([]byte{formatStatus})
	require.Error(t, err)
	assert.Equal(t, codes.Internal, status.Code(err))
}

// Whatever bytes a store hands back, decoding a stored response or status
// never panics, and a status is never OK.
func FuzzReviewDecodeStored(f *testing.F) {
	good, err := encodeResponse(status.New(codes.NotFound, "x").Proto())
	require.NoError(f, err)
	st, _ := statusCodec{codes.NotFound: true}.EncodeError(status.Error(codes.NotFound, "gone"))
	for _, seed := range [][]byte{nil, {formatResponse}, good, st, {formatResponse, 0xff, 0xff, 0xff}} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, _ = decodeResponse(data, protoregistry.GlobalTypes)
		err := statusCodec{}.DecodeError(data)
		require.Error(t, err)
		require.NotEqual(t, codes.OK, status.Code(err))
	})
}
