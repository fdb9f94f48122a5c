package idemconnect

import (
	"fmt"
	"net/http"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/keying"
)

// ErrMalformedFence is wrapped by FenceFromHeader's error when the fence
// header is not one decimal number that fits in a uint64.
var ErrMalformedFence = keying.ErrMalformedFence

// FenceFromHeader returns the fencing token a call carries in its request
// header name (see WithFenceHeader), and whether it carries the header at
// all. Pass the request's header (connect.AnyRequest.Header, or
// connect.CallInfoForHandlerContext's RequestHeader). A value that is not
// a decimal number of at most 64 bits, or a repeated header, is an error
// wrapping ErrMalformedFence (answer it with connect.CodeInvalidArgument);
// a name WithFenceHeader would refuse is an error wrapping
// idemkit.ErrInvalid.
//
// A service fences its work with it: it keeps the highest token seen per
// idempotency key, and refuses (with connect.CodeFailedPrecondition, say)
// a call whose token is lower, which comes from a caller whose claim of
// the key was taken over.
func FenceFromHeader(h http.Header, name string) (fence uint64, present bool, err error) {
	if !validHeaderName(name) {
		return 0, false, fmt.Errorf("idemconnect: %w: FenceFromHeader: %q is not a header name for a fence", idemkit.ErrInvalid, name)
	}
	return keying.ParseFence(h.Values(name))
}
