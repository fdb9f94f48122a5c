package idemlambda_test

import (
	"context"
	"encoding/json"
	"net/http"
	"reflect"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemlambda"
)

// problem is the RFC 9457 body the adapter answers with.
type problem struct {
	Type      string `json:"type"`
	Status    int    `json:"status"`
	Detail    string `json:"detail"`
	Retryable *bool  `json:"retryable"`
}

func decodeProblem(t *testing.T, status int, headers map[string]string, body string) problem {
	t.Helper()
	require.Equal(t, "application/problem+json", headers["Content-Type"])
	var p problem
	require.NoError(t, json.Unmarshal([]byte(body), &p))
	require.Equal(t, status, p.Status)
	return p
}

// restOrders is a REST API handler that counts its runs and answers with
// a response whose every field a replay must keep.
type restOrders struct {
	runs   atomic.Int64
	status int
	gate   chan struct{} // when not nil, each run waits for it
}

func (o *restOrders) handle(_ context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
	n := o.runs.Add(1)
	if o.gate != nil {
		<-o.gate
	}
	status := o.status
	if status == 0 {
		status = http.StatusCreated
	}
	return events.APIGatewayProxyResponse{
		StatusCode:        status,
		Headers:           map[string]string{"Content-Type": "application/json", "Location": "/orders/1"},
		MultiValueHeaders: map[string][]string{"Set-Cookie": {"a=1", "b=2"}},
		Body:              `{"order":"` + req.Path + `","run":` + string(rune('0'+n)) + `, "raw": "\u00e9\t"}`,
		IsBase64Encoded:   false,
	}, nil
}

// A REST API repeat gets the first response byte for byte, marked with
// Idempotent-Replayed: true; the handler runs once.
func TestAPIGatewayReplaysTheResponse(t *testing.T) {
	eachStore(t, func(t *testing.T, e *idemkit.Engine) {
		o := &restOrders{}
		h, err := idemlambda.APIGateway(e, "orders", o.handle, restPrincipal)
		require.NoError(t, err)
		req := load[events.APIGatewayProxyRequest](t, "apigw-rest.json")
		first, err := h(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, first.StatusCode)
		require.NotContains(t, first.Headers, idemlambda.ReplayedHeader)
		again, err := h(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, "true", again.Headers[idemlambda.ReplayedHeader])
		delete(again.Headers, idemlambda.ReplayedHeader)
		require.True(t, reflect.DeepEqual(first, again), "replay %+v differs from %+v", again, first)
		require.EqualValues(t, 1, o.runs.Load())
	})
}

// An HTTP API (v2) repeat, keyed by the lower-case header v2 delivers,
// gets the first response with its cookies and base64 body.
func TestHTTPAPIReplaysTheResponse(t *testing.T) {
	eachStore(t, func(t *testing.T, e *idemkit.Engine) {
		var runs atomic.Int64
		h, err := idemlambda.HTTPAPI(e, "orders", func(_ context.Context, req events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
			runs.Add(1)
			return events.APIGatewayV2HTTPResponse{
				StatusCode:      http.StatusOK,
				Headers:         map[string]string{"Content-Type": "image/png"},
				Body:            "iVBORw0KGgo=",
				IsBase64Encoded: true,
				Cookies:         []string{"session=abc; Secure; HttpOnly"},
			}, nil
		}, httpPrincipal)
		require.NoError(t, err)
		req := load[events.APIGatewayV2HTTPRequest](t, "apigw-http.json")
		first, err := h(context.Background(), req)
		require.NoError(t, err)
		again, err := h(context.Background(), req)
		require.NoError(t, err)
		require.Equal(t, "true", again.Headers[idemlambda.ReplayedHeader])
		delete(again.Headers, idemlambda.ReplayedHeader)
		require.Equal(t, first, again)
		require.EqualValues(t, 1, runs.Load())
	})
}

// Concurrent deliveries of one request run the handler once: the others
// get the first response or a 409 in-progress problem with Retry-After.
func TestAPIGatewayConcurrentDuplicates(t *testing.T) {
	eachStore(t, func(t *testing.T, e *idemkit.Engine) {
		const n = 32
		o := &restOrders{gate: make(chan struct{})}
		h, err := idemlambda.APIGateway(e, "orders", o.handle, restPrincipal)
		require.NoError(t, err)
		req := load[events.APIGatewayProxyRequest](t, "apigw-rest.json")
		resps := make([]events.APIGatewayProxyResponse, n)
		var conflicts atomic.Int64
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				resp, err := h(context.Background(), req)
				require.NoError(t, err)
				if resp.StatusCode == http.StatusConflict {
					conflicts.Add(1)
				}
				resps[i] = resp
			})
		}
		testkitWait(t, "the duplicates' 409s", func() bool { return conflicts.Load() == n-1 })
		close(o.gate)
		wg.Wait()
		require.EqualValues(t, 1, o.runs.Load())
		for _, r := range resps {
			if r.StatusCode == http.StatusCreated {
				continue
			}
			require.Equal(t, http.StatusConflict, r.StatusCode)
			require.NotEmpty(t, r.Headers["Retry-After"])
			p := decodeProblem(t, http.StatusConflict, r.Headers, r.Body)
			require.Equal(t, "https://idemkit.dev/problems/in-progress", p.Type)
			require.True(t, *p.Retryable)
		}
	})
}

