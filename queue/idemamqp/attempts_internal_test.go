package idemamqp

import (
	"context"
	"errors"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idemkit/internal/testkit"
)

// nackProbe is a delivery's Acknowledger that, when the delivery is
// requeued, asks the Handler which attempt the redelivery would be: the
// broker may hand the redelivery to another Serve loop before Nack
// returns.
type nackProbe struct {
	h        *Handler
	d        *amqp.Delivery
	requeued []int // the redelivery's attempt number, seen at each requeue
}

func (p *nackProbe) Ack(uint64, bool) error    { return nil }
func (p *nackProbe) Reject(uint64, bool) error { return nil }
func (p *nackProbe) Nack(_ uint64, _ bool, requeue bool) error {
	if requeue {
		p.requeued = append(p.requeued, p.h.attempts.of(p.d, p.d.MessageId))
	}
	return nil
}

// TestAttemptIsCountedBeforeTheRequeue: on a classic queue without a delay
// queue the Handler counts failed attempts in memory; the count must be
// there when Nack requeues, or a redelivery that reaches another Serve
// loop at once runs as the same attempt again (a message given up after
// four runs instead of three, seen in CI).
func TestAttemptIsCountedBeforeTheRequeue(t *testing.T) {
	e := testkit.NewEngine(t)
	h, err := NewHandler(e, "billing", func(context.Context, *amqp.Delivery) ([]byte, error) {
		return nil, errors.New("db timeout")
	}, WithRetryDelay(0), WithMaxAttempts(3))
	if err != nil {
		t.Fatal(err)
	}
	d := amqp.Delivery{MessageId: "m-1", Body: []byte("{}")}
	probe := &nackProbe{h: h, d: &d}
	d.Acknowledger = probe
	for range 2 {
		h.Handle(context.Background(), d)
	}
	if len(probe.requeued) != 2 || probe.requeued[0] != 2 || probe.requeued[1] != 3 {
		t.Fatalf("attempt of the redelivery at each requeue: %v, want [2 3]", probe.requeued)
	}
}
