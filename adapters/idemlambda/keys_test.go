package idemlambda_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemlambda"
)

// Key paths reach into nested members, arrays, quoted names with dots and
// JSON held in a string (a body); numbers are keys too.
func TestKeyPathsReachTheEvent(t *testing.T) {
	ev := load[events.EventBridgeEvent](t, "eventbridge.json")
	sqs := load[events.SQSEvent](t, "sqs.json")
	rest := load[events.APIGatewayProxyRequest](t, "apigw-rest.json")
	for _, tc := range []struct {
		path string
		in   any
		want string
	}{
		{"detail.orderId", ev, "o-42"},
		{`detail."order.ref"`, ev, "R-42"},
		{"detail.total", ev, "99.5"},
		{"id", ev, "6a7e8feb-b491-4cf7-a9f1-bf3703467718"},
		{"Records.1.messageId", sqs, "2e1424d4-f796-459a-8184-9c92662be6da"},
		{"Records.2.body.orderId", sqs, "o-3"},
		{"headers.Idempotency-Key", rest, "order-7f3a"},
		{"body.orderId", rest, "o-1001"},
	} {
		t.Run(tc.path, func(t *testing.T) {
			requireKey(t, tc.in, tc.path, tc.want)
		})
	}
}

// requireKey checks that path gives in the key want: a handler keyed by
// path runs, then one of the same name keyed by want is a replay.
func requireKey(t *testing.T, in any, path, want string) {
	t.Helper()
	e := engineOn(t, openers[0].open(t))
	doc, err := json.Marshal(in)
	require.NoError(t, err)
	var runs int
	fn := func(context.Context, json.RawMessage) (int, error) { runs++; return runs, nil }
	byPath, err := idemlambda.Wrap(e, "keys", fn, idemlambda.WithKeyPath(path))
	require.NoError(t, err)
	byWant, err := idemlambda.Wrap(e, "keys", fn, idemlambda.WithKeyFunc(func(json.RawMessage) (string, error) { return want, nil }))
	require.NoError(t, err)
	_, err = byPath(context.Background(), doc)
	require.NoError(t, err)
	got, err := byWant(context.Background(), doc)
	require.NoError(t, err)
	require.Equal(t, 1, got, "the key of %s is not %q", path, want)
	require.Equal(t, 1, runs)
}

// An event without the key path fails with an error that names the path
// and the segment it could not follow, wraps ErrNoKey and ErrInvalid, and
// does not run the handler; so do values that cannot be keys.
func TestMissingKeyPathNamesThePath(t *testing.T) {
	e := engineOn(t, openers[0].open(t))
	ev := load[events.EventBridgeEvent](t, "eventbridge.json")
	ran := false
	for _, tc := range []struct{ path, want string }{
		{"detail.customerId", `key path "detail.customerId": absent: "detail" has no member "customerId"`},
		{"detail.orderId.x", `key path "detail.orderId.x": absent: "detail.orderId" is a string that is not JSON`},
		{"resources.0", `key path "resources.0": absent: "resources" has no element "0"`},
		{"detail", `key path "detail" holds an object, not a string or number`},
		{"nope", `key path "nope": absent: the event has no member "nope"`},
	} {
		h, err := idemlambda.EventBridge(e, "bad-"+tc.path, func(context.Context, events.EventBridgeEvent) (string, error) {
			ran = true
			return "", nil
		}, idemlambda.WithKeyPath(tc.path))
		require.NoError(t, err)
		_, err = h(context.Background(), ev)
		require.ErrorIs(t, err, idemlambda.ErrNoKey, tc.path)
		require.ErrorIs(t, err, idemkit.ErrInvalid, tc.path)
		require.ErrorContains(t, err, tc.want)
		require.NotContains(t, err.Error(), "o-42", "the error quotes no event value")
	}
	require.False(t, ran)
}

// Malformed paths are refused when the handler is built.
func TestMalformedKeyPathsAreRefused(t *testing.T) {
	e := engineOn(t, openers[0].open(t))
	for _, p := range []string{"", "a..b", "a.", ".a", `"a`, `"a"b`} {
		_, err := idemlambda.Wrap(e, "x", func(context.Context, order) (int, error) { return 0, nil }, idemlambda.WithKeyPath(p))
		require.ErrorIs(t, err, idemkit.ErrInvalid, "%q", p)
		require.ErrorContains(t, err, "WithKeyPath", "%q", p)
	}
}

// Payload paths: a repeat whose selected values differ is a mismatch that
// names the paths; one that differs elsewhere, or only in JSON spelling
// (member order, spaces), is a repeat.
func TestPayloadPathsSelectWhatMustRepeat(t *testing.T) {
	eachStore(t, func(t *testing.T, e *idemkit.Engine) {
		c := &counter{}
		h, err := idemlambda.Wrap(e, "orders", func(ctx context.Context, in json.RawMessage) (receipt, error) {
			var o order
			_ = json.Unmarshal(in, &o)
			return c.handle(ctx, o)
		}, idemlambda.WithKeyPath("orderId"), idemlambda.WithPayloadPaths("qty", "items"))
		require.NoError(t, err)
		ctx := context.Background()
		call := func(doc string) error {
			_, err := h(ctx, json.RawMessage(doc))
			return err
		}
		require.NoError(t, call(`{"orderId":"o-1","qty":2,"items":{"a":1,"b":2},"note":"x"}`))
		require.NoError(t, call(`{"note":"other","items":{ "b":2, "a":1 },"qty":2,"orderId":"o-1"}`))
		err = call(`{"orderId":"o-1","qty":3,"items":{"a":1,"b":2}}`)
		require.ErrorIs(t, err, idemkit.ErrMismatch)
		require.ErrorContains(t, err, `["qty" "items"]`)
		require.ErrorIs(t, call(`{"orderId":"o-1","qty":2}`), idemkit.ErrMismatch, "an absent value differs")
		require.ErrorIs(t, call(`{"orderId":"o-1","qty":2,"items":null}`), idemkit.ErrMismatch, "null differs")
		require.EqualValues(t, 1, c.runs.Load())
	})
}
