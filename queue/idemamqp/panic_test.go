package idemamqp_test

import (
	"context"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/queue/idemamqp"
)

// A panicking handler does not take the consumer down: the delivery is
// a failed attempt, requeued for a retry.
func TestHandlePanicIsAFailedAttempt(t *testing.T) {
	h, err := idemamqp.NewHandler(testkit.NewEngine(t), "billing", func(context.Context, *amqp.Delivery) ([]byte, error) {
		panic("nil map in charge")
	}, idemamqp.WithRetryDelay(0))
	if err != nil {
		t.Fatal(err)
	}
	d, a := fakeDelivery("m")
	out := h.Handle(context.Background(), d)
	if out.Action != idemamqp.Requeue || !out.Ran || out.Err == nil {
		t.Fatalf("panicking handler: %+v, sent %v; want a requeue with the panic as error", out, a.got())
	}
}
