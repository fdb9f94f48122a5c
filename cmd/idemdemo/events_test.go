package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// natsURL is the NATS server with JetStream that scripts/test.sh starts.
const natsURL = "nats://127.0.0.1:4222"

// TestOrdersAnnouncedOnceThroughTheOutbox runs the demo on PostgreSQL with
// -events, places orders with concurrent duplicates, SIGKILLs the demo
// while some orders are in flight (their transactions never commit),
// restarts it, retries every order until 201, and counts the
// "order.placed" events the stream received: one per order, each with
// its message id, and none for an order that was not created.
func TestOrdersAnnouncedOnceThroughTheOutbox(t *testing.T) {
	bin := buildDemo(t)
	pgURL, _ := pgTestDatabase(t)
	nc, err := nats.Connect(natsURL, nats.Timeout(5*time.Second))
	require.NoError(t, err, "NATS with JetStream on 127.0.0.1:4222 (scripts/test.sh starts it)")
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	subject := fmt.Sprintf("idemdemo.test%d.orders", time.Now().UnixNano())
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), streamName(subject)) })
	args := []string{"-addr", "127.0.0.1:0", "-store", pgURL, "-lease", "2s", "-budget", "5s", "-log-level", "warn", "-events", natsURL + "/" + subject}
	demo := startDemo(t, bin, args...)
	client := &http.Client{Timeout: 20 * time.Second}

	type order struct{ user, key string }
	var orders []order
	for i := range 12 {
		orders = append(orders, order{user: fmt.Sprintf("user%d", i%3), key: fmt.Sprintf("order-%d", i)})
	}
	post := func(url string, o order, header ...string) (int, error) {
		req, err := http.NewRequest(http.MethodPost, url+"/orders", strings.NewReader(`{"sku":"book","qty":1}`))
		if err != nil {
			return 0, err
		}
		req.Header.Set(userHeader, o.user)
		req.Header.Set("Idempotency-Key", o.key)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := client.Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	// The first 8 orders, each sent 4 times at once; the last 4 held in
	// the handler (X-Demo-Delay) when the demo is killed.
	var wg sync.WaitGroup
	for _, o := range orders[:8] {
		for range 4 {
			wg.Go(func() { _, _ = post(demo.url, o) })
		}
	}
	wg.Wait()
	for _, o := range orders[8:] {
		wg.Go(func() {
			_, err := post(demo.url, o, delayHeader, "5s")
			assert.Error(t, err, "the held order must be cut off by the kill")
		})
	}
	require.Eventually(t, func() bool { return claimsInFlight(t, client, demo.url) >= 4 }, 10*time.Second, 10*time.Millisecond,
		"the held orders never reached their handler")
	demo.kill()
	wg.Wait()

	demo = startDemo(t, bin, args...)
	defer demo.kill()
	for _, o := range orders {
		require.Eventually(t, func() bool {
			code, err := post(demo.url, o)
			return err == nil && code == http.StatusCreated
		}, 20*time.Second, 50*time.Millisecond, "no 201 for %s", o.key)
	}

	stream, err := js.Stream(t.Context(), streamName(subject))
	require.NoError(t, err)
	require.Eventually(t, func() bool {
		info, err := stream.Info(t.Context())
		return err == nil && info.State.Msgs >= uint64(len(orders))
	}, 20*time.Second, 50*time.Millisecond, "the relay did not publish every order")
	cons, err := stream.OrderedConsumer(t.Context(), jetstream.OrderedConsumerConfig{})
	require.NoError(t, err)
	batch, err := cons.FetchNoWait(len(orders) * 2)
	require.NoError(t, err)
	perOrder := map[string]int{}
	ids := map[string]bool{}
	n := 0
	for m := range batch.Messages() {
		n++
		var ev orderPlaced
		require.NoError(t, json.Unmarshal(m.Data(), &ev))
		perOrder[fmt.Sprintf("%s/%d", ev.User, ev.Order)]++
		id := m.Headers().Get(jetstream.MsgIDHeader)
		assert.NotEmpty(t, id)
		assert.False(t, ids[id], "message id %s published twice", id)
		ids[id] = true
		assert.Equal(t, orderPlacedEvent, m.Headers().Get("Idemkit-Event"))
	}
	require.NoError(t, batch.Error())
	assert.Equal(t, len(orders), n, "one event per order")
	assert.Len(t, perOrder, len(orders), "every order announced")
	for o, c := range perOrder {
		assert.Equal(t, 1, c, "order %s announced %d times", o, c)
	}
	created := 0
	for u := range 3 {
		r := doHTTP(t, client, http.MethodGet, demo.url+"/orders", fmt.Sprintf("user%d", u), "")
		var list []Order
		require.NoError(t, json.Unmarshal(r.body, &list))
		created += len(list)
		for _, o := range list {
			assert.Equal(t, 1, perOrder[fmt.Sprintf("%s/%d", o.User, o.ID)], "order %d of %s", o.ID, o.User)
		}
	}
	assert.Equal(t, len(orders), created, "one order per key")
	m := string(doHTTP(t, client, http.MethodGet, demo.url+"/metrics", "", "").body)
	assert.Regexp(t, `idemkit_relay_messages_total\{[^}]*outcome="published"[^}]*\} \d+`, m, "the relay's batches are counted")
	assert.Contains(t, m, "idemkit_relay_lag_seconds")
	t.Logf("%d orders (%d sent 4 times at once, %d cut off by a SIGKILL and retried): %d events, one each", len(orders), 8, 4, n)
}

// -events is refused on a store whose orders do not commit with their
// records, and a malformed URL at once.
func TestEventsNeedsPostgreSQL(t *testing.T) {
	for _, bad := range []string{"http://127.0.0.1:4222/x", "nats://127.0.0.1:4222/", "nats://127.0.0.1:4222/a.*", "nats:///x", "nats://h:1/x?y=1"} {
		_, err := parseEventsURL(bad)
		assert.Error(t, err, bad)
	}
	ev, err := parseEventsURL("nats://u:secret@127.0.0.1:4222/orders.placed")
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:4222", ev.host)
	assert.Equal(t, "orders.placed", ev.subject)
	_, err = parseEventsURL("nats://u:secret@127.0.0.1:4222/a..b")
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "secret")

	var stdout, stderr syncBuffer
	err = run(t.Context(), []string{"-addr", "127.0.0.1:0", "-store", "mem://", "-events", natsURL + "/x"}, &stdout, &stderr)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "PostgreSQL")
}

// claimsInFlight sums idemkit_claims_in_flight on the demo's GET /metrics.
func claimsInFlight(t *testing.T, c *http.Client, url string) int {
	r := doHTTP(t, c, http.MethodGet, url+"/metrics", "", "")
	n := 0
	for line := range strings.Lines(string(r.body)) {
		if !strings.HasPrefix(line, "idemkit_claims_in_flight") {
			continue
		}
		var v float64
		if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
			n += int(v)
		}
	}
	return n
}
