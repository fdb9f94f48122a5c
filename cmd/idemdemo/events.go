package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemkit/idemkit/cmd/internal/telemetry"
	"github.com/idemkit/idemkit/queue/idemrelay"
	"github.com/idemkit/idemkit/store/sqlstore"
)

// Events out: with -events nats://HOST:PORT/SUBJECT and a PostgreSQL
// store, every new order of POST /orders (and the browser page) writes
// an "order.placed" event to the outbox table in the transaction that
// creates the order and completes its idempotency record, and a relay
// (queue/idemrelay) publishes the committed events to NATS JetStream,
// each with Nats-Msg-Id set to its message id, derived from the user and
// the idempotency key. An order that rolls back announces nothing; a
// crash between the commit and the publication delays the event, never
// loses it; a relay that dies after publishing, before deleting its row,
// publishes it again and JetStream drops the copy.

// orderPlacedEvent is the event name of a new order.
const orderPlacedEvent = "order.placed"

// eventsConfig is a parsed -events URL.
type eventsConfig struct {
	server  string // nats://[user:password@]host:port, for nats.Connect
	host    string // host:port, for logs (never the credentials)
	subject string
}

// parseEventsURL parses -events: nats://[user:password@]host:port/SUBJECT,
// where SUBJECT is a NATS subject without wildcards.
func parseEventsURL(raw string) (eventsConfig, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return eventsConfig{}, errors.New("-events: not a URL") // the URL may hold a password: not echoed
	}
	subject := strings.TrimPrefix(u.Path, "/")
	switch {
	case u.Scheme != "nats":
		return eventsConfig{}, fmt.Errorf("-events: scheme %q: want nats://host:port/subject", u.Scheme)
	case u.Host == "":
		return eventsConfig{}, errors.New("-events: no host: want nats://host:port/subject")
	case u.RawQuery != "" || u.Fragment != "":
		return eventsConfig{}, errors.New("-events: takes no query or fragment: want nats://host:port/subject")
	case !validSubject(subject):
		return eventsConfig{}, fmt.Errorf("-events: subject %q: want dot-separated tokens of letters, digits, - and _", subject)
	}
	server := &url.URL{Scheme: "nats", User: u.User, Host: u.Host}
	return eventsConfig{server: server.String(), host: u.Host, subject: subject}, nil
}

// validSubject reports whether s is a NATS subject without wildcards.
func validSubject(s string) bool {
	if s == "" || len(s) > sqlstore.MaxSubjectLen {
		return false
	}
	for tok := range strings.SplitSeq(s, ".") {
		if tok == "" {
			return false
		}
		for _, r := range tok {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}

// streamName is the JetStream stream the demo keeps the events of subject
// in: IDEMDEMO_ and the subject with dots as underscores.
func streamName(subject string) string {
	return "IDEMDEMO_" + strings.NewReplacer(".", "_", "-", "_").Replace(subject)
}

// orderPlaced is the body of an "order.placed" event.
type orderPlaced struct {
	Order uint64 `json:"order"`
	User  string `json:"user"`
	SKU   string `json:"sku"`
	Qty   int    `json:"qty"`
}

// enqueuePlaced writes o's "order.placed" event through v, the view of
// the transaction that created o under dedupKey.
func enqueuePlaced(ctx context.Context, v *sqlstore.View, subject string, o Order, dedupKey string) error {
	body, err := json.Marshal(orderPlaced{Order: o.ID, User: o.User, SKU: o.SKU, Qty: o.Qty})
	if err != nil {
		return err
	}
	_, err = v.Enqueue(ctx, sqlstore.Message{Scope: o.User, Key: dedupKey, Event: orderPlacedEvent, Subject: subject,
		Headers: map[string]string{"Content-Type": "application/json"}, Payload: body})
	return err
}

// startRelay connects to NATS, makes sure the events' stream exists,
// creates the outbox table if it is missing, and runs a relay from it in
// the background, its batches counted on GET /metrics
// (idemkit_relay_messages_total by outcome, idemkit_relay_lag_seconds). It returns the function that stops the relay and closes
// the connection.
func startRelay(ctx context.Context, ev eventsConfig, st *sqlstore.Store, tel *telemetry.Telemetry, log *slog.Logger) (func(), error) {
	nc, err := nats.Connect(ev.server, nats.Name("idemdemo relay"), nats.Timeout(5*time.Second))
	if err != nil {
		return nil, fmt.Errorf("-events: connect to %s: %w", ev.host, err)
	}
	fail := func(err error) (func(), error) {
		nc.Close()
		return nil, err
	}
	js, err := jetstream.New(nc)
	if err != nil {
		return fail(fmt.Errorf("-events: %w", err))
	}
	if _, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: streamName(ev.subject), Subjects: []string{ev.subject}}); err != nil {
		return fail(fmt.Errorf("-events: stream %s: %w", streamName(ev.subject), err))
	}
	if err := st.CreateOutbox(ctx); err != nil {
		return fail(fmt.Errorf("-events: %w", err))
	}
	pub, err := idemrelay.NewJetStream(js)
	if err != nil {
		return fail(err)
	}
	relay, err := idemrelay.New(st, pub, idemrelay.WithPollInterval(100*time.Millisecond),
		idemrelay.WithObserver(func(r idemrelay.Report) {
			tel.Relayed(r.Published, r.Duplicates, r.Failed, r.Lag)
			if r.Err != nil || r.Failed > 0 {
				log.Warn("events: relay batch", "published", r.Published, "failed", r.Failed, "error", r.Err)
			}
		}))
	if err != nil {
		return fail(err)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = relay.Run(runCtx)
	}()
	log.Info("events: publishing order.placed through the outbox", "nats", ev.host, "subject", ev.subject)
	return func() {
		cancel()
		<-done
		nc.Close()
	}, nil
}
