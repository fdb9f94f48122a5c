package idemlambda_test

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemlambda"
	"github.com/idemkit/idemkit/store/memstore"
)

// A REST API handler keyed by the Idempotency-Key header: the retry gets
// the first response, marked replayed. In a function, pass h to
// lambda.Start.
func ExampleAPIGateway() {
	st, _ := memstore.New() // in a function: dynamostore, redisstore, sqlstore
	engine, _ := idemkit.New(st, idemkit.WithObserver(nil))
	orders := 0
	h, err := idemlambda.APIGateway(engine, "create-order", func(ctx context.Context, req events.APIGatewayProxyRequest) (events.APIGatewayProxyResponse, error) {
		orders++
		return events.APIGatewayProxyResponse{StatusCode: 201, Body: fmt.Sprintf(`{"order":%d}`, orders)}, nil
	}, idemlambda.WithPrincipalPath("requestContext.authorizer.claims.sub")) // a Cognito user pool's subject
	if err != nil {
		fmt.Println(err)
		return
	}
	req := events.APIGatewayProxyRequest{HTTPMethod: "POST", Path: "/orders",
		Headers: map[string]string{"Idempotency-Key": "7f3a"}, Body: `{"sku":"tea"}`,
		RequestContext: events.APIGatewayProxyRequestContext{Authorizer: map[string]any{"claims": map[string]any{"sub": "alice"}}}}
	for range 2 {
		resp, _ := h(context.Background(), req)
		fmt.Println(resp.StatusCode, resp.Body, "replayed:", resp.Headers[idemlambda.ReplayedHeader] == "true")
	}
	// Output:
	// 201 {"order":1} replayed: false
	// 201 {"order":1} replayed: true
}

// An SQS batch: the redelivered batch is acknowledged without running the
// handler again.
func ExampleSQS() {
	st, _ := memstore.New()
	engine, _ := idemkit.New(st, idemkit.WithObserver(nil))
	runs := 0
	h, _ := idemlambda.SQS(engine, "ledger", func(ctx context.Context, m events.SQSMessage) error {
		runs++
		return nil
	}, idemlambda.WithKeyPath("body.orderId"))
	ev := events.SQSEvent{Records: []events.SQSMessage{
		{MessageId: "m-1", Body: `{"orderId":"o-1"}`},
		{MessageId: "m-2", Body: `{"orderId":"o-1"}`}, // sent twice by the producer
	}}
	for range 2 {
		resp, _ := h(context.Background(), ev)
		fmt.Println(len(resp.BatchItemFailures), "failed")
	}
	fmt.Println(runs, "run")
	// Output:
	// 0 failed
	// 0 failed
	// 1 run
}
