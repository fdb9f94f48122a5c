package main

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idemkit/adapters/idemhttp"
)

// badOrder is an order the service refuses with 400, a final answer the
// idempotency middleware records: a key completed without an order.
const badOrder = `{"sku":"book","qty":0}`

// flood completes n keys of user over real HTTP, from 8 clients.
func flood(t *testing.T, base, user string, n int) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				r := doHTTP(t, client, http.MethodPost, base+"/orders", user, badOrder, "Idempotency-Key", "flood-"+strconv.Itoa(i))
				if r.status != http.StatusBadRequest {
					t.Errorf("flood %d: %d %s", i, r.status, r.body)
					return
				}
			}
		})
	}
	wg.Wait()
}

// TestRetryReplaysAfterAnotherUsersFlood is issue 27's demo case: alice
// completes a charge, another user completes 20,000 keys in a memory
// store of 10,000 entries, and alice's retry must replay her answer, not
// charge again. Before, the flood evicted alice's record and her retry
// ran the handler again.
func TestRetryReplaysAfterAnotherUsersFlood(t *testing.T) {
	cfg := defaultConfig()
	cfg.stack.Store = "mem://?capacity=10000"
	svc := startTestService(t, cfg)
	client := &http.Client{Timeout: 10 * time.Second}
	r := doHTTP(t, client, http.MethodPost, svc.url+"/orders", "alice", book, "Idempotency-Key", "charge-1")
	first := requireCreated(t, r.status, r.header, r.body, false)

	flood(t, svc.url, "mallory", 20_000)

	r = doHTTP(t, client, http.MethodPost, svc.url+"/orders", "alice", book, "Idempotency-Key", "charge-1")
	assert.Equal(t, first, requireCreated(t, r.status, r.header, r.body, true), "alice's retry")
	m := scrapeMetrics(t, svc.url, "idemkit_")
	assert.Positive(t, sum(m, "idemkit_evictions_total"), "the flood evicted nothing: the test proves nothing")
	assert.Zero(t, sum(m, "idemkit_store_refusals_total"), "refusals")
}

// TestFullStoreRefusesWith503 fills a memory store with slow requests'
// claims: the next request is refused with 503 and Retry-After, without
// running, and /metrics counts the refusal; once the slow requests end,
// every slow request's retry replays its one order (no claim was
// evicted), and the refused request runs.
func TestFullStoreRefusesWith503(t *testing.T) {
	cfg := defaultConfig()
	cfg.stack.Store = "mem://?capacity=4&shards=1"
	svc := startTestService(t, cfg)
	client := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			r := doHTTP(t, client, http.MethodPost, svc.url+"/orders", "u"+strconv.Itoa(i), book,
				"Idempotency-Key", "slow", delayHeader, "1500ms")
			requireCreated(t, r.status, r.header, r.body, false)
		})
	}
	// Wait, on the test goroutine, for the four claims to fill the store:
	// until then a probe runs, and its record gives way to a claim.
	for i := 0; ; i++ {
		r := doHTTP(t, client, http.MethodPost, svc.url+"/orders", "probe", book, "Idempotency-Key", "p"+strconv.Itoa(i))
		if r.status == http.StatusServiceUnavailable {
			break
		}
		requireCreated(t, r.status, r.header, r.body, false)
		require.Less(t, i, 500, "never refused")
		time.Sleep(5 * time.Millisecond)
	}
	r := doHTTP(t, client, http.MethodPost, svc.url+"/orders", "late", book, "Idempotency-Key", "k")
	p := requireProblem(t, r.status, r.header, r.body, http.StatusServiceUnavailable, idemhttp.ProblemUnavailable)
	assert.NotEmpty(t, p.Detail)
	assert.Equal(t, "1", r.header.Get("Retry-After"))
	assert.Empty(t, svcOrders(t, client, svc.url, "late"), "the refused request created an order")
	m := scrapeMetrics(t, svc.url, "idemkit_")
	assert.GreaterOrEqual(t, sum(m, "idemkit_store_refusals_total"), 1.0, "refusals counted")

	wg.Wait()
	for i := range 4 {
		r := doHTTP(t, client, http.MethodPost, svc.url+"/orders", "u"+strconv.Itoa(i), book, "Idempotency-Key", "slow")
		requireCreated(t, r.status, r.header, r.body, true)
		assert.Len(t, svcOrders(t, client, svc.url, "u"+strconv.Itoa(i)), 1, "u%d's orders", i)
	}
	r = doHTTP(t, client, http.MethodPost, svc.url+"/orders", "late", book, "Idempotency-Key", "k")
	requireCreated(t, r.status, r.header, r.body, false)
}

// svcOrders lists user's orders over HTTP.
func svcOrders(t *testing.T, client *http.Client, base, user string) []Order {
	t.Helper()
	r := doHTTP(t, client, http.MethodGet, base+"/orders", user, "")
	require.Equal(t, http.StatusOK, r.status, string(r.body))
	var orders []Order
	require.NoError(t, json.Unmarshal(r.body, &orders))
	return orders
}
