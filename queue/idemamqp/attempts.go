package idemamqp

import (
	"sync"

	"github.com/idemkit/idemkit/queue/internal/delivery"
	amqp "github.com/rabbitmq/amqp091-go"
)

// maxCounted bounds the failed-attempt counts a Handler keeps in memory.
const maxCounted = 1 << 16

// attempts remembers the last failed attempt of the keys this Handler
// requeued with Nack, for queues whose deliveries carry no count (classic
// queues) when no copy could go to a delay queue. A copy in a delay queue
// carries its count in AttemptHeader, and a quorum queue counts
// redeliveries in x-delivery-count.
type attempts struct {
	mu     sync.Mutex
	failed map[string]int
}

// of returns the attempt number of d, whose key is key ("" when it has
// none): one more than the largest of its AttemptHeader, its
// x-delivery-count and the count kept here.
func (a *attempts) of(d *amqp.Delivery, key string) int {
	n := max(header(d, AttemptHeader), header(d, "x-delivery-count"))
	if key != "" {
		a.mu.Lock()
		n = max(n, a.failed[key])
		a.mu.Unlock()
	}
	return n + 1
}

// header reads a count header of d; a missing, negative or non-integer
// value counts 0 (a count only ever adds attempts).
func header(d *amqp.Delivery, name string) int {
	switch n := d.Headers[name].(type) {
	case int64:
		return int(max(n, 0))
	case int32:
		return int(max(n, 0))
	case int16:
		return int(max(n, 0))
	case int8:
		return int(max(n, 0))
	case int:
		return max(n, 0)
	}
	return 0
}

// settled notes how the attempt of request r ended: a Nack with requeue
// after a failed run is remembered, any other end forgets the key. When
// the table is full an arbitrary key is forgotten: its message gets more
// attempts, never fewer.
func (a *attempts) settled(r delivery.Request, v delivery.Verdict, requeued bool) {
	if r.Key == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if !requeued {
		delete(a.failed, r.Key)
		return
	}
	if !v.Ran {
		return
	}
	if _, ok := a.failed[r.Key]; !ok && len(a.failed) >= maxCounted {
		for k := range a.failed {
			delete(a.failed, k)
			break
		}
	}
	if a.failed == nil {
		a.failed = make(map[string]int)
	}
	a.failed[r.Key] = max(a.failed[r.Key], r.Attempt)
}
