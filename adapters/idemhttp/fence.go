package idemhttp

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/internal/httpcore"
)

// FenceHeader is a suggested name for the request header that carries a
// claim's fencing token (Transport.FenceHeader, FenceFromRequest): the
// token in decimal.
const FenceHeader = "Idempotency-Fence"

// ErrMalformedFence is wrapped by FenceFromRequest's error when the fence
// header is not one decimal number that fits in a uint64.
var ErrMalformedFence = errors.New("idemhttp: malformed fencing token")

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
	switch len(values) {
	case 0:
		return 0, false, nil
	case 1:
		fence, err = parseFence(values[0])
		return fence, true, err
	}
	return 0, true, fmt.Errorf("%w: the header is repeated", ErrMalformedFence)
}

// parseFence parses a token written by formatFence: decimal digits only.
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

func formatFence(fence uint64) string { return strconv.FormatUint(fence, 10) }
