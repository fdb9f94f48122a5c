package idemlambda_test

import (
	"context"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go/middleware"

	"github.com/idemkit/idemkit/internal/dynalitetest"
	"github.com/idemkit/idemkit/store/dynamostore"
)

// Set by TestMain: the endpoint of the dynalite the DynamoDB tests share
// (one server per test binary, a table per test), or why they skip.
var (
	dynaliteEndpoint string
	dynaliteSkip     string
)

// startDynalite starts dynalite when DYNALITE_CLI names it and returns
// the function that stops it. Unset, the DynamoDB tests skip, saying why;
// unset under CI=true it is an error.
func startDynalite() (stop func(), err error) {
	cli, skip, err := dynalitetest.Lookup()
	if err != nil {
		return nil, err
	}
	if cli == "" {
		dynaliteSkip = skip
		return func() {}, nil
	}
	srv, err := dynalitetest.Start(context.Background(), cli)
	if err != nil {
		return nil, err
	}
	dynaliteEndpoint = srv.Endpoint()
	return srv.Stop, nil
}

// tables numbers the tables of this test binary.
var tables atomic.Int64

// openDynamo returns a store over a fresh, uniquely named table of the
// test dynalite, deleted when t ends, and the counter of the requests its
// client sends from then on. It skips t when no dynalite runs.
func openDynamo(t testing.TB) (*dynamostore.Store, *requests) {
	t.Helper()
	if dynaliteSkip != "" {
		t.Skip(dynaliteSkip)
	}
	c := &requests{}
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(dynaliteEndpoint),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		APIOptions:   []func(*middleware.Stack) error{c.add},
		// A connection per racing goroutine: the SDK keeps 10 idle ones
		// per host by default and would redial the others.
		HTTPClient: awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
			tr.MaxIdleConnsPerHost = 64
		}),
	})
	table := "idemlambda-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(tables.Add(1), 10)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := dynamostore.CreateTable(ctx, client, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	s, err := dynamostore.New(ctx, client, table)
	if err != nil {
		t.Fatal(err)
	}
	c.take()
	return s, c
}

// requests counts the HTTP requests a DynamoDB client sends, by
// operation, and the capacity units the server reports for them. Its
// counting middleware sits in the Finalize step, after the SDK's retry
// loop, so it would see every attempt; another, in the Initialize step,
// asks every item request for its consumed capacity (a request that
// fails, a failed condition included, reports none).
type requests struct {
	mu    sync.Mutex
	ops   map[string]int
	units map[string]float64
}

func (c *requests) add(stack *middleware.Stack) error {
	err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("consumedCapacity",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			total := types.ReturnConsumedCapacityTotal
			switch p := in.Parameters.(type) {
			case *dynamodb.PutItemInput:
				p.ReturnConsumedCapacity = total
			case *dynamodb.GetItemInput:
				p.ReturnConsumedCapacity = total
			case *dynamodb.DeleteItemInput:
				p.ReturnConsumedCapacity = total
			}
			out, md, err := next.HandleInitialize(ctx, in)
			var cc *types.ConsumedCapacity
			switch r := out.Result.(type) {
			case *dynamodb.PutItemOutput:
				cc = r.ConsumedCapacity
			case *dynamodb.GetItemOutput:
				cc = r.ConsumedCapacity
			case *dynamodb.DeleteItemOutput:
				cc = r.ConsumedCapacity
			}
			if cc != nil && cc.CapacityUnits != nil {
				c.mu.Lock()
				if c.units == nil {
					c.units = map[string]float64{}
				}
				c.units[middleware.GetOperationName(ctx)] += *cc.CapacityUnits
				c.mu.Unlock()
			}
			return out, md, err
		}), middleware.After)
	if err != nil {
		return err
	}
	return stack.Finalize.Add(middleware.FinalizeMiddlewareFunc("countRequests",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			c.mu.Lock()
			if c.ops == nil {
				c.ops = map[string]int{}
			}
			c.ops[middleware.GetOperationName(ctx)]++
			c.mu.Unlock()
			return next.HandleFinalize(ctx, in)
		}), middleware.After)
}

// take returns the request counts since the last call and resets them
// and the capacity units.
func (c *requests) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops := c.ops
	c.ops, c.units = nil, nil
	if ops == nil {
		ops = map[string]int{}
	}
	return ops
}

// takeUnits returns the capacity units reported since the last take or
// takeUnits, by operation, and resets them.
func (c *requests) takeUnits() map[string]float64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	units := c.units
	c.units = nil
	if units == nil {
		units = map[string]float64{}
	}
	return units
}
