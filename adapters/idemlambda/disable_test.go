package idemlambda_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemlambda"
)

// IDEMKIT_DISABLED=1 under WithDisableEnv runs the handler bare, every
// time; off, or without the option, the handler is guarded.
func TestDisableEnvRunsTheHandlerBare(t *testing.T) {
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "")
	e := engineOn(t, openers[0].open(t))
	for _, tc := range []struct {
		value  string
		option bool
		runs   int64
	}{
		{"1", true, 3}, {"true", true, 3}, {"0", true, 1}, {"", true, 1}, {"false", true, 1}, {"1", false, 1},
	} {
		t.Setenv(idemlambda.DefaultDisableEnv, tc.value)
		c := &counter{}
		opts := []idemlambda.Option{idemlambda.WithKeyPath("orderId")}
		if tc.option {
			opts = append(opts, idemlambda.WithDisableEnv(idemlambda.DefaultDisableEnv))
		}
		h, err := idemlambda.Wrap(e, "orders-"+tc.value, c.handle, opts...)
		require.NoError(t, err)
		for range 3 {
			_, err := h(context.Background(), order{OrderID: "o-1"})
			require.NoError(t, err)
		}
		require.Equal(t, tc.runs, c.runs.Load(), "%s=%q, option %v", idemlambda.DefaultDisableEnv, tc.value, tc.option)
	}
}

// Inside a Lambda function the switch is refused unless
// WithDisableInLambda allows it; a value that is not a boolean is
// refused everywhere.
func TestDisableEnvRefusedInLambda(t *testing.T) {
	e := engineOn(t, openers[0].open(t))
	c := &counter{}
	t.Setenv(idemlambda.DefaultDisableEnv, "1")
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "orders-prod")
	_, err := idemlambda.Wrap(e, "orders", c.handle, idemlambda.WithKeyPath("orderId"), idemlambda.WithDisableEnv(idemlambda.DefaultDisableEnv))
	require.ErrorIs(t, err, idemkit.ErrInvalid)
	require.ErrorContains(t, err, "AWS_LAMBDA_FUNCTION_NAME is set")
	require.ErrorContains(t, err, "WithDisableInLambda")

	h, err := idemlambda.Wrap(e, "orders", c.handle, idemlambda.WithKeyPath("orderId"),
		idemlambda.WithDisableEnv(idemlambda.DefaultDisableEnv), idemlambda.WithDisableInLambda())
	require.NoError(t, err)
	for range 2 {
		_, err := h(context.Background(), order{OrderID: "o-1"})
		require.NoError(t, err)
	}
	require.EqualValues(t, 2, c.runs.Load())

	t.Setenv(idemlambda.DefaultDisableEnv, "yes")
	_, err = idemlambda.Wrap(e, "orders", c.handle, idemlambda.WithKeyPath("orderId"),
		idemlambda.WithDisableEnv(idemlambda.DefaultDisableEnv), idemlambda.WithDisableInLambda())
	require.ErrorIs(t, err, idemkit.ErrInvalid)
	require.ErrorContains(t, err, `IDEMKIT_DISABLED="yes"`)
}

// The switch turns the SQS wrapper off too: every delivery runs, and
// failures are still reported.
func TestDisableEnvSQS(t *testing.T) {
	t.Setenv("AWS_LAMBDA_FUNCTION_NAME", "")
	t.Setenv(idemlambda.DefaultDisableEnv, "1")
	e := engineOn(t, openers[0].open(t))
	f := newEffects()
	f.fail["o-3"] = true
	h, err := idemlambda.SQS(e, "ledger", f.handle, idemlambda.WithDisableEnv(idemlambda.DefaultDisableEnv),
		idemlambda.WithLogger(slog.New(slog.DiscardHandler)))
	require.NoError(t, err)
	ev := load[events.SQSEvent](t, "sqs.json")
	for range 2 {
		resp, err := h(context.Background(), ev)
		require.NoError(t, err)
		require.Equal(t, []string{ev.Records[2].MessageId}, failedIDs(resp))
	}
	require.Equal(t, map[string]int{"o-1": 2, "o-2": 2, "o-3": 2}, f.runs)
}
