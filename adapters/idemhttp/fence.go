package idemhttp

import (
	"fmt"
	"net/http"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
	"github.com/idemkit/idemkit/keying"
)

// FenceHeader is a suggested name for the request header that carries a
// claim's fencing token (Transport.FenceHeader, FenceFromRequest): the
// token in decimal.
const FenceHeader = keying.FenceHeader

// ErrMalformedFence is wrapped by FenceFromRequest's error when the fence
// header is not one decimal number that fits in a uint64.
var ErrMalformedFence = keying.ErrMalformedFence

// FenceFromRequest returns the fencing token that r carries in header
// (see Transport.FenceHeader), and whether r carries the header at all. A
// value that is not a decimal number of at most 64 bits, or a repeated
// header, is an error wrapping ErrMalformedFence; an invalid header name
// is an error wrapping idemkit.ErrInvalid.
//
// A service fences its work with it: it keeps the highest token seen per
// idempotency key, and refuses (with 409, say) a request whose token is
// lower, which comes from a caller whose claim of the key was taken over.
func FenceFromRequest(r *http.Request, header string) (fence uint64, present bool, err error) {
	if !httpcore.ValidToken(header) {
		return 0, false, fmt.Errorf("idemhttp: %w: FenceFromRequest: %q is not a header name", idemkit.ErrInvalid, header)
	}
	values := r.Header.Values(header)
	return keying.ParseFence(values)
}
