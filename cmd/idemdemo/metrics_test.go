package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/idemkit/idemkit/internal/redistest"
)

// scrapeMetrics returns the samples of GET /metrics whose name starts
// with prefix, by their whole series (name and labels).
func scrapeMetrics(t *testing.T, base, prefix string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(base + "/metrics")
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	got := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		got[line[:i]] = v
	}
	require.NoError(t, sc.Err())
	return got
}

// sum adds the samples of series that contain every one of parts.
func sum(samples map[string]float64, parts ...string) float64 {
	var n float64
next:
	for series, v := range samples {
		for _, p := range parts {
			if !strings.Contains(series, p) {
				continue next
			}
		}
		n += v
	}
	return n
}

// The demo's store is measured: after some orders /metrics has the
// store-operation latency per operation, with buckets for seconds; a
// bounded memory store's evictions are counted.
func TestMetricsShowStoreLatencyAndEvictions(t *testing.T) {
	cfg := defaultConfig()
	cfg.stack.Store = "mem://?capacity=2&shards=1"
	svc := startTestService(t, cfg)
	client := &http.Client{Timeout: 10 * time.Second}
	for i := range 5 {
		r := doHTTP(t, client, http.MethodPost, svc.url+"/orders", "alice", book, "Idempotency-Key", fmt.Sprint("k", i))
		requireCreated(t, r.status, r.header, r.body, false)
	}
	m := scrapeMetrics(t, svc.url, "idemkit_")
	assert.GreaterOrEqual(t, sum(m, "idemkit_store_duration_seconds_count{", `idemkit_store_operation="SetNX"`), 5.0, "SetNX latency")
	assert.GreaterOrEqual(t, sum(m, "idemkit_store_duration_seconds_count{", `idemkit_store_operation="CompareAndSwap"`), 5.0, "CompareAndSwap latency")
	assert.Contains(t, m, `idemkit_store_duration_seconds_bucket{idemkit_store_operation="SetNX",otel_scope_name="github.com/idemkit/idemkit/otel",otel_scope_schema_url="",otel_scope_version="",le="0.0005"}`)
	assert.GreaterOrEqual(t, sum(m, "idemkit_evictions_total"), 3.0, "evictions of a 2-entry store after 5 orders")
}

// A failing primary store opens the fallback's breaker: /metrics counts
// the transition from closed to open.
func TestMetricsCountBreakerTransitions(t *testing.T) {
	srv := redistest.Start(t)
	cfg := redisConfig(srv.Addr())
	cfg.stack.Fallback = "mem://"
	svc := startTestService(t, cfg)
	client := &http.Client{Timeout: 10 * time.Second}
	checkKeyMode(t, svc.url, "k1")
	srv.Stop()
	require.Eventually(t, func() bool {
		doHTTP(t, client, http.MethodPost, svc.url+"/orders", "alice", book, "Idempotency-Key", "k2")
		m := scrapeMetrics(t, svc.url, "idemkit_breaker_transitions_total")
		return sum(m, `idemkit_breaker_from="closed"`, `idemkit_breaker_state="open"`) == 1
	}, 15*time.Second, 50*time.Millisecond, "no breaker transition counted")
}

var traceIDAttr = regexp.MustCompile(`trace_id=([0-9a-f]{32})`)

// Log lines written inside an engine call carry the trace ID of the
// call's span.
func TestLogsCarryTraceIDs(t *testing.T) {
	var logs syncBuffer
	log := newLogger(&logs, -4) // debug: the engine logs admissions at debug
	cfg := defaultConfig()
	cfg.stack.Store = "mem://"
	be, err := openBackend(context.Background(), cfg, log)
	require.NoError(t, err)
	t.Cleanup(func() { _ = be.Close() })
	spans := tracetest.NewSpanRecorder()
	be.tel.RegisterSpanProcessor(spans)
	h, err := newApp(be, cfg, log)
	require.NoError(t, err)
	a := &testApp{t: t, handler: h, orders: be.orders}
	created(t, a.post("/orders", "alice", book, "Idempotency-Key", "k1"), false)

	var admitted string
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, "idemkit: admitted") {
			admitted = line
		}
	}
	require.NotEmpty(t, admitted, "no admission logged: %s", logs.String())
	m := traceIDAttr.FindStringSubmatch(admitted)
	require.NotNil(t, m, "no trace_id on %q", admitted)
	var do []string
	for _, s := range spans.Ended() {
		if s.Name() == "idemkit.Do" {
			do = append(do, s.SpanContext().TraceID().String())
		}
	}
	require.Len(t, do, 1)
	assert.Equal(t, do[0], m[1], "the log line's trace_id is the Do span's")
}
