package idemlambda_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemlambda"
)

// TestDynamoDBRequestsPerOperation counts the DynamoDB requests of each
// step of a wrapped handler under an invocation's deadline, as Lambda
// runs it, and the capacity units dynalite reports for them (DynamoDB's
// rule: a write 1 per KB of the larger of the old and new item, a strong
// read 1 per 4 KB): the figures docs/lambda.md prices.
//
// A first invocation is a claim and a completion. A repeat is one claim
// whose failed condition returns the stored result (a failed condition
// reports no units). A duplicate while the first runs is that failed
// claim and a strongly consistent read of the lease left (the failed
// claim returns the item without its expiry). A failed invocation is a
// claim and a release, which writes a small released record in place of
// the claim's (it keeps the fencing token and the steps' lineage), not a
// delete; the retry's claim fails on that record and takes it over with
// one more conditional write.
func TestDynamoDBRequestsPerOperation(t *testing.T) {
	s, c := openDynamo(t)
	e := engineOn(t, s)
	errDown := errors.New("payment provider down")
	started, finish := make(chan struct{}), make(chan struct{})
	h, err := idemlambda.Wrap(e, "orders", func(_ context.Context, o order) (receipt, error) {
		switch o.Note {
		case "fail":
			return receipt{}, errDown
		case "slow":
			close(started)
			<-finish
		case "large": // a result item of 3 to 4 KB
			return receipt{Receipt: strings.Repeat("r", 3500)}, nil
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
	check := func(what string, ops map[string]int, units map[string]float64) {
		t.Helper()
		gotUnits := c.takeUnits()
		require.Equal(t, ops, c.take(), "%s: requests", what)
		require.Equal(t, units, gotUnits, "%s: capacity units", what)
	}
	type u = map[string]float64

	require.NoError(t, invoke(order{OrderID: "o-1"}))
	check("first invocation: claim, completion", map[string]int{"PutItem": 2}, u{"PutItem": 2})

	require.NoError(t, invoke(order{OrderID: "o-1"}))
	check("replay: one failed claim with the item", map[string]int{"PutItem": 1}, u{})

	require.ErrorIs(t, invoke(order{OrderID: "o-2", Note: "fail"}), errDown)
	check("failure: claim, release", map[string]int{"PutItem": 2}, u{"PutItem": 2})

	require.NoError(t, invoke(order{OrderID: "o-2"}))
	check("retry after a failure: failed claim, takeover, completion", map[string]int{"PutItem": 3}, u{"PutItem": 2})

	require.NoError(t, invoke(order{OrderID: "o-3", Note: "large"}))
	check("a 3 to 4 KB result: claim (1), completion (4)", map[string]int{"PutItem": 2}, u{"PutItem": 5})

	require.NoError(t, invoke(order{OrderID: "o-3", Note: "large"}))
	check("its replay: one failed claim", map[string]int{"PutItem": 1}, u{})

	first := make(chan error, 1)
	go func() { first <- invoke(order{OrderID: "o-4", Note: "slow"}) }()
	<-started
	check("a claim", map[string]int{"PutItem": 1}, u{"PutItem": 1})
	require.ErrorIs(t, invoke(order{OrderID: "o-4", Note: "slow"}), idemkit.ErrInProgress)
	check("a duplicate in progress: a failed claim, a read of the lease left",
		map[string]int{"PutItem": 1, "GetItem": 1}, u{"GetItem": 1})
	close(finish)
	require.NoError(t, <-first)
	check("the completion", map[string]int{"PutItem": 1}, u{"PutItem": 1})
}
