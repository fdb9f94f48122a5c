package dynamostore_test

import (
	"context"
	"fmt"
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
	"github.com/aws/smithy-go/middleware"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/internal/dynalitetest"
	"github.com/idemkit/idemkit/store/dynamostore"
)

// Set by TestMain: the endpoint of the dynalite every test uses, or why
// the tests skip.
var (
	endpoint   string
	skipReason string
)

// childEnv names the environment variable that makes the test binary a
// child of the cross-process race (see TestCrossProcessRace); it holds
// the endpoint and table.
const childEnv = "DYNAMOSTORE_TEST_CHILD"

func TestMain(m *testing.M) {
	if v := os.Getenv(childEnv); v != "" {
		os.Exit(runChild(v))
	}
	cli, skip, err := dynalitetest.Lookup()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if cli == "" {
		skipReason = skip
		os.Exit(m.Run())
	}
	srv, err := dynalitetest.Start(context.Background(), cli)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	endpoint = srv.Endpoint()
	code := m.Run()
	srv.Stop()
	os.Exit(code)
}

// needDynalite skips t when no dynalite runs, saying why.
func needDynalite(tb testing.TB) {
	tb.Helper()
	if skipReason != "" {
		tb.Skip(skipReason)
	}
}

// newClient returns a client of the test server at ep with static
// credentials, and the counter of the requests it sends; extra
// middleware goes on its stack after the counter.
func newClient(ep string, extra ...func(*middleware.Stack) error) (*dynamodb.Client, *counter) {
	c := &counter{}
	client := dynamodb.New(dynamodb.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String(ep),
		Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
		APIOptions:   append([]func(*middleware.Stack) error{c.add}, extra...),
		// Keep a connection per racing goroutine: the SDK's default of 10
		// idle connections per host would redial most of them each round.
		HTTPClient: awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
			t.MaxIdleConnsPerHost = 128
		}),
	})
	return client, c
}

var tableSeq atomic.Int64

// newTable creates a table named uniquely for this run and returns its
// name.
func newTable(tb testing.TB, client *dynamodb.Client) string {
	tb.Helper()
	name := uniqueName("idemkit")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(tb, dynamostore.CreateTable(ctx, client, name))
	tb.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(name)})
	})
	return name
}

// uniqueName returns prefix followed by a suffix unique to this run.
func uniqueName(prefix string) string {
	return prefix + "-" + strconv.Itoa(os.Getpid()) + "-" + strconv.FormatInt(tableSeq.Add(1), 10)
}

// newStore returns a store over a fresh table, and the counter of the
// requests its client sends.
func newStore(tb testing.TB) (*dynamostore.Store, *counter) {
	tb.Helper()
	needDynalite(tb)
	client, c := newClient(endpoint)
	table := newTable(tb, client)
	s, err := dynamostore.New(context.Background(), client, table)
	require.NoError(tb, err)
	c.reset()
	return s, c
}

// counter counts the HTTP requests a client sends, by operation: its
// middleware sits in the Finalize step, after the retry loop, so it sees
// every attempt.
type counter struct {
	mu  sync.Mutex
	ops map[string]int
}

func (c *counter) add(stack *middleware.Stack) error {
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

// take returns the counts since the last call and resets them.
func (c *counter) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	ops := c.ops
	c.ops = nil
	if ops == nil {
		ops = map[string]int{}
	}
	return ops
}

func (c *counter) reset() { c.take() }

// total returns the number of requests since the last take.
func (c *counter) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, v := range c.ops {
		n += v
	}
	return n
}
