package idemlambda_test

import (
	"context"
	"net/http"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemlambda"
)

// A response over the size cap reaches its client, is not stored, and is
// never produced twice: a retry gets a 500 response-not-stored problem.
func TestAPIGatewayOversizedResponse(t *testing.T) {
	eachStore(t, func(t *testing.T, e *idemkit.Engine) {
		o := &restOrders{}
		h, err := idemlambda.APIGateway(e, "orders", o.handle, restPrincipal, idemlambda.WithEngineOptions(idemkit.WithMaxResultSize(64)))
		require.NoError(t, err)
		req := load[events.APIGatewayProxyRequest](t, "apigw-rest.json")
		first, err := h(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, first.StatusCode)
		again, err := h(context.Background(), req)
		require.NoError(t, err)
		p := decodeProblem(t, http.StatusInternalServerError, again.Headers, again.Body)
		require.Equal(t, "https://idemkit.dev/problems/response-not-stored", p.Type)
		require.EqualValues(t, 1, o.runs.Load())
	})
}
