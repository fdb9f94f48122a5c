package idemgrpc

import (
	"context"
	"fmt"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/keying"
)

// ErrMalformedFence is wrapped by FenceFromIncomingContext's error when
// the fence entry is not one decimal number that fits in a uint64.
var ErrMalformedFence = keying.ErrMalformedFence

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
	return keying.ParseFence(values)
}
