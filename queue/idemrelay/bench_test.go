package idemrelay_test

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idemkit/queue/idemrelay"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// BenchmarkJetStream publishes the same messages two ways in one run:
// raw, with PublishMsgAsync in batches of 100 and Nats-Msg-Id set, waiting
// for the acknowledgements; and through the relay from an outbox on each
// database (the rows are written before the timer starts), batches of
// 100: claim, publish, wait, delete, commit. ns/op is per message.
//
//	go test -run '^$' -bench JetStream -benchtime 5000x ./queue/idemrelay/
func BenchmarkJetStream(b *testing.B) {
	const batch = 100
	b.Run("raw", func(b *testing.B) {
		js := connect(b)
		_, subject := newStream(b, js)
		msgs := outboxMessages(subject, b.N)
		b.ResetTimer()
		for i := 0; i < len(msgs); i += batch {
			end := min(i+batch, len(msgs))
			futures := make([]jetstream.PubAckFuture, 0, batch)
			for _, m := range msgs[i:end] {
				nm := nats.NewMsg(m.Subject)
				nm.Data = m.Payload
				f, err := js.PublishMsgAsync(nm, jetstream.WithMsgID(m.ID))
				if err != nil {
					b.Fatal(err)
				}
				futures = append(futures, f)
			}
			for _, f := range futures {
				select {
				case <-f.Ok():
				case err := <-f.Err():
					b.Fatal(err)
				}
			}
		}
	})
	for _, be := range backends() {
		b.Run("relay-"+be.name, func(b *testing.B) {
			s := newOutbox(b, be)
			js := connect(b)
			_, subject := newStream(b, js)
			ctx := context.Background()
			for i := 0; i < b.N; i += batch {
				tx, err := be.db.BeginTx(ctx, nil)
				if err != nil {
					b.Fatal(err)
				}
				for j := i; j < min(i+batch, b.N); j++ {
					if _, err := s.Tx(tx).Enqueue(ctx, event(subject, j)); err != nil {
						b.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					b.Fatal(err)
				}
			}
			pub, _ := idemrelay.NewJetStream(js)
			r, err := idemrelay.New(s, pub, idemrelay.WithBatchSize(batch))
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			published := 0
			for published < b.N {
				rep := r.Once(ctx)
				if rep.Err != nil || rep.Claimed == 0 {
					b.Fatalf("after %d of %d: %+v", published, b.N, rep)
				}
				published += rep.Published
			}
		})
	}
}

// outboxMessages returns n messages as the relay would read them.
func outboxMessages(subject string, n int) []sqlstore.OutboxMessage {
	out := make([]sqlstore.OutboxMessage, n)
	for i := range out {
		m := event(subject, i)
		out[i] = sqlstore.OutboxMessage{Seq: int64(i), ID: sqlstore.MessageID(m.Scope, m.Key, m.Event), Event: m.Event, Subject: subject, Payload: m.Payload}
	}
	return out
}
