package idemlambda_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemlambda"
)

// Every constructor follows the one option rule: nil options, options
// given twice, options that do not apply and bad arguments are refused,
// all of them named, wrapping ErrInvalid.
func TestOptionRule(t *testing.T) {
	e := engineOn(t, openers[0].open(t))
	c := &counter{}
	noop := func(context.Context, events.SQSMessage) error { return nil }
	for _, tc := range []struct {
		name  string
		build func() error
		want  []string
	}{
		{"nil option", func() error {
			_, err := idemlambda.Wrap(e, "x", c.handle, idemlambda.WithKeyPath("orderId"), nil)
			return err
		}, []string{"option 2 is nil"}},
		{"key twice", func() error {
			_, err := idemlambda.Wrap(e, "x", c.handle, idemlambda.WithKeyPath("orderId"), idemlambda.WithKeyPath("qty"))
			return err
		}, []string{"the key is already set"}},
		{"payload twice", func() error {
			_, err := idemlambda.Wrap(e, "x", c.handle, idemlambda.WithKeyPath("orderId"), idemlambda.WithPayloadPaths("qty"), idemlambda.WithPayloadPaths("note"))
			return err
		}, []string{"WithPayloadPaths: given twice"}},
		{"no payload path", func() error {
			_, err := idemlambda.Wrap(e, "x", c.handle, idemlambda.WithKeyPath("orderId"), idemlambda.WithPayloadPaths())
			return err
		}, []string{"WithPayloadPaths: no path given"}},
		{"no key", func() error {
			_, err := idemlambda.Wrap(e, "x", c.handle)
			return err
		}, []string{"no key: give WithKeyPath or WithKeyFunc"}},
		{"header to Wrap", func() error {
			_, err := idemlambda.Wrap(e, "x", c.handle, idemlambda.WithKeyHeader("X-Key"))
			return err
		}, []string{"WithKeyHeader does not apply to Wrap"}},
		{"header to SQS", func() error {
			_, err := idemlambda.SQS(e, "x", noop, idemlambda.WithKeyHeader("X-Key"))
			return err
		}, []string{"WithKeyHeader does not apply to SQS"}},
		{"logger to APIGateway", func() error {
			_, err := idemlambda.APIGateway(e, "x", func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				return events.APIGatewayProxyResponse{}, nil
			}, restPrincipal, idemlambda.WithLogger(nil))
			return err
		}, []string{"WithLogger(nil)", "WithLogger does not apply to APIGateway"}},
		{"bad header name", func() error {
			_, err := idemlambda.HTTPAPI(e, "x", func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				return events.APIGatewayV2HTTPResponse{}, nil
			}, httpPrincipal, idemlambda.WithKeyHeader("Idempotency Key"))
			return err
		}, []string{`WithKeyHeader("Idempotency Key")`}},
		{"allow without switch", func() error {
			_, err := idemlambda.SQS(e, "x", noop, idemlambda.WithDisableInLambda())
			return err
		}, []string{"WithDisableInLambda without WithDisableEnv"}},
		{"bad engine option", func() error {
			_, err := idemlambda.SQS(e, "x", noop, idemlambda.WithEngineOptions(idemkit.WithLease(time.Microsecond)))
			return err
		}, []string{"engine options", "WithLease(1µs): must be at least 3ms"}},
		{"nil engine, bad name", func() error {
			_, err := idemlambda.EventBridge[string](nil, "a b", nil)
			return err
		}, []string{"nil engine", `name "a b"`}},
		{"no principal", func() error {
			_, err := idemlambda.APIGateway(e, "x", func(context.Context, events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
				return events.APIGatewayProxyResponse{}, nil
			})
			return err
		}, []string{"WithPrincipalPath or WithPrincipalFunc is required"}},
		{"principal to SQS", func() error {
			_, err := idemlambda.SQS(e, "x", noop, restPrincipal)
			return err
		}, []string{"WithPrincipalPath and WithPrincipalFunc do not apply to SQS"}},
		{"principal function of another request", func() error {
			_, err := idemlambda.HTTPAPI(e, "x", func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
				return events.APIGatewayV2HTTPResponse{}, nil
			}, idemlambda.WithPrincipalFunc(func(events.APIGatewayProxyRequest) (string, error) { return "", nil }))
			return err
		}, []string{"WithPrincipalFunc: the function's type is", "events.APIGatewayV2HTTPRequest"}},
		{"nil handler", func() error {
			_, err := idemlambda.SQS(e, "x", nil)
			return err
		}, []string{"nil handler"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.build()
			require.ErrorIs(t, err, idemkit.ErrInvalid)
			for _, w := range tc.want {
				require.ErrorContains(t, err, w)
			}
		})
	}
}
