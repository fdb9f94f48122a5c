package idemamqp

import (
	"sync"

	"github.com/idemkit/idemkit/queue/internal/delivery"
	amqp "github.com/rabbitmq/amqp091-go"
)

// maxCounted bounds the failed-attempt counts a Handler keeps in memory.
const maxCounted = 1 << 16

// attempts counts the failed attempts of the keys this Handler requeued,
// for queues whose deliveries carry no count (classic queues): the
// broker's x-delivery-count (quorum queues) is used where present.
type attempts struct {
	mu     sync.Mutex
	failed map[string]int
}

// of returns the attempt number of d, whose key is key ("" when it has
// none).
func (a *attempts) of(d *amqp.Delivery, key string) int {
	if n, ok := deliveryCount(d); ok {
		return n + 1
	}
	if key == "" {
		return 1
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.failed[key] + 1
}

// deliveryCount reads the x-delivery-count header a quorum queue sets on
// a redelivery: the number of earlier deliveries.
func deliveryCount(d *amqp.Delivery) (int, bool) {
	switch n := d.Headers["x-delivery-count"].(type) {
	case int64:
		return int(max(n, 0)), true
	case int32:
		return int(max(n, 0)), true
	case int:
		return max(n, 0), true
	}
	return 0, false
}

// settled notes the verdict of an attempt at key: a requeue after a
// failed run counts, any other end forgets the key. When the table is
// full an arbitrary key is forgotten: its message gets more attempts,
// never fewer.
func (a *attempts) settled(key string, v delivery.Verdict) {
	if key == "" {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if v.Action != delivery.Retry {
		delete(a.failed, key)
		return
	}
	if !v.Ran {
		return
	}
	if _, ok := a.failed[key]; !ok && len(a.failed) >= maxCounted {
		for k := range a.failed {
			delete(a.failed, k)
			break
		}
	}
	if a.failed == nil {
		a.failed = make(map[string]int)
	}
	a.failed[key]++
}
