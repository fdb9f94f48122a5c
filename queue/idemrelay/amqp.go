package idemrelay

import (
	"context"
	"errors"
	"fmt"
	"sync"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// AMQP publishes to RabbitMQ (AMQP 0-9-1) on a channel in confirm mode:
// each message to the exchange with its subject as routing key, mandatory,
// persistent, with its headers, its event as the type property, and its
// id as the message-id property, which consumers built with
// queue/idemamqp deduplicate by (their default key). A message counts as
// published once the broker acknowledged it and did not return it as
// unroutable. RabbitMQ has no deduplication of its own: a re-publish
// (after a relay died between the confirm and the removal of its row)
// delivers a second copy with the same message-id.
type AMQP struct {
	conn     *amqp.Connection
	exchange string

	mu      sync.Mutex
	ch      *amqp.Channel
	returns chan amqp.Return
}

// NewAMQP returns a Publisher over conn that publishes to exchange (""
// for the default exchange, which routes to the queue named by the
// routing key). It opens its channel on first use, and again after the
// broker closed it.
func NewAMQP(conn *amqp.Connection, exchange string) (*AMQP, error) {
	if conn == nil {
		return nil, fmt.Errorf("idemrelay.NewAMQP: %w: nil *amqp.Connection", idemkit.ErrInvalid)
	}
	return &AMQP{conn: conn, exchange: exchange}, nil
}

// Publish implements Publisher. Calls are serialized: a batch's confirms
// are waited for on the Publisher's one channel.
func (p *AMQP) Publish(ctx context.Context, msgs []sqlstore.OutboxMessage) []Confirm {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]Confirm, len(msgs))
	if err := p.open(); err != nil {
		for i := range out {
			out[i].Err = err
		}
		return out
	}
	for len(p.returns) > 0 { // stale returns of an earlier batch that timed out
		<-p.returns
	}
	dcs := make([]*amqp.DeferredConfirmation, len(msgs))
	for i, m := range msgs {
		h := amqp.Table{}
		for k, v := range m.Headers {
			h[k] = v
		}
		dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, p.exchange, m.Subject, true, false, amqp.Publishing{
			MessageId:    m.ID,
			Type:         m.Event,
			Headers:      h,
			DeliveryMode: amqp.Persistent,
			Body:         m.Payload,
		})
		if err != nil {
			out[i].Err = err
			continue
		}
		dcs[i] = dc
	}
	for i, dc := range dcs {
		if dc == nil {
			continue
		}
		ok, err := dc.WaitContext(ctx)
		switch {
		case err != nil:
			out[i].Err = fmt.Errorf("no confirm: %w", err)
		case !ok:
			out[i].Err = errors.New("the broker refused the message (nack) or closed the channel")
		}
	}
	// A mandatory message that no queue took comes back before its ack.
	index := make(map[string]int, len(msgs))
	for i, m := range msgs {
		index[m.ID] = i
	}
	for {
		select {
		case r := <-p.returns:
			if i, ok := index[r.MessageId]; ok && out[i].Err == nil {
				out[i].Err = fmt.Errorf("returned unroutable by the broker: %d %s (exchange %q, routing key %q)", r.ReplyCode, r.ReplyText, r.Exchange, r.RoutingKey)
			}
			continue
		default:
		}
		break
	}
	return out
}

// open (re)opens the channel in confirm mode.
func (p *AMQP) open() error {
	if p.ch != nil && !p.ch.IsClosed() {
		return nil
	}
	ch, err := p.conn.Channel()
	if err != nil {
		return fmt.Errorf("open a channel: %w", err)
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return fmt.Errorf("confirm mode: %w", err)
	}
	p.ch, p.returns = ch, ch.NotifyReturn(make(chan amqp.Return, MaxBatchSize))
	return nil
}

// Close closes the Publisher's channel, if open; the connection stays the
// caller's.
func (p *AMQP) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ch == nil || p.ch.IsClosed() {
		return nil
	}
	err := p.ch.Close()
	if errors.Is(err, amqp.ErrClosed) {
		err = nil
	}
	return err
}
