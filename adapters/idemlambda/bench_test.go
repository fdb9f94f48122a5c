package idemlambda_test

import (
	"context"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/adapters/idemlambda"
	"github.com/idemkit/idemkit/internal/testkit"
)

// BenchmarkReplay measures a replay through each wrapper beside the raw
// typed idemkit.Do on the same memory store, in one run: the difference
// is the adapter's (key and payload paths encode the event to JSON).
//
//	go test -run '^$' -bench Replay -benchmem ./adapters/idemlambda/
func BenchmarkReplay(b *testing.B) {
	ctx := context.Background()
	handle := func(_ context.Context, o order) (receipt, error) { return receipt{Receipt: "r-" + o.OrderID}, nil }
	o := order{OrderID: "o-1", Qty: 2}
	b.Run("raw-Do", func(b *testing.B) {
		e := testkit.NewEngine(b)
		run := func(ctx context.Context) (receipt, error) { return handle(ctx, o) }
		_, _, _ = idemkit.Do(ctx, e, "o-1", "", run)
		for b.Loop() {
			if _, _, err := idemkit.Do(ctx, e, "o-1", "", run); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, tc := range []struct {
		name string
		opts []idemlambda.Option
	}{
		{"Wrap-key-func", []idemlambda.Option{idemlambda.WithKeyFunc(func(o order) (string, error) { return o.OrderID, nil })}},
		{"Wrap-key-path", []idemlambda.Option{idemlambda.WithKeyPath("orderId")}},
		{"Wrap-key-and-payload-paths", []idemlambda.Option{idemlambda.WithKeyPath("orderId"), idemlambda.WithPayloadPaths("qty")}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			h, err := idemlambda.Wrap(testkit.NewEngine(b), "orders", handle, tc.opts...)
			if err != nil {
				b.Fatal(err)
			}
			_, _ = h(ctx, o)
			for b.Loop() {
				if _, err := h(ctx, o); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
	b.Run("APIGateway", func(b *testing.B) {
		h, err := idemlambda.APIGateway(testkit.NewEngine(b), "orders", (&restOrders{}).handle, restPrincipal)
		if err != nil {
			b.Fatal(err)
		}
		req := load[events.APIGatewayProxyRequest](b, "apigw-rest.json")
		_, _ = h(ctx, req)
		for b.Loop() {
			if resp, err := h(ctx, req); err != nil || resp.Headers[idemlambda.ReplayedHeader] != "true" {
				b.Fatal(resp, err)
			}
		}
	})
}
