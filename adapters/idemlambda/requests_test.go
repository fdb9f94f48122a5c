package idemlambda_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/adapters/idemlambda"
)

// TestDynamoDBRequestsPerOperation counts the DynamoDB requests of each
// step of a wrapped handler under an invocation's deadline, as Lambda
// runs it: the figures docs/lambda.md prices. A first invocation is a
// claim and a completion; a repeat is one claim whose failed condition
// returns the stored result; a failed invocation is a claim and a
// release, which writes a small released record in place of the claim's
// (it keeps the fencing token and the steps' lineage), not a delete; the
// retry's claim fails on that record and takes it over with one more
// conditional write.
func TestDynamoDBRequestsPerOperation(t *testing.T) {
	s, c := openDynamo(t)
	e := engineOn(t, s)
	errDown := errors.New("payment provider down")
	h, err := idemlambda.Wrap(e, "orders", func(_ context.Context, o order) (receipt, error) {
		if o.Note == "fail" {
			return receipt{}, errDown
		}
		return receipt{Receipt: "r-" + o.OrderID}, nil
	}, idemlambda.WithKeyPath("orderId"))
	require.NoError(t, err)
	invoke := func(o order) error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second) // Lambda's deadline
		defer cancel()
		_, err := h(ctx, o)
		return err
	}

	require.NoError(t, invoke(order{OrderID: "o-1"}))
	require.Equal(t, map[string]int{"PutItem": 2}, c.take(), "first invocation: claim, completion")

	require.NoError(t, invoke(order{OrderID: "o-1"}))
	require.Equal(t, map[string]int{"PutItem": 1}, c.take(), "replay: one failed claim with the item")

	require.ErrorIs(t, invoke(order{OrderID: "o-2", Note: "fail"}), errDown)
	require.Equal(t, map[string]int{"PutItem": 2}, c.take(), "failure: claim, release")

	require.NoError(t, invoke(order{OrderID: "o-2"}))
	require.Equal(t, map[string]int{"PutItem": 3}, c.take(),
		"retry after a failure: a claim that finds the released record, its takeover, the completion")
}
