package idemnats_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idemkit/internal/testkit"
	"github.com/idemkit/idemkit/queue/idemnats"
)

// A panicking handler does not take the consumer down: the delivery is
// nakked for a retry, and the key is free for it.
func TestHandlePanicIsAFailedAttempt(t *testing.T) {
	h, err := idemnats.NewHandler(testkit.NewEngine(t), "billing", func(context.Context, jetstream.Msg) ([]byte, error) {
		panic("nil map in charge")
	})
	if err != nil {
		t.Fatal(err)
	}
	m := newFakeMsg("m")
	out := h.HandleContext(context.Background(), m)
	if out.Action != idemnats.Nak || !out.Ran || out.Err == nil {
		t.Fatalf("panicking handler: %+v, sent %v; want a nak with the panic as error", out, m.sent())
	}
}
