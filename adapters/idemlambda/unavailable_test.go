package idemlambda_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemlambda"
	"github.com/idemkit/idemkit/store"
)

// down is a store whose claims fail as a throttled or unreachable store's
// do.
type down struct{ store.Store }

func (down) SetNX(context.Context, string, []byte, time.Duration) (bool, store.Entry, error) {
	return false, store.Entry{}, store.ErrUnavailable
}

// Under FailClosed (the default) a store failure runs nothing: API
// Gateway answers 503 with Retry-After, SQS reports every record failed.
// Under FailOpen the handler runs unguarded.
func TestStoreFailure(t *testing.T) {
	e := engineOn(t, down{openers[0].open(t)})
	o := &restOrders{}
	h, err := idemlambda.APIGateway(e, "orders", o.handle, restPrincipal)
	require.NoError(t, err)
	resp, err := h(context.Background(), load[events.APIGatewayProxyRequest](t, "apigw-rest.json"))
	require.NoError(t, err)
	p := decodeProblem(t, http.StatusServiceUnavailable, resp.Headers, resp.Body)
	require.Equal(t, "https://idemkit.dev/problems/unavailable", p.Type)
	require.Equal(t, "1", resp.Headers["Retry-After"])
	require.Zero(t, o.runs.Load())

	f := newEffects()
	q, err := idemlambda.SQS(e, "ledger", f.handle, idemlambda.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	batch, err := q(context.Background(), load[events.SQSEvent](t, "sqs.json"))
	require.NoError(t, err)
	require.Len(t, batch.BatchItemFailures, 3)
	require.Empty(t, f.runs)

	open, err := idemlambda.SQS(e, "ledger", f.handle, idemlambda.WithEngineOptions(idemkit.WithFailureMode(idemkit.FailOpen)))
	require.NoError(t, err)
	batch, err = open(context.Background(), load[events.SQSEvent](t, "sqs.json"))
	require.NoError(t, err)
	require.Empty(t, batch.BatchItemFailures)
	require.Equal(t, map[string]int{"o-1": 1, "o-2": 1, "o-3": 1}, f.runs)
}
