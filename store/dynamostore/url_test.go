package dynamostore_test

import (
	"context"
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/dynamostore"
)

// awsEnv gives the SDK's default chain static credentials and clears the
// region, for the length of t.
func awsEnv(t *testing.T) {
	t.Setenv("AWS_ACCESS_KEY_ID", "test")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "test")
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", "/dev/null")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/dev/null")
}

// TestOpenURL opens a store by URL and uses it.
func TestOpenURL(t *testing.T) {
	s, _ := newStore(t)
	awsEnv(t)
	ctx := context.Background()
	opened, err := store.Open(ctx, "dynamodb://"+s.Table()+"?region=eu-west-1&endpoint="+url.QueryEscape(endpoint))
	require.NoError(t, err)
	set, _, err := opened.SetNX(ctx, "k", []byte("v"), time.Minute)
	require.NoError(t, err)
	require.True(t, set)
	e, err := s.Get(ctx, "k")
	require.NoError(t, err)
	require.Equal(t, "v", string(e.Value))

	// The region may come from the environment instead.
	t.Setenv("AWS_REGION", "eu-west-1")
	_, err = store.Open(ctx, "dynamodb://"+s.Table()+"?endpoint="+url.QueryEscape(endpoint))
	require.NoError(t, err)
}

// TestOpenURLInvalid: each bad URL is refused with an error wrapping
// store.ErrInvalid that says what is wrong and never holds a secret.
func TestOpenURLInvalid(t *testing.T) {
	awsEnv(t)
	for _, tc := range []struct{ url, says string }{
		{"dynamodb://table?region=eu-west-1&consistent=true", "unknown parameter(s) consistent"},
		{"dynamodb://table?region=eu-west-1&region=us-east-1", `parameter "region" given 2 times`},
		{"dynamodb://AKIAEXAMPLE:s3cr3t@table?region=eu-west-1", "credentials do not belong in the URL"},
		{"dynamodb://table:8000?region=eu-west-1", "takes no port"},
		{"dynamodb://table/sub?region=eu-west-1", "has a path"},
		{"dynamodb://ab?region=eu-west-1", `table name "ab"`},
		{"dynamodb://table", "no region"},
		{"dynamodb://table?region=", "empty region"},
		{"dynamodb://table?region=eu-west-1&endpoint=localhost:8000", "endpoint must be"},
		{"dynamodb://table?region=eu-west-1&endpoint=http://u:p@localhost:8000", "endpoint must be"},
	} {
		_, err := store.Open(context.Background(), tc.url)
		require.True(t, errors.Is(err, store.ErrInvalid), "%s: %v", tc.url, err)
		require.ErrorContains(t, err, tc.says, tc.url)
		require.NotContains(t, err.Error(), "s3cr3t")
	}
}

// TestOpenURLMissingTable: opening checks the table.
func TestOpenURLMissingTable(t *testing.T) {
	needDynalite(t)
	awsEnv(t)
	_, err := store.Open(context.Background(), "dynamodb://no-such-table?region=eu-west-1&endpoint="+url.QueryEscape(endpoint))
	require.True(t, errors.Is(err, dynamostore.ErrTable), "%v", err)
	require.ErrorContains(t, err, `table "no-such-table" does not exist`)
}
