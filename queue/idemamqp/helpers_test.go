package idemamqp_test

import (
	"errors"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"
)

// fakeAcker is an amqp.Acknowledger that records what it is sent, for
// tests of the decisions without a broker.
type fakeAcker struct {
	mu   sync.Mutex
	sent []string
}

func (a *fakeAcker) record(s string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.sent = append(a.sent, s)
	return nil
}

func (a *fakeAcker) got() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.sent...)
}

func (a *fakeAcker) Ack(uint64, bool) error { return a.record("ack") }
func (a *fakeAcker) Nack(_ uint64, _ bool, requeue bool) error {
	if requeue {
		return a.record("requeue")
	}
	return a.record("reject")
}
func (a *fakeAcker) Reject(_ uint64, requeue bool) error { return a.Nack(0, false, requeue) }

// fakeDelivery is a delivery of a message with id as its MessageId.
func fakeDelivery(id string) (amqp.Delivery, *fakeAcker) {
	a := &fakeAcker{}
	return amqp.Delivery{Acknowledger: a, MessageId: id, Body: []byte("body"), Headers: amqp.Table{}}, a
}

var errDeclined = errors.New("card declined")