// A request without the key header gets a 400 key-missing problem naming
// the header; a repeated or malformed key a 400 key-invalid; a key path
// the body lacks a 400 that names the path. The handler never runs.
func TestAPIGatewayBadKeys(t *testing.T) {
	e := engineOn(t, openers[0].open(t))
	o := &restOrders{}
	h, err := idemlambda.APIGateway(e, "orders", o.handle, restPrincipal)
	require.NoError(t, err)
	base := load[events.APIGatewayProxyRequest](t, "apigw-rest.json")
	without := base
	without.Headers = map[string]string{"Content-Type": "application/json"}
	without.MultiValueHeaders = nil
	resp, err := h(context.Background(), without)
	require.NoError(t, err)
	p := decodeProblem(t, http.StatusBadRequest, resp.Headers, resp.Body)
	require.Equal(t, "https://idemkit.dev/problems/key-missing", p.Type)
	require.Contains(t, p.Detail, "Idempotency-Key")
	require.False(t, *p.Retryable)

	repeated := base
	repeated.MultiValueHeaders = map[string][]string{"idempotency-key": {"a", "b"}}
	resp, err = h(context.Background(), repeated)
	require.NoError(t, err)
	p = decodeProblem(t, http.StatusBadRequest, resp.Headers, resp.Body)
	require.Equal(t, "https://idemkit.dev/problems/key-invalid", p.Type)

	byBody, err := idemlambda.APIGateway(e, "orders-by-body", o.handle, restPrincipal, idemlambda.WithKeyPath("body.customerRef"))
	require.NoError(t, err)
	resp, err = byBody(context.Background(), base)
	require.NoError(t, err)
	p = decodeProblem(t, http.StatusBadRequest, resp.Headers, resp.Body)
	require.Equal(t, "https://idemkit.dev/problems/key-missing", p.Type)
	require.Equal(t, `this request has no usable idempotency key: key path "body.customerRef": absent: "body" has no member "customerRef"`, p.Detail)
	require.NotContains(t, p.Detail, "o-1001")
	require.Zero(t, o.runs.Load())
}

// A key reused with another body gets a 422; a key in the body (a path)
// works like the header.
func TestAPIGatewayMismatch(t *testing.T) {
	eachStore(t, func(t *testing.T, e *idemkit.Engine) {
		o := &restOrders{}
		h, err := idemlambda.APIGateway(e, "orders", o.handle, restPrincipal, idemlambda.WithKeyPath("body.orderId"))
		require.NoError(t, err)
		req := load[events.APIGatewayProxyRequest](t, "apigw-rest.json")
		_, err = h(context.Background(), req)
		require.NoError(t, err)
		req.Body = `{"orderId":"o-1001","sku":"tea","qty":3}`
		resp, err := h(context.Background(), req)
		require.NoError(t, err)
		p := decodeProblem(t, http.StatusUnprocessableEntity, resp.Headers, resp.Body)
		require.Equal(t, "https://idemkit.dev/problems/key-mismatch", p.Type)
		require.EqualValues(t, 1, o.runs.Load())
	})
}

// A 5xx (or 429) response is not stored: the key is freed and a retry
// runs the handler again, unmarked.
func TestAPIGatewayDoesNotStoreServerErrors(t *testing.T) {
	eachStore(t, func(t *testing.T, e *idemkit.Engine) {
		for _, status := range []int{http.StatusBadGateway, http.StatusTooManyRequests} {
			o := &restOrders{status: status}
			h, err := idemlambda.APIGateway(e, "orders-"+strconv.Itoa(status), o.handle, restPrincipal)
			require.NoError(t, err)
			req := load[events.APIGatewayProxyRequest](t, "apigw-rest.json")
			for range 2 {
				resp, err := h(context.Background(), req)
				require.NoError(t, err)
				require.Equal(t, status, resp.StatusCode)
				require.NotContains(t, resp.Headers, idemlambda.ReplayedHeader)
			}
			require.EqualValues(t, 2, o.runs.Load(), "status %d", status)
		}
	})
}

// Keys are scoped by principal: another caller's request with the same
// key runs for that caller, never replays the first caller's response;
// a request without a principal gets a 401 and does not run.
func TestAPIGatewayScopesKeysByPrincipal(t *testing.T) {
	eachStore(t, func(t *testing.T, e *idemkit.Engine) {
		o := &restOrders{}
		h, err := idemlambda.APIGateway(e, "orders", o.handle, restPrincipal)
		require.NoError(t, err)
		alice := load[events.APIGatewayProxyRequest](t, "apigw-rest.json")
		bob := load[events.APIGatewayProxyRequest](t, "apigw-rest.json")
		bob.RequestContext.Authorizer = map[string]any{"claims": map[string]any{"sub": "d9e8-user-bob"}}
		for _, req := range []events.APIGatewayProxyRequest{alice, bob, alice, bob} {
			_, err := h(context.Background(), req)
			require.NoError(t, err)
		}
		require.EqualValues(t, 2, o.runs.Load())

		anonymous := alice
		anonymous.RequestContext.Authorizer = nil
		resp, err := h(context.Background(), anonymous)
		require.NoError(t, err)
		p := decodeProblem(t, http.StatusUnauthorized, resp.Headers, resp.Body)
		require.Equal(t, "https://idemkit.dev/problems/unauthenticated", p.Type)
		require.EqualValues(t, 2, o.runs.Load())
	})
}
