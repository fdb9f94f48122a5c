package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// TableAPI is the part of the DynamoDB client CreateTable and EnableTTL
// use; *dynamodb.Client implements it.
type TableAPI interface {
	CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, opts ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// CreateTable creates table with the key schema the store needs
// (partition key KeyAttribute of type B, no sort key), billed per request
// (on demand), and waits until it is active or ctx is done. Turn on
// DynamoDB's deletion of expired items with EnableTTL. Infrastructure as
// code can make the same table; the package documentation gives the
// schema.
func CreateTable(ctx context.Context, api TableAPI, table string) error {
	if api == nil {
		return errors.New("dynamostore: CreateTable: nil DynamoDB client")
	}
	_, err := api.CreateTable(ctx, &dynamodb.CreateTableInput{
		TableName:            aws.String(table),
		AttributeDefinitions: []types.AttributeDefinition{{AttributeName: aws.String(KeyAttribute), AttributeType: types.ScalarAttributeTypeB}},
		KeySchema:            []types.KeySchemaElement{{AttributeName: aws.String(KeyAttribute), KeyType: types.KeyTypeHash}},
		BillingMode:          types.BillingModePayPerRequest,
	})
	if err != nil {
		return fmt.Errorf("dynamostore: CreateTable %q: %w", table, err)
	}
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		out, err := api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(table)})
		if err != nil {
			return fmt.Errorf("dynamostore: CreateTable %q: waiting until it is active: %w", table, err)
		}
		if out.Table != nil && out.Table.TableStatus == types.TableStatusActive {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dynamostore: CreateTable %q: waiting until it is active: %w", table, ctx.Err())
		case <-tick.C:
		}
	}
}

// EnableTTL turns on DynamoDB's TTL deletion for table on TTLAttribute,
// which the store sets on every item. It only keeps the table small:
// DynamoDB deletes expired items up to days late, and the store checks
// expiry itself, to the millisecond, in every operation's condition.
func EnableTTL(ctx context.Context, api TableAPI, table string) error {
	if api == nil {
		return errors.New("dynamostore: EnableTTL: nil DynamoDB client")
	}
	_, err := api.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(table),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(TTLAttribute), Enabled: aws.Bool(true)},
	})
	if err != nil {
		return fmt.Errorf("dynamostore: EnableTTL %q on attribute %q: %w", table, TTLAttribute, err)
	}
	return nil
}
