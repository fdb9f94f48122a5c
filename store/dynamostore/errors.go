package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/idemkit/idemkit/store"
)

var (
	// ErrTooLarge is returned, wrapped, by a write whose item would exceed
	// DynamoDB's 400 KB item limit even with its value deflated. It wraps
	// store.ErrInvalid, so the engine keeps a terminal record for an
	// oversized result, as for any store's size limit, and never runs the
	// work again.
	ErrTooLarge = fmt.Errorf("dynamostore: item over DynamoDB's item size limit: %w", store.ErrInvalid)

	// ErrTable is returned, wrapped, by New and store.Open when the table
	// does not exist or its key schema is not the one the store needs.
	// The error names the table and the schema expected.
	ErrTable = errors.New("dynamostore: unusable table")
)

// unavailableCodes are the error codes of a DynamoDB that is throttling
// or failing: nothing can be concluded about the key, and the caller's
// failure policy applies.
var unavailableCodes = map[string]bool{
	"ProvisionedThroughputExceededException": true,
	"RequestLimitExceeded":                   true,
	"ThrottlingException":                    true,
	"Throttling":                             true,
	"InternalServerError":                    true,
	"InternalFailure":                        true,
	"ServiceUnavailable":                     true,
}

// fail wraps err, the error of operation op on key: with ctx's error when
// ctx is done (and store.ErrUnavailable for a deadline), with
// store.ErrUnavailable for throttling, a 5xx answer, a transport failure
// or an answer that cannot be read, with ErrTooLarge for an item DynamoDB
// refuses as too large, and as it is otherwise. The key appears only as
// its digest.
func fail(ctx context.Context, op, key string, err error) error {
	where := "dynamostore: " + op
	if key != "" {
		where += " " + keyRef(key)
	}
	if cerr := ctx.Err(); cerr != nil {
		if errors.Is(cerr, context.DeadlineExceeded) {
			return fmt.Errorf("%s: %w: %w: %w", where, store.ErrUnavailable, cerr, err)
		}
		return fmt.Errorf("%s: %w: %w", where, cerr, err)
	}
	if unavailable(err) {
		return store.Unavailable(where, err)
	}
	var api smithy.APIError
	if errors.As(err, &api) && api.ErrorCode() == "ValidationException" &&
		strings.Contains(strings.ToLower(api.ErrorMessage()), "item size") {
		return fmt.Errorf("%s: %w: %w", where, ErrTooLarge, err)
	}
	return fmt.Errorf("%s: %w", where, err)
}

// unavailable reports whether err means DynamoDB could not be reached,
// was throttling, or failed on its side.
func unavailable(err error) bool {
	var api smithy.APIError
	if errors.As(err, &api) && unavailableCodes[api.ErrorCode()] {
		return true
	}
	var resp *awshttp.ResponseError
	if errors.As(err, &resp) && resp.HTTPStatusCode() >= 500 {
		return true
	}
	var send *smithyhttp.RequestSendError
	var deser *smithy.DeserializationError
	var netErr net.Error
	return errors.As(err, &send) || errors.As(err, &deser) || errors.As(err, &netErr)
}
