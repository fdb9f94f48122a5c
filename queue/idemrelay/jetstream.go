package idemrelay

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idemkit"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// EventHeader is the header that carries a message's event name (NATS),
// beside the message's own headers. On AMQP the event is the message's
// type property.
const EventHeader = "Idemkit-Event"

// JetStream publishes to NATS JetStream: each message on its subject, with
// its headers, EventHeader, and Nats-Msg-Id set to its id, so that the
// stream drops a re-publish within its duplicate window (the stream's
// Duplicates setting, 2 minutes by default). A batch is published
// asynchronously and the relay waits for every acknowledgement.
type JetStream struct{ js jetstream.JetStream }

// NewJetStream returns a Publisher over js. The stream that captures the
// subjects must exist: a message no stream captures fails (no responders)
// and its row stays.
func NewJetStream(js jetstream.JetStream) (*JetStream, error) {
	if js == nil {
		return nil, fmt.Errorf("idemrelay.NewJetStream: %w: nil jetstream.JetStream", idemkit.ErrInvalid)
	}
	return &JetStream{js: js}, nil
}

// Publish implements Publisher.
func (p *JetStream) Publish(ctx context.Context, msgs []sqlstore.OutboxMessage) []Confirm {
	out := make([]Confirm, len(msgs))
	futures := make([]jetstream.PubAckFuture, len(msgs))
	limit := p.js.Conn().MaxPayload()
	for i, m := range msgs {
		nm := nats.NewMsg(m.Subject)
		nm.Data = m.Payload
		for k, v := range m.Headers {
			nm.Header.Set(k, v)
		}
		nm.Header.Set(EventHeader, m.Event)
		if size := int64(len(m.Payload)); limit > 0 && size > limit {
			out[i].Err = fmt.Errorf("%w: payload of %d bytes is over the server's max_payload of %d", nats.ErrMaxPayload, size, limit)
			continue
		}
		f, err := p.js.PublishMsgAsync(nm, jetstream.WithMsgID(m.ID))
		if err != nil {
			out[i].Err = err
			continue
		}
		futures[i] = f
	}
	for i, f := range futures {
		if f == nil {
			continue
		}
		select {
		case ack := <-f.Ok():
			out[i].Duplicate = ack.Duplicate
		case err := <-f.Err():
			out[i].Err = err
		case <-ctx.Done():
			out[i].Err = errors.Join(errors.New("no acknowledgement"), ctx.Err())
		}
	}
	return out
}
