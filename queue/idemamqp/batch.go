package idemamqp

import (
	"context"
	"fmt"
	"time"

	"github.com/idemkit/idemkit"

	"github.com/idemkit/idemkit/queue/internal/delivery"
	amqp "github.com/rabbitmq/amqp091-go"
)

// HandleBatch processes deliveries with one batch claim (one store call
// where the store is a store.Batcher, such as boltstore), then runs fn for
// the admitted ones in order, acknowledging each as soon as its outcome is
// known. Deliveries to retry are republished to their delay queues
// (WithRetryQueue) or, without them, held together for the longest of
// their delays (bounded by ctx) and requeued at the end. A key that appears
// twice in the batch runs once; its copies are acked as replays. Outcomes
// are in the order of ds.
func (h *Handler) HandleBatch(ctx context.Context, ds []amqp.Delivery) []Outcome {
	reqs := make([]delivery.Request, len(ds))
	for i := range ds {
		reqs[i] = h.request(&ds[i])
	}
	out := make([]Outcome, len(ds))
	var retry []int
	var longest time.Duration
	verdicts := make([]delivery.Verdict, len(ds))
	h.p.Batch(ctx, reqs, func(i int, v delivery.Verdict) {
		if v.Action == delivery.Retry && !h.republishes(v.Delay) {
			retry = append(retry, i)
			verdicts[i] = v
			longest = max(longest, v.Delay)
			return
		}
		out[i] = h.settle(ctx, &ds[i], reqs[i], v, false)
	})
	hold(ctx, longest)
	for _, i := range retry {
		out[i] = h.settle(ctx, &ds[i], reqs[i], verdicts[i], true)
	}
	return out
}

// ServeBatches reads up to n deliveries at a time, whatever the channel
// holds without waiting for more (set the consumer's prefetch to at least
// n), and processes them with HandleBatch, until the channel closes
// (nil) or ctx ends (ctx.Err()). n must be positive.
func (h *Handler) ServeBatches(ctx context.Context, deliveries <-chan amqp.Delivery, n int) error {
	if n < 1 {
		return fmt.Errorf("idemamqp: %w: batch size %d", idemkit.ErrInvalid, n)
	}
	batch := make([]amqp.Delivery, 0, n)
	for {
		batch = batch[:0]
		select {
		case <-ctx.Done():
			return ctx.Err()
		case d, ok := <-deliveries:
			if !ok {
				return nil
			}
			batch = append(batch, d)
		}
		closed := false
	fill:
		for len(batch) < n {
			select {
			case d, ok := <-deliveries:
				if !ok {
					closed = true
					break fill
				}
				batch = append(batch, d)
			default:
				break fill
			}
		}
		if err := ctx.Err(); err != nil { // select picks at random: leave the batch to the broker
			return err
		}
		h.HandleBatch(ctx, batch)
		if closed {
			return nil
		}
	}
}
