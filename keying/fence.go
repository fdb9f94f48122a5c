package keying

import (
	"errors"
	"fmt"
	"strconv"
)

// FenceHeader is the suggested name of the HTTP header (and, in lower
// case, of the gRPC metadata entry) that carries an idemkit claim's
// fencing token to a system the claim's work calls.
const FenceHeader = "Idempotency-Fence"

// ErrMalformedFence is wrapped by ParseFence's error: a fencing token
// that is not one decimal number of at most 64 bits.
var ErrMalformedFence = errors.New("keying: malformed fencing token")

// FormatFence writes a fencing token as it travels: in decimal.
func FormatFence(fence uint64) string { return strconv.FormatUint(fence, 10) }

// ParseFence reads a fencing token from the values of its header or
// metadata entry: present is false when there is none; a repeated entry
// or a value that is not decimal digits only (at most 64 bits) is an
// error wrapping ErrMalformedFence, which does not quote the value.
func ParseFence(values []string) (fence uint64, present bool, err error) {
	switch len(values) {
	case 0:
		return 0, false, nil
	case 1:
	default:
		return 0, true, fmt.Errorf("%w: it is given %d times", ErrMalformedFence, len(values))
	}
	v := values[0]
	for i := 0; i < len(v); i++ {
		if v[i] < '0' || v[i] > '9' {
			return 0, true, fmt.Errorf("%w: not a decimal number", ErrMalformedFence)
		}
	}
	fence, err = strconv.ParseUint(v, 10, 64)
	if err != nil {
		return 0, true, fmt.Errorf("%w: not a decimal number of at most 64 bits", ErrMalformedFence)
	}
	return fence, true, nil
}
