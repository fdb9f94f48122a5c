package idemgrpc

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/idemkit/idemkit"
)

// ErrMalformedFence is wrapped by FenceFromIncomingContext's error when
// the fence entry is not one decimal number that fits in a uint64.
var ErrMalformedFence = errors.New("idemgrpc: malformed fencing token")

// FenceFromIncomingContext returns the fencing token that the call of ctx
// carries in its request metadata entry name (see WithFenceMetadata), and
// whether the call carries the entry at all. A value that is not a
// decimal number of at most 64 bits, or a repeated entry, is an error
// wrapping ErrMalformedFence (answer it with codes.InvalidArgument); a name
// WithFenceMetadata would refuse is an error wrapping idemkit.ErrInvalid.
//
// A service fences its work with it: it keeps the highest token seen per
// idempotency key, and refuses (with codes.FailedPrecondition, say) a call
// whose token is lower, which comes from a caller whose claim of the key
// was taken over.
func FenceFromIncomingContext(ctx context.Context, name string) (fence uint64, present bool, err error) {
	lower := strings.ToLower(name)
	if !validMetadataName(lower) {
		return 0, false, fmt.Errorf("idemgrpc: %w: FenceFromIncomingContext: %q is not a metadata key for a fence", idemkit.ErrInvalid, name)
	}
	values := metadata.ValueFromIncomingContext(ctx, lower)
	switch len(values) {
	case 0:
		return 0, false, nil
	case 1:
		fence, err = parseFence(values[0])
		return fence, true, err
	}
	return 0, true, fmt.Errorf("%w: the entry is repeated", ErrMalformedFence)
}

// parseFence parses a token as WithFenceMetadata writes it: decimal digits
// only.
func parseFence(v string) (uint64, error) {
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, fmt.Errorf("%w: not a decimal number", ErrMalformedFence)
		}
	}
	fence, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: not a decimal number of at most 64 bits", ErrMalformedFence)
	}
	return fence, nil
}
