package dynamostore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/idemkit/idemkit/store"
)

// API is the part of the DynamoDB client the store uses;
// *dynamodb.Client implements it.
type API interface {
	PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(ctx context.Context, in *dynamodb.GetItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	Scan(ctx context.Context, in *dynamodb.ScanInput, opts ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
	DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, opts ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
}

// Store is a store.Store kept in one DynamoDB table. It implements
// store.SetNXValuer, store.Scanner and store.Pinger; it does not
// implement store.Batcher (see the package documentation). Its methods
// are safe for concurrent use.
type Store struct {
	api   API
	table *string
}

var (
	_ store.Store       = (*Store)(nil)
	_ store.SetNXValuer = (*Store)(nil)
	_ store.Scanner     = (*Store)(nil)
	_ store.Pinger      = (*Store)(nil)
)

// expectedSchema describes the key schema the store needs, for errors.
const expectedSchema = "partition key " + KeyAttribute + " of type B (binary) and no sort key (dynamostore.CreateTable makes it)"

// New returns a Store over table, reached through api (a
// *dynamodb.Client). It checks the table with one DescribeTable: a
// missing table or another key schema returns an error wrapping ErrTable
// that names the table and the schema expected; a DynamoDB that cannot be
// reached returns one wrapping store.ErrUnavailable. Every operation is
// sent without the SDK's retries (see the package documentation).
func New(ctx context.Context, api API, table string) (*Store, error) {
	if api == nil {
		return nil, fmt.Errorf("dynamostore: %w: nil DynamoDB client", store.ErrInvalid)
	}
	if table == "" {
		return nil, fmt.Errorf("dynamostore: %w: empty table name", store.ErrInvalid)
	}
	s := &Store{api: api, table: aws.String(table)}
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// check describes the table and compares its key schema with the one the
// store needs.
func (s *Store) check(ctx context.Context) error {
	out, err := s.api.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: s.table}, noRetry)
	var missing *types.ResourceNotFoundException
	switch {
	case errors.As(err, &missing):
		return fmt.Errorf("%w: table %q does not exist; expected %s", ErrTable, *s.table, expectedSchema)
	case err != nil:
		return fail(ctx, "DescribeTable "+*s.table, "", err)
	}
	if got := keySchema(out.Table); got != KeyAttribute+" HASH B" {
		return fmt.Errorf("%w: table %q has key schema %q; expected %s", ErrTable, *s.table, got, expectedSchema)
	}
	return nil
}

// keySchema writes a table's key schema as "name KEYTYPE attrtype, ...".
func keySchema(t *types.TableDescription) string {
	if t == nil {
		return ""
	}
	attrType := map[string]types.ScalarAttributeType{}
	for _, d := range t.AttributeDefinitions {
		attrType[aws.ToString(d.AttributeName)] = d.AttributeType
	}
	var parts []string
	for _, k := range t.KeySchema {
		name := aws.ToString(k.AttributeName)
		parts = append(parts, fmt.Sprintf("%s %s %s", name, k.KeyType, attrType[name]))
	}
	return strings.Join(parts, ", ")
}

// Ping checks that the table answers, with one DescribeTable (which
// consumes no capacity). It returns nil or an error wrapping
// store.ErrUnavailable, or ErrTable when the table is gone.
func (s *Store) Ping(ctx context.Context) error {
	err := s.check(ctx)
	if errors.Is(err, ErrTable) {
		return fmt.Errorf("dynamostore: %w: %w", store.ErrUnavailable, err)
	}
	return err
}

// Table returns the name of the store's table.
func (s *Store) Table() string { return *s.table }

// noRetry sends an operation once: the failure policy of the caller
// decides what happens next, and a conditional write retried after its
// answer was lost would misreport what it did.
func noRetry(o *dynamodb.Options) {
	o.Retryer = aws.NopRetryer{}
	o.RetryMaxAttempts = 0
}
