package idemamqp

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"sync"
	"time"

	"github.com/idemkit/idemkit/queue/internal/delivery"
	amqp "github.com/rabbitmq/amqp091-go"
)

// AttemptHeader is the header a message republished to a delay queue
// carries: the number of its attempts that failed so far (an int64). A
// delivery's attempt number is one more than the largest of this header,
// a quorum queue's x-delivery-count and the Handler's own count (see the
// package doc).
const AttemptHeader = "x-idemkit-attempt"

// confirmTimeout bounds the wait for the broker's confirmation of a
// republished copy; without it the delivery is requeued.
const confirmTimeout = 30 * time.Second

// maxQueueName is the longest queue name AMQP 0-9-1 allows, in bytes.
const maxQueueName = 255

// retryQueues republishes failed deliveries to delay queues: one per
// back-off step, named <queue>.idemkit.retry.<ms>, whose messages expire
// after the step and are dead-lettered back to queue through the default
// exchange. Publishes are serialized on one channel in confirm mode, so a
// basic.return (the delay queue is gone) is known to belong to the
// publish it precedes.
type retryQueues struct {
	conn  *amqp.Connection
	queue string
	steps []time.Duration // ascending back-off delays, one queue each

	mu       sync.Mutex
	ch       *amqp.Channel
	returns  chan amqp.Return
	declared map[time.Duration]bool
}

// RetryQueueName returns the name of the delay queue a Handler with
// WithRetryQueue(conn, queue) uses for a back-off step of delay:
// queue + ".idemkit.retry." + the delay in whole milliseconds.
func RetryQueueName(queue string, delay time.Duration) string {
	return queue + ".idemkit.retry." + strconv.FormatInt(delay.Milliseconds(), 10)
}

// newRetryQueues returns the delay queues of queue for the back-off b.
func newRetryQueues(conn *amqp.Connection, queue string, b delivery.Backoff) *retryQueues {
	return &retryQueues{conn: conn, queue: queue, steps: steps(b)}
}

// steps returns the distinct delays of b, rounded up to whole
// milliseconds (the unit of a queue's TTL), in ascending order: at most
// one per doubling from First to Max.
func steps(b delivery.Backoff) []time.Duration {
	var out []time.Duration
	for n := 1; n <= 64; n++ {
		d := roundMS(b.Delay(n))
		if len(out) == 0 || d > out[len(out)-1] {
			out = append(out, d)
		}
		if d >= roundMS(b.Max) || d == 0 {
			break
		}
	}
	return out
}

// roundMS rounds d up to a whole millisecond.
func roundMS(d time.Duration) time.Duration {
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

// step returns the delay queue step for a delay: the shortest step at
// least d, or the longest step. A retry that is no fault of the message
// (another delivery of the key running, a store failure) may ask for any
// delay; rounding it to a step keeps the number of delay queues bounded.
func (q *retryQueues) step(d time.Duration) time.Duration {
	for _, s := range q.steps {
		if s >= d {
			return s
		}
	}
	return q.steps[len(q.steps)-1]
}

// names returns the names of every delay queue of q.
func (q *retryQueues) names() []string {
	out := make([]string, len(q.steps))
	for i, s := range q.steps {
		out[i] = RetryQueueName(q.queue, s)
	}
	return out
}

// publish publishes a copy of d to the delay queue of step, with
// AttemptHeader set to failed, and returns once the broker has confirmed
// it. An error means the copy may not be stored: the caller must not ack
// d.
func (q *retryQueues) publish(ctx context.Context, d *amqp.Delivery, step time.Duration, failed int) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if err := q.open(); err != nil {
		return err
	}
	name := RetryQueueName(q.queue, step)
	if !q.declared[step] {
		args := amqp.Table{
			"x-dead-letter-exchange":    "",
			"x-dead-letter-routing-key": q.queue,
			"x-message-ttl":             step.Milliseconds(),
		}
		if _, err := q.ch.QueueDeclare(name, true, false, false, false, args); err != nil {
			return fmt.Errorf("declare delay queue %s: %w", name, err)
		}
		q.declared[step] = true
	}
	for len(q.returns) > 0 { // a stale return, of a publish that timed out
		<-q.returns
	}
	ctx, cancel := context.WithTimeout(ctx, confirmTimeout)
	defer cancel()
	dc, err := q.ch.PublishWithDeferredConfirmWithContext(ctx, "", name, true, false, republication(d, step, failed))
	if err != nil {
		return fmt.Errorf("publish to delay queue %s: %w", name, err)
	}
	ok, err := dc.WaitContext(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("confirm of delay queue %s: %w", name, err)
	case !ok:
		return fmt.Errorf("delay queue %s: publish not confirmed (nack or channel closed)", name)
	}
	select {
	case r := <-q.returns: // sent before the ack, on the same channel
		delete(q.declared, step)
		return fmt.Errorf("delay queue %s: message returned: %d %s", name, r.ReplyCode, r.ReplyText)
	default:
	}
	return nil
}

// open (re)opens the publishing channel in confirm mode.
func (q *retryQueues) open() error {
	if q.ch != nil && !q.ch.IsClosed() {
		return nil
	}
	ch, err := q.conn.Channel()
	if err != nil {
		return fmt.Errorf("open a channel for the delay queues: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return fmt.Errorf("confirm mode for the delay queues: %w", err)
	}
	q.ch, q.returns, q.declared = ch, ch.NotifyReturn(make(chan amqp.Return, 1)), make(map[time.Duration]bool)
	return nil
}

// close closes the publishing channel, if open.
func (q *retryQueues) close() error {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.ch == nil || q.ch.IsClosed() {
		return nil
	}
	err := q.ch.Close()
	if errors.Is(err, amqp.ErrClosed) {
		err = nil
	}
	return err
}

// republication is the copy of d to publish to a delay queue of step: the
// same body, properties and headers (without the x-delivery-count of a
// quorum queue, which describes the original), AttemptHeader set to
// failed, and an Expiration of step, which RabbitMQ removes when it
// dead-letters the copy back.
func republication(d *amqp.Delivery, step time.Duration, failed int) amqp.Publishing {
	h := maps.Clone(d.Headers)
	if h == nil {
		h = amqp.Table{}
	}
	delete(h, "x-delivery-count")
	h[AttemptHeader] = int64(failed)
	return amqp.Publishing{
		Headers:         h,
		ContentType:     d.ContentType,
		ContentEncoding: d.ContentEncoding,
		DeliveryMode:    d.DeliveryMode,
		Priority:        d.Priority,
		CorrelationId:   d.CorrelationId,
		ReplyTo:         d.ReplyTo,
		Expiration:      strconv.FormatInt(step.Milliseconds(), 10),
		MessageId:       d.MessageId,
		Timestamp:       d.Timestamp,
		Type:            d.Type,
		UserId:          d.UserId,
		AppId:           d.AppId,
		Body:            d.Body,
	}
}
