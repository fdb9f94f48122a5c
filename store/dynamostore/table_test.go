package dynamostore_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/store"
	"github.com/idemkit/idemkit/store/dynamostore"
)

// TestNewMissingTable: the error names the table and the schema
// expected.
func TestNewMissingTable(t *testing.T) {
	needDynalite(t)
	client, _ := newClient(endpoint)
	_, err := dynamostore.New(context.Background(), client, "no-such-table")
	require.True(t, errors.Is(err, dynamostore.ErrTable), "%v", err)
	require.ErrorContains(t, err, `table "no-such-table" does not exist`)
	require.ErrorContains(t, err, "partition key k of type B (binary) and no sort key")
}

// TestNewWrongKeySchema: a table keyed otherwise is refused, naming its
// key schema and the one expected.
func TestNewWrongKeySchema(t *testing.T) {
	needDynalite(t)
	client, _ := newClient(endpoint)
	ctx := context.Background()
	for name, in := range map[string]*dynamodb.CreateTableInput{
		"string key": {
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("k"), AttributeType: types.ScalarAttributeTypeS}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("k"), KeyType: types.KeyTypeHash}},
		},
		"other name": {
			AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String("id"), AttributeType: types.ScalarAttributeTypeB}},
			KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String("id"), KeyType: types.KeyTypeHash}},
		},
		"sort key": {
			AttributeDefinitions: []types.AttributeDefinition{
				{AttributeName: aws.String("k"), AttributeType: types.ScalarAttributeTypeB},
				{AttributeName: aws.String("s"), AttributeType: types.ScalarAttributeTypeS},
			},
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String("k"), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String("s"), KeyType: types.KeyTypeRange},
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			table := uniqueName("idemkit-wrong")
			in.TableName = aws.String(table)
			in.BillingMode = types.BillingModePayPerRequest
			_, err := client.CreateTable(ctx, in)
			require.NoError(t, err)
			t.Cleanup(func() { _, _ = client.DeleteTable(ctx, &dynamodb.DeleteTableInput{TableName: in.TableName}) })
			_, err = dynamostore.New(ctx, client, table)
			require.True(t, errors.Is(err, dynamostore.ErrTable), "%v", err)
			require.ErrorContains(t, err, `table "`+table+`" has key schema`)
			require.ErrorContains(t, err, "expected partition key k of type B (binary) and no sort key")
		})
	}
}

// TestNewInvalid: a nil client and an empty table name are refused.
func TestNewInvalid(t *testing.T) {
	_, err := dynamostore.New(context.Background(), nil, "t")
	require.True(t, errors.Is(err, store.ErrInvalid), "%v", err)
	client, _ := newClient("http://127.0.0.1:1")
	_, err = dynamostore.New(context.Background(), client, "")
	require.True(t, errors.Is(err, store.ErrInvalid), "%v", err)
}

// TestPingMissingTable: a table deleted under a store makes Ping report
// it unavailable, naming the table.
func TestPingMissingTable(t *testing.T) {
	s, _ := newStore(t)
	require.NoError(t, s.Ping(context.Background()))
	client, _ := newClient(endpoint)
	_, err := client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(s.Table())})
	require.NoError(t, err)
	// The table is deleting for a moment, then gone.
	require.Eventually(t, func() bool { err = s.Ping(context.Background()); return err != nil }, 10*time.Second, 5*time.Millisecond)
	require.True(t, errors.Is(err, store.ErrUnavailable), "%v", err)
	require.True(t, errors.Is(err, dynamostore.ErrTable), "%v", err)
}

// TestEnableTTL checks the request EnableTTL sends. dynalite has no TTL
// (it refuses UpdateTimeToLive), so the answer is its refusal, returned
// naming the table and attribute.
func TestEnableTTL(t *testing.T) {
	needDynalite(t)
	var sent *dynamodb.UpdateTimeToLiveInput
	client, _ := newClient(endpoint, func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("capture",
			func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if u, ok := in.Parameters.(*dynamodb.UpdateTimeToLiveInput); ok {
					sent = u
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.Before)
	})
	table := newTable(t, client)
	err := dynamostore.EnableTTL(context.Background(), client, table)
	require.NotNil(t, sent)
	require.Equal(t, table, aws.ToString(sent.TableName))
	require.Equal(t, dynamostore.TTLAttribute, aws.ToString(sent.TimeToLiveSpecification.AttributeName))
	require.True(t, aws.ToBool(sent.TimeToLiveSpecification.Enabled))
	require.ErrorContains(t, err, `EnableTTL "`+table+`" on attribute "ttl"`)
}
