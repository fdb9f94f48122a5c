package idemnats

import (
	"context"
	"fmt"

	"github.com/idemkit/idemkit/queue/internal/delivery"
	"github.com/nats-io/nats.go/jetstream"
)

// HandleMsgs processes a batch of messages with one batch claim (one
// store call where the store is a store.Batcher, such as boltstore), then
// runs fn for the admitted ones in order, acknowledging each delivery as
// soon as its outcome is known. Outcomes are in the order of msgs. A key
// that appears twice in the batch runs once: its later copies are asked
// again after the first has run, and acked as replays.
func (h *Handler) HandleMsgs(ctx context.Context, msgs []jetstream.Msg) []Outcome {
	reqs := make([]delivery.Request, len(msgs))
	for i, m := range msgs {
		reqs[i] = h.request(m)
	}
	out := make([]Outcome, len(msgs))
	prog := startProgress(h.cfg.progress, msgs...)
	defer prog.end()
	h.p.Batch(ctx, reqs, func(i int, v delivery.Verdict) {
		prog.settle(i)
		out[i] = h.settle(ctx, msgs[i], v)
	})
	return out
}

// HandleBatch drains batch (the result of Consumer.Fetch, FetchBytes or
// FetchNoWait) and processes its messages with HandleMsgs. The error is
// the batch's own (batch.Error), such as a fetch that ended early; the
// messages received before it are processed all the same.
func (h *Handler) HandleBatch(ctx context.Context, batch jetstream.MessageBatch) ([]Outcome, error) {
	var msgs []jetstream.Msg
	for m := range batch.Messages() {
		msgs = append(msgs, m)
	}
	return h.HandleMsgs(ctx, msgs), batch.Error()
}

// Fetch fetches up to n messages from c (Consumer.Fetch with opts) and
// processes them with HandleBatch.
func (h *Handler) Fetch(ctx context.Context, c jetstream.Consumer, n int, opts ...jetstream.FetchOpt) ([]Outcome, error) {
	batch, err := c.Fetch(n, opts...)
	if err != nil {
		return nil, fmt.Errorf("idemnats: fetch: %w", err)
	}
	return h.HandleBatch(ctx, batch)
}
